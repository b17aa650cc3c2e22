"""Following a trial in the worker: time limits, compile-budget pruning, crashes and out of memory,
every fault provoked for real (no mocks).

A compile that explodes is a fully unrolled 400-step loop of a 40-op body (4-12 s of XLA
compile on a 2-core CPU, depending on load and jax version); crashes are a real segfault
(``ctypes.string_at(0)``) and a real ``abort()`` in the worker; out of memory is XLA failing an
allocation under the worker's ``RLIMIT_DATA`` cap.
"""

from __future__ import annotations

import textwrap
import time

import jax.numpy as jnp
import optuna
import pytest
from _presets import STEADY
from _procs import gone

import autotune as at
from autotune._errors import StudyError
from autotune.measuring._runner import TrialFailed
from autotune.measuring.process._channel import diagnose
from autotune.measuring.process._worker_runner import WorkerRunner

FOR = {"l": {"repr": "for"}}

# One study file serves the isolation tests: `explode` fully unrolled ("for") compiles for
# seconds; a file named "fault" beside it makes the next trace segfault / abort.
STUDY = textwrap.dedent("""
    import ctypes, os
    import jax.numpy as jnp
    import autotune as at

    HERE = os.path.dirname(os.path.abspath(__file__))

    def _fault():
        path = os.path.join(HERE, "fault")
        if not os.path.exists(path):
            return
        with open(path) as f:
            how = f.read().strip()
        os.remove(path)
        if how == "segv":
            ctypes.string_at(0)          # a real segmentation fault
        elif how == "abort":
            os.abort()

    def body(c, _):
        for k in range(10):
            c = jnp.sin(c) * 1.01 + jnp.cos(c * 0.5)
        return c, None

    @at.autotuned
    def explode(x):
        _fault()
        return at.loop(body, x, length=400, name="l")[0]

    def examples():
        return [(explode, (jnp.linspace(0.0, 1.0, 64),))]
""")


def explode_body(c, _):
    for _ in range(10):
        c = jnp.sin(c) * 1.01 + jnp.cos(c * 0.5)
    return c, None


def explode(x):
    return at.loop(explode_body, x, length=400, name="l")[0]


@pytest.fixture
def study_file(tmp_path):
    path = tmp_path / "explode_study.py"
    path.write_text(STUDY)
    return path


@pytest.mark.timing  # "at the trial timeout" is a wall-clock bound on the kill
def test_a_compile_that_explodes_is_killed_at_the_trial_timeout(study_file):
    with WorkerRunner.for_study_file(study_file, timing=STEADY, trial_timeout=2.0) as runner:
        runner.measure({})  # the rolled loop fits easily
        pid = runner.pid
        t0 = time.monotonic()
        with pytest.raises(TrialFailed) as info:
            runner.measure(FOR)  # trace + lower + several seconds of compile, all in the worker
        took = time.monotonic() - t0
        assert info.value.state == "timeout", info.value.reason
        assert "trial timeout of 2 s" in info.value.reason and f"pid {pid} killed" in info.value.reason
        assert 1.9 < took < 2.0 + 3.0, took
        assert 0 < info.value.compile_s_at_least <= took  # the seconds it had spent, as a lower bound
        assert gone(pid)
        assert runner.retime({}) is None  # its executables went with it
        runner.retain([{}, FOR])  # while the replacement may still be starting: nothing to keep there yet
        again = runner.measure({})  # the next trial gets the new worker
        assert runner.restarts == 1 and runner.pid not in (None, pid)
        assert again.compile_s > 0


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_worker_that_segfaults_or_aborts_is_replaced(study_file):
    with WorkerRunner.for_study_file(study_file, timing=STEADY, trial_timeout=120) as runner:
        runner.measure({})
        for how, signame in (("segv", "SIGSEGV"), ("abort", "SIGABRT")):
            pid = runner.pid
            (study_file.parent / "fault").write_text(how)
            with pytest.raises(TrialFailed) as info:
                runner.measure({})
            assert info.value.state == "crashed", info.value.reason
            assert f"pid {pid}" in info.value.reason and signame in info.value.reason, info.value.reason
            assert gone(pid)
            m = runner.measure({})  # replaced on the next trial
            assert m.run_s > 0 and runner.pid not in (None, pid)
        assert runner.restarts == 2


def test_out_of_memory_under_the_cap_is_oom_and_the_worker_replaced():
    def huge(x):  # a 1.6 GB output, under a 1 GiB cap
        return jnp.broadcast_to(x[0], (20000, 20000)) + x[1]

    with WorkerRunner(at.Call(huge, (jnp.ones(2),)), STEADY, trial_memory_gb=1.0, trial_timeout=60) as runner:
        runner.start()
        pid = runner.pid
        with pytest.raises(TrialFailed) as info:
            runner.measure({})
        assert info.value.state == "oom", info.value.reason
        asks = "ran out of memory while running: the config asks for 1.49 GiB of device memory, "
        assert info.value.reason.startswith(asks + "the worker's limit is 1.00 GiB (trial_memory_gb; "), info.value
        assert "RESOURCE_EXHAUSTED" in info.value.reason and "\n" not in info.value.reason
        # Discarded, and its replacement already starting (it imports JAX while the study records the trial).
        assert gone(pid) and runner.pid not in (None, pid) and runner.restarts == 1


@pytest.mark.timing  # "once it cannot win" is a wall-clock bound on the kill
def test_pruning_kills_a_compile_once_it_cannot_win(study_file):
    with WorkerRunner.for_study_file(study_file, timing=STEADY, prune_grace_s=0.0) as runner:
        fits = runner.measure({}, compile_budget_s=30.0)  # under budget: measured as usual
        assert fits.compile_total_s < 30.0
        pid = runner.pid
        t0 = time.monotonic()
        with pytest.raises(TrialFailed) as info:
            runner.measure(FOR, compile_budget_s=1.0)
        took = time.monotonic() - t0
        assert info.value.state == "pruned", info.value.reason
        assert "compile budget of 1 s" in info.value.reason and f"pid {pid} killed" in info.value.reason
        assert 0.9 < took < 1.0 + 2.5, took
        assert 1.0 <= info.value.compile_s_at_least <= took + 0.1
        assert gone(pid)


def test_death_is_diagnosed_from_the_exit_status_and_the_last_words():
    assert diagnose(-9, "", 7, "during compile")[0] == "oom"  # SIGKILL we did not send: the OOM killer
    state, why = diagnose(-11, "Fatal Python error", 7, "during run")
    assert state == "crashed" and "SIGSEGV (segmentation fault) during run" in why and "Fatal Python error" in why
    assert diagnose(-6, "terminate called after throwing an instance of 'std::bad_alloc'", 7, "x")[0] == "oom"
    assert diagnose(1, "", 7, "while starting") == ("crashed", "the worker (pid 7) exited with status 1 while starting")


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_tune_records_pruned_and_timed_out_trials(tmp_path):
    """tune() passes best cost / compile weight as the budget and records what the worker reports."""
    x = jnp.linspace(0.0, 1.0, 64)
    storage = f"sqlite:///{tmp_path / 's.db'}"
    default, unrolled = at.Config({"l": {"repr": "scan", "unroll": 1}}), at.Config(FOR)

    def run(name, **options):
        study = optuna.create_study(study_name=name, storage=storage, direction="minimize")
        study.enqueue_trial({"l.repr": "scan", "l.unroll": 1})  # the default first, then the full unroll;
        study.enqueue_trial({"l.repr": "for"})  # the third trial is the sampler's
        r = at.tune(
            explode,
            x,
            n_trials=3,
            sampler="random",
            storage=storage,
            study_name=name,
            timing=STEADY,
            confirm_rounds=1,
            confirm_top=1,
            **options,
        )
        assert [t.config for t in r.trials[:2]] == [default, unrolled]
        return r, [t.state.name for t in optuna.load_study(study_name=name, storage=storage).trials]

    # Compile time alone counts: the default's cost is its ~0.1 s compile; "for" traces for longer.
    r, states = run("pruned", expected_calls=0)
    assert [t.state for t in r.trials][:2] == ["complete", "pruned"], [(t.state, t.reason) for t in r.trials]
    assert "compile budget" in r.trials[1].reason and r.best_config != unrolled
    assert states[:2] == ["COMPLETE", "PRUNED"]
    assert r.new_trials == 3  # a pruned trial counts toward n_trials, so it is one this run added

    # No budget (compile_weight 0): the trial timeout stops it instead.
    r, states = run("timeout", compile_weight=0.0, trial_timeout=2.0)
    assert [t.state for t in r.trials][:2] == ["complete", "timeout"], [(t.state, t.reason) for t in r.trials]
    assert "trial timeout of 2 s" in r.trials[1].reason
    assert states[:2] == ["COMPLETE", "FAIL"]
    assert r.new_trials == 3


def test_tune_isolate_false_cannot_take_limits():
    with pytest.raises(StudyError, match="need a worker process"):
        at.tune(explode, jnp.ones(4), trial_timeout=1.0, isolate=False, storage="sqlite:///:memory:")
