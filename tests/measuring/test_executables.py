"""The executables a process keeps for re-timing: the most recent configs and those retained, configs
with one program sharing one executable."""

from __future__ import annotations

import autotune as at
from autotune.measuring._executables import RECENT, ExecutableStore

FOR = {"l": {"repr": "for"}}


def test_the_store_keeps_recent_and_retained_configs_and_shares_one_program():
    m = lambda h, c: at.Measurement(1, 1, 1, 1, 0, 1, config=at.Config(c), program_hash=h)  # noqa: E731
    exe = lambda h, c: type("E", (), {"measurement": m(h, c)})()  # noqa: E731
    store = ExecutableStore(recent=2)
    store.put("a", exe("h1", {}))
    store.alias("b", m("h1", FOR))  # b lowered to a's program
    store.alias("z", m("nope", FOR))  # nothing kept under that hash: not remembered
    assert "a" in store and "b" in store and "z" not in store and len(store) == 2
    store.put("c", exe("h2", {}))  # a falls out; b still holds h1
    assert "a" not in store and store.program("h1") is not None
    store.retain(["c"])
    assert list(store._configs) == ["c"] and store.program("h1") is None
    for key in "defg":
        store.put(key, exe(key, {}))
    assert "c" in store and len(store) == 3  # retained ones stay beyond the recent bound
    assert RECENT == 8
