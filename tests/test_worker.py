"""The worker process: every fault is provoked for real (no mocks).

A compile that explodes is a fully unrolled 400-step loop of a 40-op body (4-12 s of
XLA compile on a 2-core CPU, depending on load and jax version); crashes are a real segfault (``ctypes.string_at(0)``)
and a real ``abort()`` in the worker; out of memory is XLA failing an allocation
under the worker's ``RLIMIT_DATA`` cap; Ctrl-C is SIGINT sent to a running
``autotune tune`` process.
"""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optuna
import pytest

import autotune as at
from autotune._errors import StudyError
from autotune._worker import TrialFailed, WorkerRunner, decode_array, encode_array

REPO = Path(__file__).resolve().parents[1]
FAST = {"target_s": 0.02, "min_reps": 3, "warmup": 1}
FOR = {"l": {"repr": "for"}}

# One study file serves the isolation tests: `explode` fully unrolled ("for") compiles for
# seconds; a file named "fault" beside it makes the next trace segfault / abort / allocate.
STUDY = textwrap.dedent('''
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
''')


def explode_body(c, _):
    for k in range(10):
        c = jnp.sin(c) * 1.01 + jnp.cos(c * 0.5)
    return c, None


def explode(x):
    return at.loop(explode_body, x, length=400, name="l")[0]


@pytest.fixture
def study_file(tmp_path):
    path = tmp_path / "explode_study.py"
    path.write_text(STUDY)
    return path


def gone(pid: int, wait: float = 10.0) -> bool:
    """True once no process ``pid`` exists (reaped: not even a zombie)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def exited(pid: int, wait: float = 10.0) -> bool:
    """True once ``pid`` is gone or a zombie (an orphan's reaping is up to PID 1, not to us)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def workers_of(parent_pid: int) -> list[int]:
    """Live autotune worker processes started by ``parent_pid`` (even if re-parented), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"autotune._worker" in argv and b"--parent" in argv and argv[argv.index(b"--parent") + 1] == str(parent_pid).encode():
            found.append(int(entry))
    return found


# --------------------------------------------------------------------------- protocol


def test_arrays_cross_as_npy_without_pickle():
    for a in (np.float32(3.5), np.arange(6, dtype=np.int64).reshape(2, 3), np.asarray(jnp.ones((2, 2), jnp.bfloat16)),
              np.array([True, False]), np.zeros((0, 3), np.complex64), np.arange(10.0)[::3]):
        d = encode_array(a)
        back = decode_array(d)
        assert back.dtype == a.dtype and back.shape == a.shape and np.array_equal(back, a)
    with pytest.raises(TypeError, match="object arrays"):
        encode_array(np.array([object()]))


def test_python_mode_runs_a_closure_in_a_warm_worker_and_reaps_it():
    scale = jnp.float32(0.5)  # a closure: only the exported program crosses to the worker

    def step(x, n, *, bias):
        y = at.loop(lambda c, _: (c * scale + bias, None), x, length=8, name="l")[0] * n
        return {"y": y, "half": y.astype(jnp.bfloat16)}

    x = jnp.linspace(0.0, 1.0, 16, dtype=jnp.float32)
    bias = jnp.float32(1.0)
    expected = jax.jit(step, static_argnums=1)(x, 3, bias=bias)
    jit_kwargs = {"static_argnums": 1, "donate_argnums": 0}
    with WorkerRunner(step, (x, 3), {"bias": bias}, jit_kwargs, FAST, trial_timeout=60) as runner:
        first = runner.measure({})
        pid = runner.pid
        unrolled = runner.measure(FOR)
        with pytest.raises(TrialFailed) as info:  # a config that does not trace is a result, not a crash
            runner.measure({"nope": {"repr": "scan"}})
        assert info.value.state == "error" and "'nope'" in info.value.reason
        assert runner.pid == pid and runner.restarts == 0 and runner.isolated  # kept warm
        assert pid != os.getpid() and not gone(pid, wait=0)
    assert gone(pid)  # close() reaped it
    for m in (first, unrolled):
        assert min(m.trace_s, m.lower_s, m.compile_s, m.run_s) > 0 and m.reps >= 3
        assert isinstance(m.outputs["y"], np.ndarray) and m.outputs["half"].dtype == jnp.bfloat16
        np.testing.assert_allclose(m.outputs["y"], expected["y"], rtol=1e-6)
    assert unrolled.config == at.Config(FOR)


def test_a_host_callback_cannot_be_exported_so_it_is_measured_in_process_with_one_warning(recwarn):
    def doubled(x):
        y = jax.pure_callback(lambda a: np.asarray(a) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), y, length=4, name="l")[0]

    x = jnp.arange(4.0)
    with WorkerRunner(doubled, (x,), {}, {}, FAST, trial_timeout=30) as runner:
        a = runner.measure({})
        b = runner.measure(FOR)
        assert not runner.isolated and "host_callbacks" in runner.fallback_reason and runner.pid is None
    np.testing.assert_allclose(b.outputs, a.outputs)
    np.testing.assert_allclose(a.outputs, np.asarray(jax.jit(doubled)(x)))
    warned = [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    assert len(warned) == 1, [str(w.message) for w in warned]
    assert "measuring in-process, without isolation" in str(warned[0].message)
    assert "trial_timeout" in str(warned[0].message)
    with WorkerRunner(doubled, (x,), {}, {}, FAST, isolate=True) as strict:
        with pytest.raises(StudyError, match="host_callbacks"):
            strict.measure({})


# --------------------------------------------------------------------------- faults

ORPHAN = textwrap.dedent("""
    import os, signal, sys
    import jax.numpy as jnp
    import autotune as at
    from autotune._worker import WorkerRunner

    f = lambda x: at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="l")[0]
    runner = WorkerRunner(f, (jnp.ones(3),), {}, {}, {"target_s": 0.01})
    runner.measure({})
    print(runner.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # the parent dies without any cleanup
""")


def test_a_worker_whose_parent_is_killed_exits_by_itself():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", ORPHAN], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    worker = int(done.stdout.split()[0])
    assert exited(worker, wait=10), f"worker {worker} outlived its parent"



def test_a_compile_that_explodes_is_killed_at_the_trial_timeout(study_file):
    with WorkerRunner.for_study_file(study_file, timing=FAST, trial_timeout=2.0) as runner:
        runner.measure({})  # the rolled loop fits easily
        pid = runner.pid
        t0 = time.monotonic()
        with pytest.raises(TrialFailed) as info:
            runner.measure(FOR)  # trace + lower + several seconds of compile, all in the worker
        took = time.monotonic() - t0
        assert info.value.state == "timeout", info.value.reason
        assert "trial timeout of 2 s" in info.value.reason and f"pid {pid} killed" in info.value.reason
        assert 1.9 < took < 2.0 + 3.0, took
        assert gone(pid)
        again = runner.measure({})  # the next trial gets a new worker
        assert runner.restarts == 1 and runner.pid not in (None, pid)
        assert again.compile_s > 0


def test_a_worker_that_segfaults_or_aborts_is_replaced(study_file):
    with WorkerRunner.for_study_file(study_file, timing=FAST, trial_timeout=120) as runner:
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

    with WorkerRunner(huge, (jnp.ones(2),), {}, {}, FAST, memory_gb=1.0, trial_timeout=60) as runner:
        with pytest.raises(TrialFailed) as info:
            runner.measure({})
        assert info.value.state == "oom", info.value.reason
        assert "memory cap 1 GiB" in info.value.reason and "RESOURCE_EXHAUSTED" in info.value.reason
        assert runner.pid is None  # discarded; the next trial starts a new worker


def test_pruning_kills_a_compile_once_it_cannot_win(study_file):
    with WorkerRunner.for_study_file(study_file, timing=FAST, prune_grace_s=0.0) as runner:
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
        assert gone(pid)


def test_tune_records_pruned_and_timed_out_trials(tmp_path):
    """tune() passes best cost / compile weight as the budget and records what the worker reports."""
    x = jnp.linspace(0.0, 1.0, 64)
    storage = f"sqlite:///{tmp_path / 's.db'}"
    default, unrolled = at.Config({"l": {"repr": "scan", "unroll": 1}}), at.Config(FOR)

    def run(name, **options):
        study = optuna.create_study(study_name=name, storage=storage, direction="minimize")
        study.enqueue_trial({"l.repr": "scan", "l.unroll": 1})  # the default first, then the full unroll;
        study.enqueue_trial({"l.repr": "for"})                  # the third trial is the sampler's
        r = at.tune(explode, x, n_trials=3, sampler="random", storage=storage, study_name=name, timing=FAST,
                    confirm_rounds=1, confirm_top=1, **options)
        assert [t.config for t in r.trials[:2]] == [default, unrolled]
        return r, [t.state.name for t in optuna.load_study(study_name=name, storage=storage).trials]

    # Compile time alone counts: the default's cost is its ~0.1 s compile; "for" traces for longer.
    r, states = run("pruned", expected_calls=0)
    assert [t.state for t in r.trials][:2] == ["complete", "pruned"], [(t.state, t.reason) for t in r.trials]
    assert "compile budget" in r.trials[1].reason and r.best_config != unrolled
    assert states[:2] == ["COMPLETE", "PRUNED"]

    # No budget (compile_weight 0): the trial timeout stops it instead.
    r, states = run("timeout", compile_weight=0.0, trial_timeout=2.0)
    assert [t.state for t in r.trials][:2] == ["complete", "timeout"], [(t.state, t.reason) for t in r.trials]
    assert "trial timeout of 2 s" in r.trials[1].reason
    assert states[:2] == ["COMPLETE", "FAIL"]


def test_tune_isolate_false_cannot_take_limits():
    with pytest.raises(StudyError, match="need a worker process"):
        at.tune(explode, jnp.ones(4), trial_timeout=1.0, isolate=False, storage="sqlite:///:memory:")


# --------------------------------------------------------------------------- correctness guard


def folded(x):
    # The loop runs on constants. Fully unrolled, XLA evaluates it at compile time (constant
    # folding, on the host), whose exp rounds differently from the compiled kernel's: the same
    # math, a few hundred elements different in the last bit.
    c, _ = at.loop(lambda c, _: (jnp.exp(-c * c) * 1.5, None), jnp.linspace(-2.0, 2.0, 4096), length=4, name="l")
    return c + x


SEEDS = itertools.count()


def reseeded(x):
    # A bug the guard must catch: a Python-side counter read at trace time (a fresh PRNG seed
    # per trace), so every config's re-trace computes something else than the default's.
    noise = jax.random.normal(jax.random.PRNGKey(next(SEEDS)), x.shape)
    return at.loop(lambda c, _: (c * 0.5 + noise, None), x, length=4, name="l")[0]


def test_the_guard_accepts_reordered_float_arithmetic(tmp_path):
    x = jnp.linspace(0.5, 1.5, 4096)
    scan = at.measure(folded, (x,), keep_outputs=True, target_s=0.01).outputs
    unrolled = at.measure(folded, (x,), config=FOR, keep_outputs=True, target_s=0.01).outputs
    assert not np.array_equal(scan, unrolled), "XLA no longer folds the unrolled loop differently; pick another workload"
    r = at.tune(folded, x, sampler="grid", storage=str(tmp_path / "s.db"), timing=FAST, confirm_rounds=1,
               confirm_top=1, isolate=False)
    by_config = {t.config: t for t in r.trials}
    assert by_config[at.Config(FOR)].state == "complete", by_config[at.Config(FOR)].reason
    assert all(t.state == "complete" for t in r.trials), [(str(t.config), t.state, t.reason) for t in r.trials]


def test_the_guard_rejects_a_config_whose_program_computes_something_else(tmp_path):
    x = jnp.ones(8)
    r = at.tune(reseeded, x, sampler="grid", storage=str(tmp_path / "s.db"), timing=FAST, confirm_rounds=1,
                confirm_top=1, isolate=False)
    assert r.trials[0].state == "complete" and r.trials[0].config == r.best_config
    rejected = r.trials[1:]
    assert rejected and all(t.state == "rejected" for t in rejected), [(t.state, t.reason) for t in r.trials]
    for t in rejected:
        assert t.reason.startswith("correctness guard: output leaf 0 differs from the default config's by up to"), t.reason


# --------------------------------------------------------------------------- Ctrl-C

CLI_STUDY = textwrap.dedent('''
    import jax.numpy as jnp
    import autotune as at

    @at.autotuned(expected_calls=100)
    def relax(x):
        return at.loop(lambda c, _: (jnp.tanh(c) * 0.9 + 0.1, None), x, length=64, name="relax")[0]

    def examples():
        return [(relax, (jnp.linspace(0.0, 1.0, 256),))]
''')


def _complete_trials(db: Path) -> list[int]:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return [n for (n,) in con.execute("SELECT number FROM trials WHERE state = 'COMPLETE' ORDER BY number")]
    except sqlite3.Error:
        return []


def _interrupt_after(cmd: list[str], env: dict, db: Path, more_than: int) -> tuple[subprocess.CompletedProcess, list[int]]:
    """Run the CLI until it completed more than ``more_than`` trials, then SIGINT it."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=db.parent)
    try:
        deadline = time.monotonic() + 120
        while len(_complete_trials(db)) <= more_than or not workers_of(proc.pid):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the CLI made no progress"
            time.sleep(0.1)
        workers = workers_of(proc.pid)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), workers


def test_ctrl_c_stops_cleanly_keeps_trials_reaps_the_worker_and_resumes(tmp_path):
    (tmp_path / "relax_study.py").write_text(CLI_STUDY)
    db = tmp_path / "studies.db"
    cmd = [sys.executable, "-m", "autotune", "tune", "relax_study.py", "--cache", str(tmp_path / "cache.db"),
           "--storage", str(db)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "JAX_PLATFORMS": "cpu"}

    first, workers = _interrupt_after(cmd, env, db, more_than=1)
    assert first.returncode == 130, first.stderr
    assert "interrupted: completed trials are kept" in first.stderr and "Traceback" not in first.stderr, first.stderr
    assert workers and all(gone(pid) for pid in workers)  # reaped, not orphaned
    kept = _complete_trials(db)
    assert len(kept) >= 2

    second, workers = _interrupt_after(cmd, env, db, more_than=len(kept))
    assert second.returncode == 130, second.stderr
    assert all(gone(pid) for pid in workers)
    now = _complete_trials(db)
    assert now[: len(kept)] == kept and len(now) > len(kept) and min(set(now) - set(kept)) > max(kept)
