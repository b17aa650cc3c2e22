"""Recording (autotune/jit/_record.py and its hook in the decorator): the first call per signature
writes a pending row; values mode keeps .npy values under a cap; recording never breaks or
stalls the program."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _repo import repo_env

import autotune as at
from autotune import _errors
from autotune._errors import ConfigError
from autotune.cache import Cache
from autotune.jit import _record
from autotune.jit._decorator import controller


@pytest.fixture(autouse=True)
def fresh_recorder(tmp_path, monkeypatch):
    """Each test records into its own cache, from a clean slate."""
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache.db"))
    monkeypatch.delenv("AUTOTUNE_RECORD", raising=False)
    monkeypatch.delenv("AUTOTUNE_RECORD_MAX_MB", raising=False)
    _record._seen.clear()
    _errors._warned.clear()
    yield
    assert _record.flush(30)


def body(x, n):
    return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=n, name="smooth")[0]


def pending(tmp_path):
    assert _record.flush(30)
    return Cache(tmp_path / "cache.db").pending()


def test_first_call_per_signature_writes_one_row(tmp_path):
    fn = at.autotuned(body, static_argnums=(1,), expected_calls=500, record=True)
    x = jnp.ones(8)
    np.testing.assert_allclose(fn(x, 4), jax.jit(body, static_argnums=1)(x, 4))
    fn(x, 4)
    fn(x + 1, 4)  # same signature: no new row
    [rec] = pending(tmp_path)
    lookup = fn.config_for(x, 4)
    assert (rec.function_key, rec.fingerprint, rec.signature, rec.device_key) == (
        "test_record:body",
        lookup.fingerprint,
        lookup.signature,
        lookup.device_key,
    )
    assert rec.location == {"module": "test_record", "qualname": "body", "file": os.path.abspath(__file__)}
    assert rec.abstract == {"version": 1, "args": [{"shape": [8], "dtype": "float32"}, {"static": 4}], "kwargs": {}}
    assert rec.objective == {"expected_calls": 500.0, "compile_weight": 1.0, "runtime_weight": 1.0}
    assert rec.options == {"static_argnums": [1]} and rec.replayable and rec.why_not is None and rec.values is None
    fn(jnp.ones(16), 4)
    fn(x, 6)
    assert sorted(
        r.abstract["args"][0]["shape"][0] * 10 + r.abstract["args"][1]["static"] for r in pending(tmp_path)
    ) == [84, 86, 164]


def test_shape_mode_hands_out_the_jit_object_itself():
    plain = at.autotuned(body, static_argnums=(1,))
    recorded = at.autotuned(body, static_argnums=(1,), record=True)
    assert type(recorded) is type(plain) and not isinstance(recorded, at.Autotuned)
    assert recorded.autotune.record_mode == "shapes" and plain.autotune.record_mode is None
    values = at.autotuned(body, static_argnums=(1,), record="values")
    assert isinstance(values, at.Autotuned) and values.record_mode == "values"


def test_the_environment_turns_recording_on(tmp_path, monkeypatch):
    for raw, want in (("1", "shapes"), ("values", "values"), ("0", None), ("", None), ("off", None)):
        monkeypatch.setenv("AUTOTUNE_RECORD", raw)
        assert controller(at.autotuned(body)).record_mode == want
    monkeypatch.setenv("AUTOTUNE_RECORD", "1")
    fn = at.autotuned(body, static_argnums=(1,))
    fn(jnp.ones(3), 2)
    assert len(pending(tmp_path)) == 1
    monkeypatch.setenv("AUTOTUNE_RECORD", "values")
    assert at.autotuned(body, record=True).record_mode == "values"  # the more complete mode wins


def test_a_bad_setting_warns_once_and_a_bad_argument_raises(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_RECORD", "yes please")
    with pytest.warns(
        RuntimeWarning,
        match=r"AUTOTUNE_RECORD='yes please' is not 1, values or 0; recording "
        "stays off",
    ):
        assert at.autotuned(body).autotune.record_mode is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        at.autotuned(body)  # once
    with pytest.raises(ConfigError, match=r"record='always'.*False, True \(shapes\) or 'values'"):
        at.autotuned(body, record="always")


def donate(x, y):
    return x * 2.0 + y


def test_values_mode_keeps_the_first_calls_values_as_npy(tmp_path):
    fn = at.autotuned(donate, record="values", donate_argnums=(0,))
    x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    expect = np.array(x)  # a copy: x is donated
    out = fn(x, 1.5)  # a donated array and a weak Python float
    np.testing.assert_allclose(out, expect * 2 + 1.5)
    fn(jnp.zeros((2, 3)), 7.0)  # same signature: the first call's values stay
    [rec] = pending(tmp_path)
    assert rec.abstract["args"][1] == {"shape": [], "dtype": "float32", "weak": True}
    files = rec.value_files
    assert len(files) == 2 and rec.values["note"] is None
    a = [np.load(os.path.join(Cache(tmp_path / "cache.db").values_dir, f), allow_pickle=False) for f in files]
    np.testing.assert_array_equal(a[0], expect)
    assert a[1].dtype == np.float32 and a[1].item() == 1.5
    assert rec.values["bytes"] == sum(
        os.path.getsize(os.path.join(Cache(tmp_path / "cache.db").values_dir, f)) for f in files
    )


def keyed(k, x):
    return x + jax.random.normal(k, x.shape, x.dtype).astype(x.dtype)


def test_values_of_bfloat16_and_raw_keys(tmp_path):
    # Typed key arrays (jax.random.key) do not reach recording: _keys.signature cannot name their
    # dtype yet (reported to the lead); _abstract describes them (test_abstract.py).
    fn = at.autotuned(keyed, record="values")
    k, x = jax.random.PRNGKey(3), jnp.linspace(0, 1, 4, dtype=jnp.bfloat16)
    fn(k, x)
    [rec] = pending(tmp_path)
    assert rec.abstract["args"] == [{"shape": [2], "dtype": "uint32"}, {"shape": [4], "dtype": "bfloat16"}]
    vdir = Cache(tmp_path / "cache.db").values_dir
    kd, xs = (np.load(os.path.join(vdir, f), allow_pickle=False) for f in rec.value_files)
    np.testing.assert_array_equal(kd, np.asarray(k))
    assert xs.dtype == np.uint16 and (xs.view(jnp.bfloat16) == np.asarray(x)).all()


def test_over_the_cap_only_shapes_are_kept_and_the_row_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_RECORD_MAX_MB", "0.001")  # 1 KiB
    fn = at.autotuned(donate, record="values")
    fn(jnp.ones(1024), jnp.ones(1024))  # 8 KiB
    [rec] = pending(tmp_path)
    assert rec.value_files == [] and rec.values["bytes"] == 0
    assert (
        rec.values["note"] == "the arguments hold 8.0 KiB, over the 1.0 KiB cap (AUTOTUNE_RECORD_MAX_MB): shapes only"
    )
    assert not os.path.exists(Cache(tmp_path / "cache.db").values_dir)
    fn(jnp.ones(8), jnp.ones(8))  # under the cap
    assert [len(r.value_files) for r in pending(tmp_path)] == [0, 2]
    monkeypatch.setenv("AUTOTUNE_RECORD_MAX_MB", "lots")
    with pytest.warns(RuntimeWarning, match="AUTOTUNE_RECORD_MAX_MB='lots' is not a number"):
        assert _record.max_bytes() == 64 * 2**20


def test_lowering_records_shapes_without_values(tmp_path):
    fn = at.autotuned(donate, record="values")
    fn.lower(jnp.ones(3), jnp.ones(3))
    [rec] = pending(tmp_path)
    assert rec.value_files == [] and "not at a call" in rec.values["note"]


class Opts:
    def __hash__(self):
        return 0

    def __eq__(self, other):
        return isinstance(other, Opts)


def with_opts(x, opts):
    return x + 1.0


def test_unrebuildable_statics_and_local_functions_are_recorded_as_not_replayable(tmp_path):
    at.autotuned(with_opts, static_argnums=(1,), record=True)(jnp.ones(2), Opts())

    def local(x):
        return x * 2.0

    at.autotuned(local, key="test_record:local", record=True)(jnp.ones(2))
    rows = {r.function_key: r for r in pending(tmp_path)}
    assert not rows["test_record:with_opts"].replayable
    assert rows["test_record:with_opts"].why_not.startswith(
        "argument 1 (opts) is a test_record.Opts, which cannot be stored as JSON"
    )
    assert not rows["test_record:local"].replayable
    assert (
        "is defined inside another function, so another process cannot import it" in rows["test_record:local"].why_not
    )


def test_a_broken_cache_costs_one_warning_and_never_the_call(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    fn = at.autotuned(donate, cache=str(blocker / "cache.db"), record=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        np.testing.assert_allclose(fn(jnp.ones(2), jnp.ones(2)), [3.0, 3.0])
        fn(jnp.ones(3), jnp.ones(3))
        assert _record.flush(30)
    texts = [str(w.message) for w in seen if "record" in str(w.message)]
    assert len(texts) == 1 and texts[0].startswith("autotune: could not record test_record:donate for tuning later"), (
        texts
    )


# Every wait on the lock budget is noted: on which thread, and whether the call had returned by
# then. The writer's waits are held until the call returns: a call that waited for its writer
# would hold them 120 s and show it (False), without a clock bound on the call.
RECORD_WHILE_LOCKED = textwrap.dedent("""
    import json, sys, threading, warnings
    import jax.numpy as jnp
    import autotune as at
    from autotune.jit import _record
    from autotune.cache import Cache, _sqlite

    def f(x):
        return x + 1.0

    returned, waits, wait = threading.Event(), [], _sqlite.LOCK_WAIT.wait

    def noted(attempt):
        on_call = threading.current_thread() is threading.main_thread()
        waits.append((on_call, returned.is_set() if on_call else returned.wait(120)))
        return wait(attempt)

    _sqlite.LOCK_WAIT.wait = noted
    fn = at.autotuned(f, cache=sys.argv[1], key="locked:f", record=True)
    at.autotuned(f, cache=sys.argv[1], key="warm:f")(jnp.ones(2)).block_until_ready()  # backend up, not recorded
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn(jnp.ones(3)).block_until_ready()
        returned.set()
        _record.flush(60)
    print(json.dumps({"waits": waits, "left": _sqlite.LOCK_WAIT.remaining(),
                      "warnings": [str(w.message) for w in seen],
                      "rows": [r.function_key for r in Cache(sys.argv[1]).pending()]}))
""")


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_locked_cache_skips_the_row_without_stalling_the_call(tmp_path):
    path = tmp_path / "locked.db"
    at.autotuned(donate, cache=str(path), record=True)(jnp.ones(1), jnp.ones(1))  # create the file
    assert _record.flush(30)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import sqlite3, sys, time
        con = sqlite3.connect(sys.argv[1], isolation_level=None)
        con.execute("BEGIN EXCLUSIVE")   # WAL mode: blocks every writer, not readers
        print("locked", flush=True)
        time.sleep(120)   # the behaviour under test: the lock held until the test kills the holder
    """),
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        r = subprocess.run(
            [sys.executable, "-c", RECORD_WHILE_LOCKED, str(path)],
            env=repo_env(),
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["warnings"] == [] and got["rows"] == ["test_record:donate"], got
    # The writer waited out the 3 s lock budget in the background, after the call had returned;
    # the call did not wait.
    assert got["waits"] and got["waits"] == [[False, True]] * len(got["waits"]) and got["left"] == 0.0, got


SCRIPT = textwrap.dedent("""
    import json, sys
    import jax.numpy as jnp
    import autotune as at
    from autotune.jit import _record
    from autotune.cache import Cache

    @at.autotuned(record=True)
    def step(x):
        return x * 2.0

    if __name__ == "__main__":
        step(jnp.ones(2))
        _record.flush()
        print(json.dumps([r.location for r in Cache().pending()]))
""")


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_scripts_function_is_located_by_its_file_and_module_name(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "app.py").write_text(SCRIPT)
    (tmp_path / "pkg" / "job.py").write_text(SCRIPT)
    env = repo_env(AUTOTUNE_CACHE=str(tmp_path / "s.db"))
    r = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [
        {"module": "app", "qualname": "step", "file": str(tmp_path / "app.py"), "main": True}
    ]
    r = subprocess.run(
        [sys.executable, "-m", "pkg.job"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[-1] == {
        "module": "pkg.job",
        "qualname": "step",
        "main": True,
        "file": str(tmp_path / "pkg" / "job.py"),
    }


def test_recording_stays_off_the_steady_path():
    """Shape mode: later calls are the jit object's own dispatch (nothing to time: no code of
    ours runs); the traced path runs once per signature."""
    calls = []
    fn = at.autotuned(donate, record=True)
    original = _record.record_call
    try:
        _record.record_call = lambda *a: calls.append(a) or original(*a)
        for _ in range(5):
            fn(jnp.ones(2), jnp.ones(2))
        fn(jnp.ones(3), jnp.ones(3))
    finally:
        _record.record_call = original
    assert len(calls) == 2
    assert _record.flush(30)  # written within 30 s (False past them)


def test_values_under_a_transformation_are_not_concrete_so_shapes_are_kept(tmp_path):
    fn = at.autotuned(donate, record="values")
    out = jax.vmap(fn)(jnp.ones((3, 2)), jnp.ones((3, 2)))
    np.testing.assert_allclose(out, np.full((3, 2), 3.0))
    [rec] = pending(tmp_path)
    assert rec.abstract["args"][0] == {"shape": [2], "dtype": "float32"} and rec.value_files == []
    assert rec.values["note"].startswith("the call ran under a transformation (vmap, grad...)")
