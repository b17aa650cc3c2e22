"""WorkerRunner in its three modes: export (closures), import (programs jax.export cannot carry,
such as host callbacks) and study files; warm reuse, re-timing kept executables, shared programs."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _hoisting import HOISTING, TABLE_STUDY, run_python
from _presets import STEADY
from _procs import gone

import autotune as at
from autotune._errors import StudyError
from autotune.measuring._runner import TrialFailed
from autotune.measuring.process._protocol import Location
from autotune.measuring.process._worker_runner import WorkerOptions, WorkerRunner
from autotune.record._studyfile import load_examples

FOR = {"l": {"repr": "for"}}


def test_export_mode_runs_a_closure_in_a_warm_worker_retimes_it_and_reaps_it():
    scale = jnp.float32(0.5)  # a closure: only the exported program crosses to the worker

    def step(x, n, *, bias):
        y = at.loop(lambda c, _: (c * scale + bias, None), x, length=8, name="l")[0] * n
        return {"y": y, "half": y.astype(jnp.bfloat16)}

    x = jnp.linspace(0.0, 1.0, 16, dtype=jnp.float32)
    bias = jnp.float32(1.0)
    expected = jax.jit(step, static_argnums=1)(x, 3, bias=bias)
    jit_kwargs = {"static_argnums": 1, "donate_argnums": 0}
    with WorkerRunner(at.Call(step, (x, 3), {"bias": bias}, jit_kwargs), STEADY, trial_timeout=60) as runner:
        first = runner.measure({})
        pid = runner.pid
        unrolled = runner.measure(FOR)
        with pytest.raises(TrialFailed) as info:  # a config that does not trace is a result, not a crash
            runner.measure({"nope": {"repr": "scan"}})
        assert info.value.state == "error" and "'nope'" in info.value.reason
        assert runner.pid == pid and runner.restarts == 0 and runner.isolated and runner.mode == "export"
        again = runner.retime({})  # the warm worker still holds the default's executable
        assert again.compile_s == first.compile_s and again.program_hash == first.program_hash
        assert again.reps >= 3 and again.outputs is None and again.config == first.config
        runner.retain([FOR])
        assert runner.retime({}) is None and runner.retime(FOR).compile_s == unrolled.compile_s
        assert pid != os.getpid() and not gone(pid, wait=0)
    assert gone(pid)  # close() reaped it
    assert not x.is_deleted()  # donated in the worker, never here
    for m in (first, unrolled):
        assert min(m.trace_s, m.lower_s, m.compile_s, m.run_s) > 0 and m.reps >= 3
        assert isinstance(m.outputs["y"], np.ndarray) and m.outputs["half"].dtype == jnp.bfloat16
        np.testing.assert_allclose(m.outputs["y"], expected["y"], rtol=1e-6)
        assert len(m.program_hash) == 64
    assert unrolled.config == at.Config(FOR) and first.program_hash != unrolled.program_hash


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_export_mode_shares_a_program_without_sending_it():
    f = lambda v: jax.lax.scan(lambda c, _: (c * 2.0, None), v, None, length=8)[0]  # noqa: E731
    x = jnp.ones(4)
    site = at.sites(f, x)[0].id
    with WorkerRunner(at.Call(f, (x,)), STEADY) as runner:
        full = runner.measure({site: {"repr": "for"}})
        pid = runner.pid
        same = runner.measure({site: {"unroll": 8}}, on_lowered=lambda h: full if h == full.program_hash else None)
        assert same.program_hash == full.program_hash and same.compile_s == full.compile_s
        assert same.run_s == full.run_s and same.config == at.Config({site: {"unroll": 8}})
        assert runner.pid == pid
        # renew(): confirmation's second process. The old worker is reaped, its executables with it.
        assert runner.renew() is True
        assert gone(pid) and runner.retime({site: {"repr": "for"}}) is None
        again = runner.measure({site: {"repr": "for"}})
        assert runner.pid not in (None, pid) and runner.restarts == 1 and again.program_hash == full.program_hash


def test_a_host_callback_without_a_location_is_measured_in_process_with_one_warning(recwarn):
    def doubled(x):
        y = jax.pure_callback(lambda a: np.asarray(a) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), y, length=4, name="l")[0]

    x = jnp.arange(4.0)
    with WorkerRunner(at.Call(doubled, (x,)), STEADY, trial_timeout=30) as runner:
        a = runner.measure({})
        b = runner.measure(FOR)
        assert not runner.isolated and "host_callbacks" in runner.fallback_reason and runner.pid is None
        assert runner.retime({}) is not None  # the in-process runner keeps executables too
        assert runner.renew() is False and runner.retime({}) is not None  # no second process to use
    np.testing.assert_allclose(b.outputs, a.outputs)
    np.testing.assert_allclose(a.outputs, np.asarray(jax.jit(doubled)(x)))
    warned = [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    assert len(warned) == 1, [str(w.message) for w in warned]
    assert "measuring in-process, without isolation" in str(warned[0].message)
    assert "trial_timeout" in str(warned[0].message)
    with WorkerRunner(at.Call(doubled, (x,)), STEADY, isolate=True) as strict:
        with pytest.raises(StudyError, match="host_callbacks"):
            strict.measure({})


CALLBACKS = textwrap.dedent("""
    import os, time
    import jax, jax.numpy as jnp
    import numpy as np
    import autotune as at

    HANG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hang")

    def _host(a):
        while os.path.exists(HANG):   # a host callback that hangs, as a buggy one would
            time.sleep(0.05)
        return np.asarray(a) * 2

    @at.autotuned(static_argnums=1)
    def noisy(x, n, *, shift):
        jax.debug.callback(lambda v: None, x)             # as diffrax's progress meters do
        y = jax.pure_callback(_host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return at.loop(lambda c, _: (c * 0.5 + shift, None), y, length=n, name="l")[0]
""")


@pytest.fixture
def callbacks(tmp_path, monkeypatch):
    (tmp_path / "at_callbacks_mod.py").write_text(CALLBACKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import at_callbacks_mod

    yield at_callbacks_mod, tmp_path
    sys.modules.pop("at_callbacks_mod", None)


@pytest.mark.slow  # a hanging callback waits out its trial timeout; import mode runs in test_sharded too
def test_a_host_callback_program_is_isolated_by_importing_it_in_the_worker(callbacks, recwarn):
    mod, folder = callbacks
    fn = mod.noisy.autotune.fun
    location = Location.of(fn)
    assert location == Location("at_callbacks_mod", "noisy", str(folder / "at_callbacks_mod.py"))
    x = jnp.arange(4.0)
    args, kwargs, jit_kwargs = (x, 4), {"shift": 1.0}, {"static_argnums": 1}
    expected = np.asarray(mod.noisy(x, 4, shift=1.0))
    with WorkerRunner(at.Call(fn, args, kwargs, jit_kwargs), STEADY, trial_timeout=20, location=location) as runner:
        a = runner.measure({})
        assert runner.isolated and runner.mode == "import" and "host_callbacks" in runner.import_reason
        pid = runner.pid
        assert pid is not None and pid != os.getpid()
        b = runner.measure(FOR)
        assert runner.pid == pid and runner.retime({}) is not None
        for m in (a, b):
            np.testing.assert_allclose(m.outputs[0], expected, rtol=1e-6)
            assert min(m.trace_s, m.lower_s, m.compile_s, m.run_s) > 0 and m.program_hash
        (folder / "hang").write_text("")  # now the callback hangs: the trial timeout still holds
        with pytest.raises(TrialFailed) as info:
            runner.measure({})
        assert info.value.state == "timeout" and f"pid {pid} killed" in info.value.reason, info.value.reason
        assert info.value.compile_s_at_least > 0  # killed while running: it had compiled
        assert gone(pid)
        (folder / "hang").unlink()
        c = runner.measure({})  # a new worker imports the function again
        assert runner.pid not in (None, pid) and runner.isolated
        np.testing.assert_allclose(c.outputs[0], expected, rtol=1e-6)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_arguments_that_cannot_cross_fall_back_with_both_reasons(callbacks, recwarn):
    mod, _ = callbacks

    class Shift(float):  # not JSON: a subclass
        pass

    fn = mod.noisy.autotune.fun
    call = at.Call(fn, (jnp.arange(4.0), 4), {"shift": Shift(1.0)}, {"static_argnums": 1})
    with WorkerRunner(call, STEADY, location=Location.of(fn)) as runner:
        runner.measure({})
        assert not runner.isolated
        assert "host_callbacks" in runner.fallback_reason and "Shift" in runner.fallback_reason
    assert len([w for w in recwarn if issubclass(w.category, RuntimeWarning)]) == 1


STUDY = textwrap.dedent("""
    import jax, jax.numpy as jnp
    import autotune as at

    @at.autotuned
    def doubling(x):
        return jax.lax.scan(lambda c, _: (c * 2.0 + 1.0, None), x, None, length=8)[0]

    def examples():
        return [(doubling, (jnp.linspace(0.0, 1.0, 8),))]
""")


def test_study_file_mode_asks_before_compiling_a_program_it_has_seen(tmp_path):
    path = tmp_path / "at_doubling_study.py"
    path.write_text(STUDY)
    (ex,) = load_examples(str(path))
    site = ex.fn.sites(*ex.args)[0].id
    seen: dict[str, at.Measurement] = {}
    with WorkerRunner.for_study_file(path, timing=STEADY) as runner:
        assert runner.mode == "study" and runner.study_file == str(path)
        full = runner.measure({site: {"repr": "for"}}, on_lowered=seen.get)
        seen[full.program_hash] = full
        same = runner.measure({site: {"unroll": 8}}, on_lowered=seen.get)
        assert same.program_hash == full.program_hash and (same.compile_s, same.run_s) == (full.compile_s, full.run_s)
        assert same.trace_s != full.trace_s or same.lower_s != full.lower_s  # its own trace and lower
        other = runner.measure({site: {"unroll": 2}}, on_lowered=seen.get)
        assert other.program_hash != full.program_hash and other.compile_s != full.compile_s
        again = runner.retime({site: {"unroll": 8}})  # the shared executable is kept for it
        assert again is not None and again.compile_s == full.compile_s
        np.testing.assert_allclose(other.outputs[0], full.outputs[0], rtol=1e-6)


def test_a_restarted_worker_that_gets_other_inputs_says_examples_are_not_deterministic(tmp_path):
    path = tmp_path / "at_unseeded_study.py"
    path.write_text(
        textwrap.dedent("""
        import os
        import jax.numpy as jnp
        import autotune as at

        @at.autotuned
        def f(x):
            return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="l")[0]

        def examples():  # other inputs in every process: as with an unseeded random generator
            return [(f, (jnp.full(3, float(os.getpid())),))]
    """)
    )
    with WorkerRunner.for_study_file(path, timing=STEADY) as runner:
        runner.measure({})
        assert runner.renew()
        with pytest.raises(TrialFailed) as info:
            runner.measure(FOR)
        assert info.value.state == "error" and "not deterministic" in info.value.reason
        assert "seed its random inputs" in info.value.reason


def test_a_study_file_location_is_used_when_export_fails(tmp_path):
    path = tmp_path / "at_printing_study.py"
    path.write_text(
        textwrap.dedent("""
        import jax, jax.numpy as jnp
        import autotune as at

        @at.autotuned
        def shown(x):
            jax.debug.print("x = {}", x[0])
            return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="l")[0]

        def examples():
            return [(shown, (jnp.ones(3),))]
    """)
    )
    (ex,) = load_examples(str(path))
    with WorkerRunner(at.Call(ex.fn.fun, ex.args), STEADY, location=Location.study_file(path, 0)) as runner:
        m = runner.measure(FOR)
        assert runner.isolated and runner.mode == "study" and runner.pid is not None
    np.testing.assert_allclose(m.outputs[0], np.asarray(ex.fn(*ex.args)), rtol=1e-6)


def test_a_closed_runner_and_bad_options_say_so():
    runner = WorkerRunner(at.Call(lambda x: x, (jnp.ones(2),)))
    runner.close()
    with pytest.raises(StudyError, match="closed"):
        runner.measure({})
    with pytest.raises(StudyError, match="trial_timeout"):
        WorkerRunner(at.Call(lambda x: x), trial_timeout=0)
    with pytest.raises(StudyError, match="Location"):
        WorkerRunner(at.Call(lambda x: x), location="mod:fn")
    with pytest.raises(StudyError, match="unknown option.*'trial_timout'.*WorkerOptions"):
        WorkerRunner(at.Call(lambda x: x), trial_timout=5)
    with pytest.raises(StudyError, match="autotune.Call"):
        WorkerRunner(lambda x: x, (jnp.ones(2),))
    options = WorkerOptions(trial_timeout=30, builders=0)
    kept = WorkerRunner(at.Call(lambda x: x, (jnp.ones(2),)), None, options, trial_memory_gb=2.0)
    assert (kept.trial_timeout, kept.trial_memory_gb, kept.options.builders) == (30, 2.0, 0)
    kept.close()
    with pytest.raises(StudyError, match="does not exist"):
        WorkerRunner.for_study_file("/nonexistent/study.py")


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_constants_jit_passes_as_arguments_send_the_study_file_to_the_worker(tmp_path):
    """Where jax.jit hoists a closed-over constant (jax >= 0.12; the variable turns it on for
    jax 0.10 too), export would embed it and the worker would time another program: the runner
    sends the study file instead, and the worker measures the program jax.jit lowers here."""
    (tmp_path / "table_study.py").write_text(TABLE_STUDY)
    code = """
import sys, json
import numpy as np
import autotune as at
from autotune.measuring.process._export import trace_and_lower
from autotune.measuring.process._protocol import Location
from autotune.measuring._runner import stage_guard
from autotune.measuring.process._worker_runner import WorkerRunner
from autotune.program._config import Config
from autotune.record._studyfile import load_examples
(ex,) = load_examples(sys.argv[1])
call = at.Call(ex.fn.fun, ex.args)
here = trace_and_lower(call, Config({"l": {"repr": "for"}}), stage_guard(None)).program_hash
timing = {"target_s": 0.02, "min_reps": 3, "warmup": 1}
with WorkerRunner(call, timing, location=Location.study_file(sys.argv[1], 0)) as runner:
    m = runner.measure({"l": {"repr": "for"}})
    out = {"mode": runner.mode, "isolated": runner.isolated, "reason": runner.import_reason,
           "same_program": m.program_hash == here,
           "same_outputs": bool(np.allclose(m.outputs[0], np.asarray(ex.fn(*ex.args)), rtol=1e-6))}
print(json.dumps(out))
"""
    out = json.loads(run_python(code, str(tmp_path / "table_study.py"), env=HOISTING).splitlines()[-1])
    assert out["mode"] == "study" and out["isolated"], out
    assert "closed-over constant" in out["reason"] and out["same_program"] and out["same_outputs"], out


@pytest.mark.slow  # a worker process
def test_a_trials_run_ceiling_travels_to_the_worker_and_stops_its_timing():
    call = at.Call(lambda x: jnp.sin(x) * 2.0, (jnp.ones(4),))
    with WorkerRunner(call, {"target_s": 0.2, "min_reps": 3}) as runner:
        short = runner.measure(None, run_ceiling_s=1e-12)
        full = runner.measure(at.Config(), run_ceiling_s=None)
    assert short.stopped_early and not full.stopped_early and short.reps < full.reps
