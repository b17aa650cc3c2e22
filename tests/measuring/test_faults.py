"""Cache faults as the user meets them: through ``@at.autotuned`` and ``autotune best``.

Every fault is real: random bytes in the file, an exclusive SQLite lock held by another
process, a read-only directory (as root without CAP_DAC_OVERRIDE, via setpriv), a missing
directory, a cache written by a newer schema, and a function edited between two processes.
Reading the cache never breaks the program: the default config runs, results are right,
and there is at most one warning (exactly one where the cache cannot be read).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import jax.numpy as jnp
import pytest
from _faults import ENV, FOR, call_and_count, make, put_entry
from _privileges import read_only_dir, rerun_without_dac_override

import autotune as at
from autotune.cache import LOCK_WAIT_BUDGET_S, SCHEMA_VERSION, _sqlite
from autotune.program import _keys


def cli_best(cache, *extra):
    return subprocess.run(
        [sys.executable, "-m", "autotune", "best", "--cache", str(cache), *extra],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ------------------------------------------------------------------------- unreadable caches


@pytest.mark.parametrize("fault", ["corrupt", "newer-schema"])
def test_an_unreadable_cache_runs_the_default_warns_once_and_the_cli_says_why(tmp_path, fault):
    path = tmp_path / "c.db"
    if fault == "corrupt":
        path.write_bytes(b"\x00garbage" + os.urandom(8184))
        words = ["not a SQLite database"]
    else:
        put_entry(path, make(path), jnp.zeros(3))
        with sqlite3.connect(path) as con:
            con.execute("UPDATE autotune_schema_version SET version = ?", (SCHEMA_VERSION + 1,))
        words = [f"schema version {SCHEMA_VERSION + 1}", f"schema version {SCHEMA_VERSION}", "Upgrade jax-autotune"]
    source, ours = call_and_count(make(path))
    assert source == "default (cache error)"
    assert len(ours) == 1, [str(w.message) for w in ours]
    for w in words:
        assert w in str(ours[0].message), str(ours[0].message)
    r = cli_best(path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    text = " ".join(r.stderr.split())
    assert text.startswith("error:") and str(path) in r.stderr.replace("\n", ""), r.stderr
    for w in words:
        assert w in text, text


def test_the_cli_error_for_a_corrupt_cache_is_one_line(tmp_path):
    path = tmp_path / "c.db"
    path.write_bytes(os.urandom(4096))
    r = cli_best(path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


# ----------------------------------------------------------------------------- missing


def test_a_missing_directory_runs_the_default_silently_and_creates_nothing(tmp_path):
    path = tmp_path / "nowhere" / "deeper" / "c.db"
    source, ours = call_and_count(make(path))
    assert source == "default" and ours == []  # nothing tuned yet is not a fault
    assert not (tmp_path / "nowhere").exists()
    r = cli_best(path)
    assert r.returncode == 1 and r.stderr.strip() == "no cache entry matches." and "Traceback" not in r.stderr


# ------------------------------------------------------------------------------ locked

HOLD_LOCK = textwrap.dedent("""
    import sqlite3, sys, time
    path, mode, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    con = sqlite3.connect(path, isolation_level=None, timeout=30)
    if mode == "rollback":
        con.execute("PRAGMA journal_mode=DELETE")   # a file some other tool switched out of WAL
    con.execute("BEGIN EXCLUSIVE")
    con.execute("UPDATE autotune_entries SET cost = cost")
    print("locked", flush=True)
    time.sleep(seconds)   # the behaviour under test: the lock held this long (or until killed)
    con.execute("COMMIT")
""")


def hold_lock(path, mode, seconds):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path), mode, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_locked_cache_in_wal_mode_is_still_read(tmp_path):
    """autotune writes its cache in WAL mode, where a writer's exclusive lock does not block readers."""
    path = tmp_path / "c.db"
    put_entry(path, make(path), jnp.zeros(3))
    holder = hold_lock(path, "wal", 60)
    try:
        left = _sqlite.LOCK_WAIT.remaining()
        fn = make(path)
        lookup = fn.config_for(jnp.zeros(3))
        source, ours = call_and_count(fn)
        assert lookup.source == "cache" and lookup.config == at.Config(FOR) and ours == []
        assert _sqlite.LOCK_WAIT.remaining() == left  # read under the lock, never waiting on it
        r = cli_best(path, "--json")
        assert r.returncode == 0 and at.Config.from_dict(json.loads(r.stdout)[0]["config"]) == at.Config(FOR), r.stderr
    finally:
        holder.kill()
        holder.wait()


# The lookups run in a fresh process, whose lock-wait budget is untouched: they wait for a go
# file, so the lock is taken after the process has imported JAX and before it looks up. After
# each lookup it says what is left of the budget and the sleeps the lookup asked for (counted,
# each still slept): what a lookup waited is told without a clock.
LOOKUPS = textwrap.dedent("""
    import json, os, sys, threading, time, warnings
    import jax.numpy as jnp
    import numpy as np
    sys.path.insert(0, sys.argv[3])
    from _faults import make, reference
    from autotune.cache import _sqlite
    path, n, go = sys.argv[1], int(sys.argv[2]), sys.argv[4]
    fn = make(path)
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.005)
    asked, sleep, me = [], time.sleep, threading.get_ident()
    time.sleep = lambda s: (threading.get_ident() == me and asked.append(s)) or sleep(s)
    left, sleeps = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(n):  # a new input shape each time: a new lookup each time
            x = jnp.linspace(0.0, 1.0, 3 + i)
            before = len(asked)
            y = fn(x)
            left.append(_sqlite.LOCK_WAIT.remaining())
            sleeps.append(asked[before:])
            np.testing.assert_allclose(y, reference(x), rtol=1e-6)
        source = fn.config_for(jnp.linspace(0.0, 1.0, 3)).source
    ours = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning) and "autotune" in str(w.message)]
    print(json.dumps({"left": left, "sleeps": sleeps, "source": source, "warnings": ours}), flush=True)
""")


def lookups_under_lock(tmp_path, mode, seconds, n):
    """Run ``n`` first calls (new shapes) in a fresh process while another process holds the lock."""
    path, go = tmp_path / "c.db", tmp_path / "go"
    put_entry(path, make(path), jnp.zeros(3))
    proc = subprocess.Popen(
        [sys.executable, "-c", LOOKUPS, str(path), str(n), str(Path(__file__).parents[1]), str(go)],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    holder = None
    try:
        assert proc.stdout.readline().strip() == "ready", proc.communicate()
        holder = hold_lock(path, mode, seconds)
        go.touch()
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1]), path
    finally:
        if proc.poll() is None:
            proc.kill()
        if holder is not None and seconds > 10:
            holder.kill()
        if holder is not None:
            holder.wait(timeout=60)


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_short_exclusive_lock_is_waited_out(tmp_path):
    """A rollback-journal file locked for 2 s: the lookup waits for it and then reads the entry."""
    got, _ = lookups_under_lock(tmp_path, "rollback", 2, 1)
    assert got["source"] == "cache" and got["warnings"] == [], got
    assert got["sleeps"][0] and got["left"][0] < LOCK_WAIT_BUDGET_S, got  # it did wait (the lock was held)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_cache_locked_for_long_costs_a_process_at_most_its_lock_budget(tmp_path):
    """A rollback-journal file that stays locked: the first lookup waits the process's 3 s budget,
    every later lookup (each new input shape) tries once and runs the default at once; one warning."""
    n = 6
    got, path = lookups_under_lock(tmp_path, "rollback", 120, n)
    assert got["source"] == "default (cache error)" and len(got["warnings"]) == 1, got
    assert "locked" in got["warnings"][0] and "3 s budget" in got["warnings"][0], got
    assert got["sleeps"][0] and got["left"][0] == 0.0, got  # the budget was spent waiting, not skipped
    assert got["sleeps"][1:] == [[]] * (n - 1), got  # every later lookup tried once, without a wait


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_the_cli_on_a_cache_locked_for_long_says_so(tmp_path):
    path = tmp_path / "c.db"
    put_entry(path, make(path), jnp.zeros(3))
    holder = hold_lock(path, "rollback", 120)
    try:
        r = cli_best(path)
        assert r.returncode == 2 and "locked" in r.stderr and "Traceback" not in r.stderr, r.stderr
    finally:
        holder.kill()
        holder.wait()


# --------------------------------------------------------------------------- read-only


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_read_only_directory_is_read_and_never_written(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    put_entry(ro / "c.db", make(ro / "c.db"), jnp.zeros(3))  # closed: no -wal/-shm files left
    before = sorted(p.name for p in ro.iterdir())
    with read_only_dir(ro) as enforced:
        if not enforced:
            rerun_without_dac_override(__file__, "test_a_read_only_directory_is_read_and_never_written", ENV, 300, "")
            return
        fn = make(ro / "c.db")
        lookup = fn.config_for(jnp.zeros(3))
        assert lookup.source == "cache" and lookup.config == at.Config(FOR)
        source, ours = call_and_count(fn)  # the cached "for" config, right results, no warning
        assert ours == []
        source, ours = call_and_count(make(ro / "absent.db"))
        assert source == "default" and ours == []
        r = cli_best(ro / "c.db", "--json")
        assert r.returncode == 0 and at.Config.from_dict(json.loads(r.stdout)[0]["config"]) == at.Config(FOR), r.stderr
        assert sorted(p.name for p in ro.iterdir()) == before


# ------------------------------------------------------------- foreign and stale entries

MODULE = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    CACHE = {cache!r}

    @at.autotuned(cache=CACHE)
    def edited(x):
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=8, name="l")[0]

    @at.autotuned(cache=CACHE)
    def untouched(x):
        return at.loop(lambda c, _: (c * 0.5 + 2.0, None), x, length=8, name="l")[0]

    X = jnp.linspace(0.0, 1.0, 16)
""")

TUNE_THEN_REPORT = textwrap.dedent("""
    import json, sys
    import autotune as at
    from autotune.cache._store import entry_from_result
    import edit_me as m

    if sys.argv[1] == "tune":
        for fn in (m.edited, m.untouched):
            ctl = fn.autotune
            r = at.tune(ctl.fun, m.X, n_trials=2, sampler="random", timing={"target_s": 0.01, "min_reps": 3},
                        confirm_rounds=1, isolate=False, function_key=ctl.key, storage=sys.argv[2])
            ctl.cache.put(entry_from_result(r, ctl.key))
    print(json.dumps({fn.key: fn.config_for(m.X).source for fn in (m.edited, m.untouched)}))
""")


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_an_edited_function_or_another_device_never_gets_the_entry(tmp_path):
    cache = tmp_path / "c.db"
    (tmp_path / "edit_me.py").write_text(MODULE.format(cache=str(cache)))

    def run(*args):
        r = subprocess.run(
            [sys.executable, "-c", TUNE_THEN_REPORT, *args],
            cwd=tmp_path,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    # Process A tunes both functions and stores the winners.
    assert run("tune", str(tmp_path / "s.db")) == {"edit_me:edited": "cache", "edit_me:untouched": "cache"}
    # Someone edits one function's body; process B must not apply its old entry.
    source = (tmp_path / "edit_me.py").read_text()
    (tmp_path / "edit_me.py").write_text(source.replace("c * 0.5 + 1.0", "c * 0.25 + 1.0"))
    assert run("report") == {"edit_me:edited": "default", "edit_me:untouched": "cache"}

    # The untouched function's real entry, re-keyed for another device or jax version, is never applied.
    sys.path.insert(0, str(tmp_path))
    try:
        import edit_me as m
    finally:
        sys.path.remove(str(tmp_path))
    store = at.Cache(str(cache))
    (entry,) = store.entries(function_key="edit_me:untouched")
    store.delete("edit_me:untouched")
    for changes in (
        {"device_kind": "TPU v9"},
        {"platform": "gpu", "device_kind": "NVIDIA H200"},
        {"jax": "0.0.1"},
        {"jaxlib": "0.0.1"},
        {"device_count": 8},
    ):
        store.put(at.CacheEntry.from_dict({**entry.to_dict(), "device": {**entry.device, **changes}}))
        assert m.untouched.config_for(m.X).source == "default", changes
        store.delete("edit_me:untouched")
    store.put(entry)
    assert m.untouched.config_for(m.X).source == "cache"


# ------------------------------------------------------------ tampered and hostile rows


def tamper(path, sql, *params):
    with sqlite3.connect(path) as con:
        con.execute(sql, params)


@pytest.mark.parametrize("fault", ["device", "sites", "nested"])
@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_row_whose_parts_disagree_is_never_applied(tmp_path, fault):
    path = tmp_path / "c.db"
    put_entry(path, make(path), jnp.zeros(3))
    if fault == "device":  # only the JSON edited: the device_key column still says this machine
        tamper(
            path, "UPDATE autotune_entries SET device = ?", json.dumps({**_keys.device_info(), "device_kind": "TPU v9"})
        )
        words = "is inconsistent: its device JSON gives the device key"
    elif fault == "sites":  # the config names a site the entry's sites do not have
        tamper(
            path,
            "UPDATE autotune_entries SET sites = ?",
            json.dumps({"other": {"kind": "loop", "length": 8, "has_ys": False}}),
        )
        words = "names a site that is not in the entry's sites"
    else:  # deeply nested JSON: a RecursionError unless caught
        tamper(path, "UPDATE autotune_entries SET measurements = ?", "[" * 100_000 + "]" * 100_000)
        words = "nested too deeply"
    source, ours = call_and_count(make(path))
    assert source == "default (cache error)" and len(ours) == 1, [str(w.message) for w in ours]
    message = str(ours[0].message)
    assert "row 1 of autotune_entries (function 'faults:smooth')" in message and words in message, message
    assert "Cache.delete('faults:smooth')" in message, message
    for command in ("best", "list"):
        r = subprocess.run(
            [sys.executable, "-m", "autotune", command, "--cache", str(path)],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert words in r.stderr, r.stderr
