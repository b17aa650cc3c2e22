"""Replay (autotune/record/_replay.py): rebuild a recorded call (import, inputs, checks) and tune it;
what cannot be replayed is skipped with one line and the others go on."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest

from autotune._options import TuneOptions
from autotune.cache import Cache, PendingRecord
from autotune.jit import _record
from autotune.program import _keys
from autotune.record._replay import Skip, build_inputs, pending_status, rebuild, select, tune_recorded

MODULE = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    @at.autotuned(expected_calls=200, static_argnums=(1,){extra})
    def step(x, n, *, scale=1.0):
        return at.loop(lambda c, _: (c * {factor} + scale, None), x, length=n, name="smooth")[0]

    @at.autotuned
    def mixed(i, b, z):
        return i.sum() + b.sum() + z.real.sum()

    @at.autotuned(static_argnums=(1,))
    def configured(x, opts):
        return x * 2.0
""")


@pytest.fixture
def space(tmp_path, monkeypatch):
    """A folder of importable modules; each test's modules are forgotten afterwards."""
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache.db"))
    monkeypatch.setenv("AUTOTUNE_RECORD", "1")
    monkeypatch.delenv("AUTOTUNE_RECORD_MAX_MB", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    (tmp_path / "mods").mkdir()
    _record._seen.clear()
    names: list[str] = []

    def write(name: str, factor: str = "0.5", extra: str = ""):
        shutil.rmtree(tmp_path / "mods" / "__pycache__", ignore_errors=True)
        (tmp_path / "mods" / f"{name}.py").write_text(MODULE.format(factor=factor, extra=extra))
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
        names.append(name)
        return importlib.import_module(name)

    write.dir = tmp_path / "mods"
    write.cache = Cache(tmp_path / "cache.db")
    yield write
    assert _record.flush(30)
    for name in names:
        sys.modules.pop(name, None)


def records(space) -> list[PendingRecord]:
    assert _record.flush(30)
    return space.cache.pending()


def test_synthesized_inputs_follow_the_recorded_shapes_and_are_seeded(space):
    mod = space("rp_synth")
    mod.step(jnp.ones(8), 4, scale=2.0)
    mod.mixed(jnp.ones((3, 5), jnp.int32), jnp.ones(4, bool), jnp.ones(2, jnp.complex64))
    recs = {r.function_key: r for r in records(space)}
    args, kwargs, inputs = build_inputs(recs["rp_synth:step"], space.cache.values_dir)
    assert inputs == "synthesized" and args[1] == 4
    assert args[0].shape == (8,) and args[0].dtype == jnp.float32
    assert type(kwargs["scale"]) is float  # a weak Python scalar again
    again, kwargs_again, _ = build_inputs(recs["rp_synth:step"], space.cache.values_dir)
    np.testing.assert_array_equal(args[0], again[0])
    assert kwargs == kwargs_again
    i, b, z = build_inputs(recs["rp_synth:mixed"], space.cache.values_dir)[0]
    assert i.dtype == jnp.int32 and i.shape == (3, 5) and 0 <= int(i.min()) and int(i.max()) < 8
    assert b.dtype == jnp.bool_ and z.dtype == jnp.complex64 and float(jnp.abs(z.imag).sum()) > 0


def test_recorded_values_come_back(space, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_RECORD", "values")
    mod = space("rp_values")
    x = jnp.linspace(-1, 1, 8)
    mod.step(x, 4, scale=0.25)
    [rec] = records(space)
    args, kwargs, inputs = build_inputs(rec, space.cache.values_dir)
    assert inputs == "recorded values" and kwargs == {"scale": 0.25}
    np.testing.assert_array_equal(args[0], x)
    os.unlink(os.path.join(space.cache.values_dir, rec.value_files[0]))  # lost: synthesize them all
    assert build_inputs(rec, space.cache.values_dir)[2] == "synthesized"
    assert [s.values_stored for s in pending_status(space.cache)] == [False]


def test_rebuild_checks_program_and_signature(space):
    mod = space("rp_ok")
    mod.step(jnp.ones(8), 4)
    [rec] = records(space)
    ctl, args, kwargs, inputs = rebuild(rec, space.cache.values_dir)
    assert ctl is mod.step.autotune and args[1] == 4 and kwargs == {}
    assert _keys.program_key(ctl.fun, args, kwargs, ctl.jit_kwargs)[1] == rec.signature


def test_a_changed_program_is_skipped_with_the_reason(space):
    space("rp_edit").step(jnp.ones(8), 4)
    [rec] = records(space)
    space("rp_edit", factor="0.25")
    with pytest.raises(
        Skip,
        match=r"^the program changed since it was recorded \(fingerprint [0-9a-f]{10} then, "
        r"[0-9a-f]{10} now\); run the program with AUTOTUNE_RECORD=1 again",
    ):
        rebuild(rec, space.cache.values_dir)


def test_changed_options_and_keys_are_skipped(space):
    space("rp_opts").step(jnp.ones(8), 4)
    [rec] = records(space)
    space("rp_opts", extra=", donate_argnums=(0,)")
    with pytest.raises(
        Skip,
        match=r"its jit options changed since it was recorded \(\{'static_argnums': \[1\]\} "
        r"then, \{'static_argnums': \[1\], 'donate_argnums': \[0\]\} now\)",
    ):
        rebuild(rec, space.cache.values_dir)
    space("rp_opts", extra=", key='elsewhere:step'")
    with pytest.raises(Skip, match="rp_opts:step now has the key 'elsewhere:step'"):
        rebuild(rec, space.cache.values_dir)


def test_a_function_that_no_longer_imports_is_skipped(space):
    space("rp_gone").step(jnp.ones(8), 4)
    [rec] = records(space)
    (space.dir / "rp_gone.py").write_text("def other():\n    pass\n")
    sys.modules.pop("rp_gone")
    shutil.rmtree(space.dir / "__pycache__", ignore_errors=True)
    with pytest.raises(Skip, match=r"rp_gone:step no longer imports \(AttributeError: "):
        rebuild(rec, space.cache.values_dir)
    (space.dir / "rp_gone.py").unlink()
    sys.modules.pop("rp_gone")
    with pytest.raises(
        Skip,
        match=r"rp_gone:step no longer imports \(ModuleNotFoundError: No module named "
        "'rp_gone'\\)",
    ):
        rebuild(rec, space.cache.values_dir)


class Opts:
    def __hash__(self):
        return 0

    def __eq__(self, other):
        return isinstance(other, Opts)


def test_statics_that_cannot_be_rebuilt_are_skipped(space):
    space("rp_static").configured(jnp.ones(8), Opts())
    [rec] = records(space)
    assert not rec.replayable
    with pytest.raises(
        Skip,
        match=r"it cannot be replayed: argument 1 \(opts\) is a test_replay.Opts, which "
        "cannot be stored as JSON",
    ):
        rebuild(rec, space.cache.values_dir)


def test_select_keeps_one_record_per_signature(space):
    base = dict(
        function_key="m:f",
        fingerprint="ab",
        signature="s",
        location={"module": "m", "qualname": "f"},
        abstract={"version": 1, "args": [], "kwargs": {}},
        objective={"expected_calls": 1.0, "compile_weight": 1.0, "runtime_weight": 1.0},
    )
    here = _keys.device_info()
    gpu = {**here, "platform": "gpu", "device_kind": "H200"}
    laptop = PendingRecord(**base, device=gpu)
    local = PendingRecord(**base, device=here)
    valued = PendingRecord(**base, device=gpu, values={"files": ["v-0.npy"], "bytes": 10, "note": None})
    other = PendingRecord(**{**base, "signature": "t"}, device=gpu)
    dkey = _keys.device_key(here)
    assert select([laptop, local], dkey) == [local]
    assert select([local, valued, other], dkey) == [valued, other]


def test_tune_recorded_tunes_the_good_and_skips_the_broken_with_one_line(space):
    good, broken = space("rp_good"), space("rp_broken")
    good.step(jnp.ones(8), 4)
    broken.step(jnp.ones(8), 4)
    assert len(records(space)) == 2
    (space.dir / "rp_broken.py").unlink()
    sys.modules.pop("rp_broken")
    lines: list[str] = []
    fast = TuneOptions(n_trials=2, sampler="grid", isolate=False, timing={"target_s": 0.02}, progress=False)
    done = tune_recorded(space.cache, fast, say=lines.append)
    by = {d.record.function_key: d for d in done}
    assert by["rp_broken:step"].status == "skipped" and by["rp_good:step"].status == "tuned"
    assert [ln for ln in lines if ln.startswith("skipped")] == [
        "skipped rp_broken:step (f32[8], 4): rp_broken:step no longer imports (ModuleNotFoundError: No module named "
        "'rp_broken')"
    ]
    assert good.step.config_for(jnp.ones(8), 4).source == "cache"
    [entry] = space.cache.entries("rp_good:step")
    assert entry.retune == "autotune tune --recorded --function rp_good:step --expected-calls {calls}"
    assert entry.objective["expected_calls"] == 200
    assert [s.tuned_here for s in pending_status(space.cache) if s.record.function_key == "rp_good:step"] == [True]
    # Tuned: a second run leaves it, unless asked for by name or for a call count outside its range.
    assert [d.status for d in tune_recorded(space.cache, fast, function="rp_good:step", say=lines.append)] == ["tuned"]
    again = {d.record.function_key: d.status for d in tune_recorded(space.cache, fast, say=lines.append)}
    assert again == {"rp_good:step": "tuned before", "rp_broken:step": "skipped"}


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_record_carries_the_programs_processes_and_cache_to_the_tune(space, monkeypatch, tmp_path):
    """Detected where the program ran (the cache directory set there), kept where it is tuned (not set)."""
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jaxcache"))
    mod = space("rp_procs", extra=", processes=4")
    mod.step(jnp.ones(8), 4)
    [rec] = records(space)
    assert rec.objective == {
        "expected_calls": 200.0,
        "compile_weight": 1.0,
        "runtime_weight": 1.0,
        "processes": 4,
        "compilation_cache": True,
    }
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    fast = TuneOptions(n_trials=2, sampler="grid", isolate=False, timing={"target_s": 0.02}, progress=False)
    [done] = tune_recorded(space.cache, fast, say=lambda _: None)
    assert done.status == "tuned"
    [entry] = space.cache.entries("rp_procs:step")
    assert entry.objective["processes"] == 4 and entry.objective["compilation_cache"] is True


def test_a_record_is_keyed_and_tuned_under_its_decorators_memory_budget(space):
    mod = space("rp_budget", extra=", max_memory='1GiB'")
    mod.step(jnp.ones(8), 4)
    [rec] = records(space)
    assert rec.objective["max_memory"] == 2**30 and rec.device_key.endswith("|max_memory=1073741824")
    fast = TuneOptions(n_trials=2, sampler="grid", isolate=False, timing={"target_s": 0.02}, progress=False)
    [done] = tune_recorded(space.cache, fast, say=lambda _: None)
    assert done.status == "tuned"
    [entry] = space.cache.entries("rp_budget:step")
    assert entry.objective["max_memory"] == 2**30 and entry.device_key == rec.device_key
    assert mod.step.config_for(jnp.ones(8), 4).source == "cache"  # the decorator reads its budget's entry
    [status] = pending_status(space.cache)
    assert status.tuned_here
    [again] = tune_recorded(space.cache, fast, say=lambda _: None)
    assert again.status == "tuned before"
