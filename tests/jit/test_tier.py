"""Tier-up (``@at.autotuned(tier_up=True)``), with real JAX on the CPU and a real SQLite cache: a
winner whose stored compile cost is much above the default's is compiled on a background thread
while the default serves; the winner takes over at a later call; a background failure warns once
and keeps the default; a process ends cleanly while the winner compiles. The order of events is
held by the `_tier.before_compile` hook, never by a wall-clock bound."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _repo import repo_env
from _tiers import FOR, body, counted, make, put_entry, reference  # noqa: F401

import autotune as at
from autotune.jit import _tier
from autotune.program import _keys


@pytest.fixture
def hook():
    """Sets `_tier.before_compile` for one test."""
    yield lambda f: setattr(_tier, "before_compile", f)
    _tier.before_compile = None


def test_the_default_serves_at_once_and_the_winner_takes_over(tmp_path, hook):
    path, x = tmp_path / "c.db", jnp.arange(4.0)
    put_entry(path, x)
    fn = make(path)
    gate, started = threading.Event(), threading.Event()
    hook(lambda slot: (started.set(), gate.wait(60)))
    first = fn(x)  # returns while the background compile is held at the gate
    slot = fn.tier.slot_for(x)
    assert slot is not None and slot.state == "compiling" and not slot.done.is_set()
    assert started.wait(60)
    second = fn(x)  # still compiling: the default again
    assert slot.state == "compiling"
    gate.set()
    assert slot.wait(120)
    third = fn(x)  # the first call after it is built runs the winner
    assert slot.state == "winner" and slot.error is None
    assert fn.config_for(x).config.to_dict()["l"]["repr"] == "for"
    for y in (first, second, third, fn(x)):
        np.testing.assert_allclose(y, reference(x), rtol=1e-6)


def test_a_winner_that_compiles_about_as_fast_takes_the_usual_path(tmp_path):
    path, x = tmp_path / "c.db", jnp.arange(4.0)
    put_entry(path, x, winner_compile_s=0.012)
    fn = make(path)
    np.testing.assert_allclose(fn(x), reference(x), rtol=1e-6)
    assert fn.tier.slot_for(x) is None
    assert fn.last_lookup.source == "cache"  # the decorator's own trace applied the winner


def test_a_winner_that_tiering_does_not_pay_for_compiles_up_front(tmp_path):
    """Tier-up applies where it costs less than the winner's up-front compile at the decorator's
    expected_calls (`_rule.entry_pays`): not for a winner so fast that the 62 calls the default
    serves beside its 1 s compile (62 µs of the winner's) are worth less than the default's 10 ms
    compile. The decorator's own trace applies the winner, as without tier_up."""
    path, x = tmp_path / "c.db", jnp.arange(4.0)
    put_entry(path, x, winner_run_s=1e-6)
    fn = make(path, expected_calls=1000)
    np.testing.assert_allclose(fn(x), reference(x), rtol=1e-6)
    assert fn.tier.slot_for(x) is None
    assert fn.last_lookup.source == "cache" and fn.last_lookup.config == at.Config(FOR)


@pytest.mark.parametrize("winner_compile_s", [1.0, 0.012], ids=["tiered", "usual"])
def test_a_first_call_traces_the_function_as_often_as_the_plain_decorator(tmp_path, winner_compile_s):
    path, x = tmp_path / "c.db", jnp.arange(4.0)
    put_entry(path, x, winner_compile_s=winner_compile_s)
    counts = {}
    for tier_up in (False, True):
        traces: list = []
        fn = counted(path, traces, tier_up=tier_up)
        np.testing.assert_allclose(fn(x), reference(x), rtol=1e-6)
        if tier_up:
            slot = fn.tier.slot_for(x)
            assert (slot is not None) == (winner_compile_s == 1.0)
            if slot is not None:  # the winner compiles from the first call's trace: no trace of its own
                assert slot.wait(120)
                np.testing.assert_allclose(fn(x), reference(x), rtol=1e-6)
                assert slot.state == "winner"
        counts[tier_up] = len(traces)
    assert counts[True] == counts[False] == 1


def test_without_an_entry_it_is_the_plain_decorator(tmp_path):
    fn = make(tmp_path / "c.db")
    x = jnp.arange(3.0)
    np.testing.assert_allclose(fn(x), reference(x), rtol=1e-6)
    assert fn.tier.slot_for(x) is None


def test_a_background_failure_warns_once_and_keeps_the_default(tmp_path, hook):
    path, x = tmp_path / "c.db", jnp.arange(4.0)
    put_entry(path, x)
    fn = make(path)

    def fail(slot):
        raise RuntimeError("no memory for the winner")

    hook(fail)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [fn(x)]
        assert fn.tier.slot_for(x).wait(60)
        outs += [fn(x) for _ in range(3)]
    ours = [w for w in caught if issubclass(w.category, RuntimeWarning) and "tier-up" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert "tier:smooth" in str(ours[0].message) and "no memory for the winner" in str(ours[0].message)
    assert "tier_up=True" in str(ours[0].message)  # the fix: compile it up front, or re-tune
    assert fn.tier.slot_for(x).state == "default (winner failed)"
    for y in outs:
        np.testing.assert_allclose(y, reference(x), rtol=1e-6)


def test_static_arguments_are_left_out_of_the_winner_call(tmp_path, hook):
    path = tmp_path / "c.db"

    def smooth(x, scale):
        return at.loop(body, x, length=8, name="l")[0] * scale

    plain = at.autotuned(smooth, cache=str(path), key="tier:smooth", static_argnums=1)
    x = jnp.arange(4.0)
    lookup = plain.config_for(x, 2.0)
    entry = at.CacheEntry(
        function_key="tier:smooth", fingerprint=lookup.fingerprint, signature=lookup.signature,
        device=_keys.device_info(), config=FOR, sites={"l": {"kind": "loop", "length": 8, "has_ys": False}},
        measurements={}, objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
        cost=1.0, default_cost=2.0, default_config={},
        pareto=[{"config": FOR, "compile_cost_s": 1.0, "run_cost_s": 5e-3},
                {"config": {}, "compile_cost_s": 0.01, "run_cost_s": 1e-2}],
    )  # fmt: skip
    with at.Cache(str(path)) as c:
        c.put(entry)
    fn = at.autotuned(smooth, cache=str(path), key="tier:smooth", static_argnums=1, tier_up=True)
    want = jax.jit(smooth, static_argnums=1)(x, 2.0)
    np.testing.assert_allclose(fn(x, 2.0), want, rtol=1e-6)
    assert fn.tier.slot_for(x, 2.0).wait(120)
    np.testing.assert_allclose(fn(x, 2.0), want, rtol=1e-6)
    assert fn.tier.slot_for(x, 2.0).state == "winner"


EXIT_MID_COMPILE = textwrap.dedent(
    """
    import sys, threading
    import jax, jax.numpy as jnp
    import autotune as at
    from autotune.jit import _tier
    sys.path.insert(0, sys.argv[2])
    from _tiers import make, put_entry
    x = jnp.arange(4.0)
    put_entry(sys.argv[1], x)
    fn = make(sys.argv[1])
    started = threading.Event()
    _tier.before_compile = lambda slot: started.set()
    fn(x)
    assert started.wait(60)
    print("exiting", fn.tier.slot_for(x).thread.daemon, flush=True)
    """
)

BEFORE_COMPILE = EXIT_MID_COMPILE.replace(
    "lambda slot: started.set()", "lambda slot: (started.set(), __import__('time').sleep(2))"
)  # exits before the compile starts: at exit it is skipped


INTERRUPTED_AT_EXIT = textwrap.dedent(
    """
    import signal, sys, threading
    import jax, jax.numpy as jnp
    import autotune as at
    from autotune.jit import _tier
    sys.path.insert(0, sys.argv[2])
    from _tiers import make, put_entry
    if sys.argv[3] == "SIGTERM":  # a handler that exits, as servers install
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    x = jnp.arange(4.0)
    put_entry(sys.argv[1], x, length=3000)
    fn = make(sys.argv[1], length=3000)
    started = threading.Event()
    _tier.before_compile = lambda slot: started.set()
    fn(x)
    assert started.wait(60)
    print("exiting", flush=True)
    """
)


@pytest.mark.parametrize("sig, status", [("SIGINT", -signal.SIGINT), ("SIGTERM", 143)])
@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_second_interrupt_while_the_exit_waits_for_the_compile_exits_with_its_usual_status(tmp_path, sig, status):
    """The winner's compile (3,000 steps written out: seconds inside XLA) is under way when the
    program ends; two interrupts arrive while the exit waits for it (a user's second Ctrl-C, or a
    second SIGTERM whose handler calls sys.exit). The process ends at once with the status the
    interrupt asks for, never an abort of a thread inside XLA (exit 134, "FATAL")."""
    tests = str(__import__("pathlib").Path(__file__).parents[1])
    child = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_AT_EXIT, str(tmp_path / "c.db"), tests, sig],
        env=repo_env(PYTHONDONTWRITEBYTECODE="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "exiting"
        for _ in range(2):
            time.sleep(0.3)
            child.send_signal(getattr(signal, sig))
        _, err = child.communicate(timeout=300)
    finally:
        child.kill()
    assert child.returncode == status, err[-2000:]
    assert "FATAL" not in err and "Fatal" not in err, err[-2000:]


@pytest.mark.parametrize("script", [EXIT_MID_COMPILE, EXIT_MID_COMPILE, BEFORE_COMPILE], ids=["mid", "again", "before"])
@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_the_process_exits_cleanly_while_the_winner_compiles(tmp_path, script):
    tests = str(__import__("pathlib").Path(__file__).parents[1])
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "c.db"), tests],
        env=repo_env(PYTHONDONTWRITEBYTECODE="1"),
        capture_output=True,
        text=True,
        timeout=300,  # a hang fails here; a clean exit takes seconds
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "exiting True" in done.stdout
    assert "Traceback" not in done.stderr and "Fatal" not in done.stderr
