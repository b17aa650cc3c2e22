"""The study storage: trials of dead or stopped processes are reclaimed, first tunes in one fresh
database do not race, storage errors are one clear line."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import jax.numpy as jnp
import optuna
import pytest
from _optuna_study import start_tuner, wait_for_running
from _presets import ONE_ROUND_CLI
from _repo import repo_env
from _wait import wait_until

import autotune as at
from autotune.study import _optuna


def stop_between_writes(proc, storage: str) -> None:
    """SIGSTOP the tuner at a moment it holds no lock on the SQLite file: a process stopped
    inside a transaction blocks every other writer (SQLite's rule, which no lease can change),
    so the stop is retried until the database can be locked exclusively."""
    for _ in range(100):
        os.kill(proc.pid, signal.SIGSTOP)
        con = sqlite3.connect(storage, timeout=0.2)
        try:
            con.execute("BEGIN EXCLUSIVE")
            con.rollback()
            return
        except sqlite3.OperationalError:
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.05)
        finally:
            con.close()
    raise AssertionError("the tuner held a lock on the study database every time it was stopped")


def resume(tmp_path, storage):
    import importlib
    import sys as _sys

    _sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module("slowstudy")
        from autotune._options import Plumbing, TuneOptions
        from autotune.jit._decorator import run_tune

        options = TuneOptions(
            sampler="grid",
            storage=storage,
            isolate=False,
            timing={"target_s": 0.01, "min_reps": 3, "warmup": 1},
            confirm_rounds=1,
        )
        return run_tune(mod.f, (mod.examples()[0][1], {}), options, Plumbing(store=False))  # nothing stored
    finally:
        _sys.path.remove(str(tmp_path))
        _sys.modules.pop("slowstudy", None)


@pytest.mark.slow
def test_a_trial_of_a_killed_process_is_reclaimed_and_its_config_measured(tmp_path):
    proc, storage = start_tuner(tmp_path)
    try:
        name, number = wait_for_running(storage, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    r = resume(tmp_path, storage)
    states = {t.number: t.state for t in r.trials}
    assert states[number] == "abandoned"
    assert "is gone" in next(t.reason for t in r.trials if t.number == number)
    measured = [t for t in r.trials if t.state not in ("abandoned", "duplicate", "interrupted")]
    assert len({t.config.to_json() for t in measured}) == r.space_size  # every config, the killed one too


@pytest.mark.slow
def test_a_stopped_process_loses_its_trial_once_its_lease_runs_out(tmp_path, monkeypatch):
    proc, storage = start_tuner(tmp_path, AUTOTUNE_LEASE_S="3")
    try:
        name, number = wait_for_running(storage, proc)
        stop_between_writes(proc, storage)  # alive (same host, same pid) but no longer renewing its lease
        monkeypatch.setattr(_optuna, "LEASE_S", 3.0)
        study = _optuna.Study(name, "sqlite:///" + storage, 1)
        try:
            assert study.reclaim_abandoned() == []  # the lease has not run out yet
            assert wait_until(study.reclaim_abandoned, timeout=60, interval=0.2) == [number]  # once it has
        finally:
            study.close()
        trial = optuna.load_study(study_name=name, storage="sqlite:///" + storage).trials[number]
        assert trial.state.name == "FAIL" and trial.user_attrs["outcome"] == "abandoned"
        assert "lease" in trial.user_attrs["reason"]
    finally:
        proc.kill()
        proc.wait(timeout=30)


CLI_STUDY = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    @at.autotuned(expected_calls=100)
    def g(x):
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="g")[0]

    def examples():
        return [(g, (jnp.zeros(4),))]
""")


@pytest.mark.slow
def test_four_first_tunes_in_one_fresh_database_all_succeed(tmp_path):
    studies = []
    for i in range(4):  # four different study files: four studies created at once in one fresh studies.db
        path = tmp_path / f"first{i}.py"
        path.write_text(CLI_STUDY.replace("def g(", f"def g{i}(").replace("(g, ", f"(g{i}, "))
        studies.append(path)
    storage = tmp_path / "studies.db"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "autotune",
                "tune",
                str(p),
                "--storage",
                str(storage),
                "--cache",
                str(tmp_path / "cache.db"),
                "--trials",
                "2",
                "--run-seconds",
                "0.01",
                *ONE_ROUND_CLI,
                "--json",
            ],
            env=repo_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in studies
    ]
    results = [p.communicate(timeout=600) + (p.returncode,) for p in procs]
    for _out, err, rc in results:
        assert rc == 0, err[-2000:]
    assert len(optuna.study.get_all_study_names(storage="sqlite:///" + str(storage))) == 4


def test_an_unusable_storage_is_one_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(at.StudyError, match="study storage") as info:
        at.tune(lambda x: x * 2, jnp.ones(2), storage=str(blocker / "studies.db"), isolate=False)
    assert "Traceback" not in str(info.value)
    with pytest.raises(at.StudyError, match="driver|pip install"):
        at.tune(lambda x: x * 2, jnp.ones(2), storage="postgresql+pg8000://u:secret@127.0.0.1:1/db", isolate=False)


def test_a_password_in_the_storage_url_is_never_shown(tmp_path):
    with pytest.raises(at.StudyError) as info:
        at.tune(lambda x: x * 2, jnp.ones(2), storage="postgresql+pg8000://user:hunter2@127.0.0.1:1/db", isolate=False)
    assert "hunter2" not in str(info.value) and "user:***@" in str(info.value)


def test_the_study_database_is_private_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        storage = tmp_path / "new" / "studies.db"
        at.tune(
            lambda x: x * 2,
            jnp.ones(2),
            storage=str(storage),
            isolate=False,
            timing={"target_s": 0.01},
            confirm_rounds=1,
        )
    finally:
        os.umask(old)
    assert oct(storage.stat().st_mode & 0o777) == "0o600"
    assert oct(storage.parent.stat().st_mode & 0o777) == "0o700"


def _small_grid_study(tmp_path, key: str, n_trials: int):
    """A 16-step loop's grid study (9 configs) in a SQLite file, measured in-process."""
    storage = str(tmp_path / "studies.db")
    fn = lambda x: at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=16, name="l")[0]  # noqa: E731
    options = dict(
        n_trials=n_trials,
        storage=storage,
        sampler="grid",
        timing={"target_s": 0.01},
        confirm_rounds=1,
        progress=False,
        function_key=key,
        runner=at.InProcessRunner(at.Call(fn, (jnp.ones(3),)), {"target_s": 0.01}),
    )
    return storage, fn, options


def test_a_config_queued_beyond_the_budget_is_closed_as_a_duplicate(tmp_path):
    """A config enqueued through Optuna when the budget is spent is never measured; the search
    closes it, so a finished study holds no queued trial."""
    storage, fn, options = _small_grid_study(tmp_path, "test_optuna:queued", n_trials=2)
    first = at.tune(fn, jnp.ones(3), **options)
    study = optuna.load_study(study_name=first.study_name, storage="sqlite:///" + storage)
    study.enqueue_trial(study.trials[0].params)
    assert [t.state.name for t in study.trials].count("WAITING") == 1
    at.tune(fn, jnp.ones(3), **options)  # resumes: the budget is already spent, the queue is drained
    trials = optuna.load_study(study_name=first.study_name, storage="sqlite:///" + storage).trials
    assert not [t for t in trials if t.state.name in ("WAITING", "RUNNING")]
    [left] = [t for t in trials if "left queued" in t.user_attrs.get("reason", "")]
    assert left.user_attrs["outcome"] == "duplicate" and left.state.name == "FAIL"
    assert left.user_attrs["config"] == trials[0].user_attrs["config"]


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_config_queued_through_optuna_is_measured_next_and_proposals_stay_distinct(tmp_path):
    storage, fn, options = _small_grid_study(tmp_path, "test_optuna:direct", n_trials=2)
    first = at.tune(fn, jnp.ones(3), **options)
    study = optuna.load_study(study_name=first.study_name, storage="sqlite:///" + storage)
    unrolled = at.Config({"l": {"repr": "scan", "unroll": 8}})
    assert unrolled.to_json() not in [t.user_attrs["config"] for t in study.trials]
    study.enqueue_trial({"l.repr": "scan", "l.unroll": 8})  # a user's (or an Optuna tool's) queued config
    second = at.tune(fn, jnp.ones(3), **{**options, "n_trials": 5})
    trials = optuna.load_study(study_name=first.study_name, storage="sqlite:///" + storage).trials
    assert trials[2].user_attrs["config"] == unrolled.to_json()  # the queued config is taken next
    assert trials[2].user_attrs["outcome"] in ("complete", "shared", "pruned")
    configs = [t.user_attrs["config"] for t in trials]
    predicted = [t for t in trials if "predicted_compile_s" in t.user_attrs]  # skipped: not a measurement
    assert len(trials) - len(predicted) == 5 and len(set(configs)) == len(trials)  # each holds a config of its own
    assert not [t for t in trials if t.state.name in ("WAITING", "RUNNING")]
    assert second.best_config is not None


RACER = textwrap.dedent("""
    import os, sys, time
    import jax
    import jax.numpy as jnp
    import autotune as at

    import autotune.study  # every import before the barrier (autotune's names load lazily): both start level
    folder = sys.argv[1]
    tune, loop = at.tune, at.loop

    def meet(name):  # wait (at most 120 s) until both processes have reached `name`
        os.makedirs(os.path.join(folder, name), exist_ok=True)
        open(os.path.join(folder, name, str(os.getpid())), "w").close()
        deadline = time.time() + 120
        while len(os.listdir(os.path.join(folder, name))) < 2 and time.time() < deadline:
            time.sleep(0.005)

    met = []

    def first_run(x):
        # Each process's first run is in a trial it opened (the XLA options are off, so nothing
        # measures the default before the search): held here until the other's is too, so one
        # loaded process cannot walk the whole grid before the other opens anything.
        if not met:
            met.append(meet("measuring"))
        return x

    def fn(x):
        x = jax.pure_callback(first_run, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=16, name="l")[0]

    meet("started")  # both start their search together
    tune(fn, jnp.ones(3), n_trials=9, storage=sys.argv[2], sampler="grid", timing={"target_s": 0.01},
            confirm_rounds=1, progress=False, function_key="test_optuna:race", isolate=False, xla=False)
""")


@pytest.mark.slow
def test_two_processes_on_one_sqlite_study_never_draw_the_same_config(tmp_path):
    """Both walk one grid from the same first config; the proposal lock lets only one open each."""
    storage = str(tmp_path / "studies.db")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(barrier), storage],
            env=repo_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    (name,) = optuna.study.get_all_study_names(storage="sqlite:///" + storage)
    trials = optuna.load_study(study_name=name, storage="sqlite:///" + storage).trials
    info = [
        (t.number, t.user_attrs.get("outcome"), t.user_attrs.get("config"), t.user_attrs["owner"]["pid"])
        for t in trials
    ]
    configs = [t.user_attrs["config"] for t in trials]
    assert len(trials) == 9 and len(set(configs)) == 9, info  # each config opened once: no duplicate at all
    assert {t.user_attrs["owner"]["pid"] for t in trials} == {p.pid for p in procs}, info  # both measured


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_held_proposal_lock_delays_a_search_but_never_stops_it(tmp_path, monkeypatch):
    """A process stopped while it holds the lock (SIGSTOP, a debugger) costs the others at most
    PROPOSAL_WAIT_S per pick; they then pick without it."""
    import fcntl

    from autotune.study import _locks

    monkeypatch.setattr(_locks, "PROPOSAL_WAIT_S", 0.5)
    storage, fn, options = _small_grid_study(tmp_path, "test_optuna:held", n_trials=3)
    url = "sqlite:///" + storage
    with _locks.proposal_lock(None, url, "s"):  # inside, the lock is really held: nobody else gets it
        with open(storage + ".propose.lock") as other:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(storage + ".propose.lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another open file: a search's own flock must wait for it
        t0 = time.monotonic()
        with _locks.proposal_lock(None, url, "s"):
            assert time.monotonic() - t0 >= 0.5  # waited it out, then went on
        r = at.tune(fn, jnp.ones(3), **options)
    assert len([t for t in r.trials if t.state != "duplicate"]) >= 3 and r.best_config is not None
