"""Scale-out on a real PostgreSQL server: `autotune tune --workers`, independent processes on one
study, the cache on PostgreSQL, and the one-worker-per-device warning.

The server comes from tests/pg_server.py (a throw-away cluster on 127.0.0.1, stopped at the
end of the session). Without PostgreSQL these tests skip, loudly, with the reason;
AUTOTUNE_REQUIRE_POSTGRES=1 turns that skip into a failure.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from _presets import ONE_ROUND_CLI
from _repo import repo_env

from autotune import select as _select
from autotune._errors import StudyError
from autotune.cache import Cache, CacheEntry
from autotune.program._config import Config
from autotune.select._objective import Objective

SPACE = 9  # an at.loop of length 16 without outputs: scan x1/2/4/8, for, fori x1/2/4/8
RUN_SECONDS = "0.05"  # runtime sampling per measurement: enough for a tiny function

# A study file as users write one, plus test instrumentation (on Optuna, not autotune): every
# told trial records the process that told it; with $TEST_WAIT_FOR_PEER set, the main process
# waits after its first trial until a helper runs one (so both workers surely measure); with
# $TEST_BARRIER_DIR set, the processes line up right after create_study, so each reads the
# study before either opens a trial (the worst case for two independent processes).
STUDY = textwrap.dedent("""
    import os
    import sys
    import time

    import jax.numpy as jnp
    import optuna

    import autotune as at

    _tell, _waited = optuna.Study.tell, []
    def _tell_with_pid(self, trial, *args, **kwargs):
        if isinstance(trial, optuna.Trial):
            trial.set_user_attr("test_pid", os.getpid())
        told = _tell(self, trial, *args, **kwargs)
        if os.environ.get("TEST_WAIT_FOR_PEER") and "--join-study" not in sys.argv and not _waited:
            _waited.append(True)
            deadline = time.time() + 90
            while time.time() < deadline and not any(
                t.state.name == "RUNNING" for t in self.get_trials(deepcopy=False)
            ):
                time.sleep(0.02)
        return told
    optuna.Study.tell = _tell_with_pid

    _create = optuna.create_study
    def _create_then_wait(*args, **kwargs):
        study = _create(*args, **kwargs)
        folder = os.environ.get("TEST_BARRIER_DIR")
        if folder:
            open(os.path.join(folder, str(os.getpid())), "w").close()
            deadline = time.time() + 120
            while len(os.listdir(folder)) < int(os.environ["TEST_BARRIER_N"]) and time.time() < deadline:
                time.sleep(0.01)
        return study
    optuna.create_study = _create_then_wait


    @at.autotuned(expected_calls=1000)
    def smooth(x):
        return at.loop(lambda c, _: (0.5 * c + jnp.sin(c), None), x, length=16, name="smooth")[0]


    def examples():
        return [(smooth, (jnp.linspace(0.0, 1.0, 64),))]
""")


def _env(**extra: str) -> dict[str, str]:
    env = repo_env()
    env.pop("AUTOTUNE_CACHE", None)
    env.pop("AUTOTUNE_STORAGE", None)
    env.update(extra)
    return env


def _tune_cmd(study_file: Path, url: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "autotune",
        "tune",
        str(study_file),
        "--trials",
        str(SPACE),
        "--storage",
        url,
        "--cache",
        url,
        "--run-seconds",
        RUN_SECONDS,
        *ONE_ROUND_CLI,
        *extra,
    ]


def _load_study(url: str):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    (summary,) = optuna.get_all_study_summaries(url)
    return optuna.load_study(study_name=summary.study_name, storage=url)


def _measured(study) -> Counter:
    """How many times each config was measured: trials that are not duplicates (complete, or
    pruned by the compile budget, or failed: each is a measurement's result). A WAITING trial
    (queued, never taken) is no measurement: the search does not count it either
    (`TrialView.counted`)."""
    return Counter(
        t.user_attrs["config"]
        for t in study.get_trials(deepcopy=False)
        if t.state.name not in ("RUNNING", "WAITING") and t.user_attrs.get("outcome") != "duplicate"
    )


def _clock(when) -> str:
    return when.strftime("%M:%S.%f")[:-3] if when is not None else "-"


def _describe(study) -> str:
    return "\n".join(
        f"  trial {t.number} {t.state.name} {t.user_attrs.get('outcome')} pid={t.user_attrs.get('test_pid')} "
        f"{t.user_attrs.get('config')} {_clock(t.datetime_start)}-{_clock(t.datetime_complete)} "
        f"{(t.user_attrs.get('reason') or '')[:90]}"
        for t in study.get_trials(deepcopy=False)
    )


@pytest.fixture(scope="module")
def workers_run(pg_server, tmp_path_factory):
    """`autotune tune FILE --workers 2` with study and cache on PostgreSQL, run once for the module."""
    folder = tmp_path_factory.mktemp("pg_workers")
    study_file = folder / "tiny_study.py"
    study_file.write_text(STUDY)
    url = pg_server.create_database()
    proc = subprocess.run(
        _tune_cmd(study_file, url, "--workers", "2"),
        cwd=folder,
        env=_env(TEST_WAIT_FOR_PEER="1"),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"autotune tune --workers 2 failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    yield {"url": url, "proc": proc, "study_file": study_file, "folder": folder}
    pg_server.drop_database(url)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_two_workers_tune_one_study(workers_run):
    url = workers_run["url"]
    study = _load_study(url)
    trials = study.get_trials(deepcopy=False)
    info = _describe(study)
    print(f"--workers 2: {len(trials)} trials\n{info}")
    # Both workers walk the grid; the study's proposal lock (an advisory lock) lets one at a time
    # read the trials and open the next, so no config is ever drawn twice, not even as a duplicate.
    counted = [t for t in trials if t.user_attrs.get("outcome") != "duplicate"]
    assert len(counted) == SPACE == len(trials), info
    assert all(t.state.name in ("COMPLETE", "PRUNED") for t in counted), info  # pruned: over the compile budget
    measured = _measured(study)
    assert len(measured) == SPACE and set(measured.values()) == {1}, f"each config measured exactly once:\n{info}"
    # Every trial records the device it ran on, and the study records the device of its ranking.
    device = study.user_attrs["device"]
    assert {t.user_attrs.get("device") for t in trials} == {
        "|".join(
            [
                device["platform"],
                device["device_kind"],
                str(device["device_count"]),
                f"jax={device['jax']}",
                f"jaxlib={device['jaxlib']}",
            ]
        )
    }, info
    # One best, written once by the main process, after confirmation.
    (entry,) = Cache(url).entries()
    confirmed = study.user_attrs["confirmed"]
    default = Config.from_json(study.trials[0].user_attrs["config"])  # trial 0 is the default
    points = [_select.Point.from_json(p) for p in confirmed]
    best = _select.choose(points, Objective.from_dict(study.user_attrs["objective"]), default=default)  # the one rule
    assert entry.cost == pytest.approx(best.cost)
    assert Config.from_dict(entry.config) == best.config
    complete_configs = {
        json.dumps(json.loads(t.user_attrs["config"]), sort_keys=True) for t in trials if t.state.name == "COMPLETE"
    }
    assert json.dumps(entry.config, sort_keys=True) in complete_configs
    assert entry.study_name == study.study_name and entry.device_key == next(
        iter({t.user_attrs["device"] for t in trials})
    )
    pids = Counter(t.user_attrs.get("test_pid") for t in trials)
    print(f"trials per process: {dict(pids)}")
    assert len(pids) == 2, f"both worker processes measure trials:\n{info}"
    assert "exited with an error" not in workers_run["proc"].stderr


def test_workers_on_one_cpu_device_warn(workers_run):
    err = " ".join(workers_run["proc"].stderr.split())  # rich wraps long lines
    assert "warning: 2 workers share 1 cpu device(s)" in err, err[-2000:]
    assert "one worker per device" in err


def test_warning_function_prints_for_more_workers_than_devices(capsys):
    from autotune.cli._tune_cmd import warn_shared_device

    warn_shared_device(1)
    assert "warning" not in capsys.readouterr().err
    warn_shared_device(2)
    assert "2 workers share 1 cpu device(s)" in " ".join(capsys.readouterr().err.split())


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_fresh_process_reads_the_tuned_config_from_postgres(workers_run):
    url, folder = workers_run["url"], workers_run["folder"]
    (entry,) = Cache(url).entries()
    code = textwrap.dedent("""
        import json, sys
        sys.path.insert(0, sys.argv[1])
        import jax
        import tiny_study
        ex = tiny_study.examples()[0]
        fn, args = ex[0], ex[1]
        lookup = fn.config_for(*args)
        jax.block_until_ready(fn(*args))
        print(json.dumps({"source": lookup.source, "config": lookup.config.to_dict(), "error": lookup.error}))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder)],
        cwd=folder,
        env=_env(AUTOTUNE_CACHE=url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["source"] == "cache", got
    assert got["config"] == entry.config


def test_a_study_refuses_another_device(workers_run, monkeypatch):
    import optuna

    url = workers_run["url"]
    study = _load_study(url)
    real = study.user_attrs["device"]
    before = len(study.trials)  # the workers' trials: SPACE measured, plus any `duplicate` records
    study.set_user_attr("device", {**real, "platform": "gpu", "device_kind": "NVIDIA H200"})
    try:
        sys.path.insert(0, str(workers_run["folder"]))
        import tiny_study

        with pytest.raises(StudyError, match="never mixes devices"):
            tiny_study.smooth.tune(
                *tiny_study.examples()[0][1], n_trials=SPACE, storage=url, study_name=study.study_name
            )
        assert len(optuna.load_study(study_name=study.study_name, storage=url).trials) == before  # nothing ran
    finally:
        study.set_user_attr("device", real)
        sys.path.remove(str(workers_run["folder"]))


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_independent_processes_on_one_study(pg_url, tmp_path):
    """Two `autotune tune FILE --storage postgresql://...` started together (as on two boxes):
    both load_if_exists and walk the grid; each config is opened and measured exactly once."""
    study_file = tmp_path / "tiny_study.py"
    study_file.write_text(STUDY)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = _env(TEST_BARRIER_DIR=str(barrier), TEST_BARRIER_N="2")
    procs = [
        subprocess.Popen(
            _tune_cmd(study_file, pg_url),
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, f"{out[-2000:]}\n{err[-4000:]}"
    study = _load_study(pg_url)
    trials = study.get_trials(deepcopy=False)
    info = _describe(study)
    print(f"two independent processes: {len(trials)} trials\n{info}")
    measured = _measured(study)
    # No config lost, none measured twice, none even opened twice: both start at the same
    # moment on the same grid, and the proposal lock hands each config to one of them.
    assert len(measured) == SPACE and set(measured.values()) == {1}, info
    assert len(trials) == SPACE, info
    assert all(t.state.name in ("COMPLETE", "PRUNED") for t in trials), info
    # Each process confirmed and wrote the cache; the entry is one of the complete configs.
    (entry,) = Cache(pg_url).entries()
    assert json.dumps(entry.config, sort_keys=True) in {
        json.dumps(json.loads(t.user_attrs["config"]), sort_keys=True) for t in trials if t.state.name == "COMPLETE"
    }


# ------------------------------------------------------------------ the cache API on PostgreSQL

CPU = {"platform": "cpu", "device_kind": "cpu", "device_count": 1, "jax": "0.10.2", "jaxlib": "0.10.2"}
GPU = {"platform": "gpu", "device_kind": "NVIDIA H200", "device_count": 1, "jax": "0.10.2", "jaxlib": "0.10.2"}


def _entry(function_key: str = "mod:step", device: dict = CPU, **changes) -> CacheEntry:
    fields = dict(
        function_key=function_key,
        fingerprint="f00d",
        signature="(f32[8],)",
        device=dict(device),
        config={"outer": {"repr": "scan", "unroll": 4}},
        sites={"outer": {"kind": "scan", "length": 16, "has_ys": True}},
        measurements={"trace_s": 0.1, "lower_s": 0.05, "compile_s": 0.4, "run_s": 2e-4, "run_iqr_s": 1e-5, "reps": 50},
        objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
        cost=0.75,
        default_cost=1.25,
        study_name="study-1",
        pareto=[
            {"config": {"outer": {"repr": "for", "unroll": 1}}, "compile_s": 10.0, "run_s": 1e-4},
            {"config": {"outer": {"repr": "scan", "unroll": 1}}, "compile_s": 0.5, "run_s": 1e-3},
        ],
    )
    fields.update(changes)
    return CacheEntry(**fields)


def test_cache_round_trip_on_postgres(pg_server, pg_url, tmp_path):
    from autotune import cli

    cache = Cache(pg_url)
    assert cache.entries() == [] and cache.lookup("mod:step", "f00d", "(f32[8],)", _entry().device_key) is None
    a, b, c = _entry(), _entry(device=GPU), _entry("mod:other", cost=0.5)
    for e in (a, b, c):
        cache.put(e)
    cache.put(dataclasses.replace(a, config={"outer": {"repr": "for", "unroll": 1}}, cost=0.6))  # replaces a
    got = cache.lookup("mod:step", "f00d", "(f32[8],)", a.device_key)
    assert got.config == {"outer": {"repr": "for", "unroll": 1}} and got.cost == 0.6
    assert [e.device_key for e in cache.entries("mod:step")] == [a.device_key, b.device_key]
    assert len(cache.entries()) == 3 and [e.function_key for e in cache.entries(device_key=b.device_key)] == [
        "mod:step"
    ]
    # Re-chosen from the stored Pareto set for another call count.
    many = cache.lookup("mod:step", "f00d", "(f32[8],)", b.device_key, objective=b.goal.overridden(expected_calls=1e5))
    assert many.config == {"outer": {"repr": "for", "unroll": 1}}
    # Export, then import into another PostgreSQL database, through the CLI.
    path = tmp_path / "cache.json"
    assert cache.export_json(path) == 3
    other = pg_server.create_database()
    try:
        assert cli.main(["import", str(path), "--cache", other]) == 0
        assert cli.main(["export", str(tmp_path / "again.json"), "--cache", other]) == 0
        copy = Cache(other)
        strip = lambda es: sorted((e.to_dict() for e in es), key=lambda d: json.dumps(d, sort_keys=True))  # noqa: E731
        assert strip(copy.entries()) == strip(cache.entries())
        for e in cache.entries():
            assert copy.lookup(e.function_key, e.fingerprint, e.signature, e.device_key) == e
        assert json.loads((tmp_path / "again.json").read_text())["entries"] == json.loads(path.read_text())["entries"]
        copy.close()
    finally:
        pg_server.drop_database(other)
    assert cache.delete("mod:other") == 1 and len(cache.entries()) == 2
    cache.close()
