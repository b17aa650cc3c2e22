"""Interrupts and dying parents: SIGINT, SIGTERM and SIGKILL sent for real to a tuning process."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax.numpy as jnp
import pytest
from _procs import cpu_seconds, default_disposition, exited, gone, workers_of
from _repo import repo_env
from _wait import wait_until

import autotune as at
from autotune._interrupt import Interrupted, InterruptLatch
from autotune.measuring.process._worker_runner import WorkerRunner

SLOW_STUDY = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    def body(c, _):
        for k in range(10):
            c = jnp.sin(c) * 1.01 + jnp.cos(c * 0.5)
        return c, None

    @at.autotuned
    def explode(x):  # fully unrolled: over 10 s of trace + compile in the worker on 2 cores
        return at.loop(body, x, length=800, name="l")[0]

    def examples():
        return [(explode, (jnp.linspace(0.0, 1.0, 64),))]
""")

# The tuning process: measures the rolled loop, says its worker's pid, then either measures the
# full unroll (seconds of compile in the worker) or waits with a warm worker.
PARENT = textwrap.dedent("""
    import sys, time
    from autotune._interrupt import InterruptLatch, Interrupted
    from autotune.measuring.process import WorkerRunner

    path, how = sys.argv[1], sys.argv[2]
    runner = WorkerRunner.for_study_file(path, timing={"target_s": 0.01, "warmup": 1, "min_reps": 1})
    runner.measure({})
    print(runner.pid, flush=True)
    if how == "idle":
        time.sleep(120)  # the behaviour under test: a parent alive with a warm, idle worker, until killed
    try:
        if how == "latch":
            with InterruptLatch():   # as tune() does
                runner.measure({"l": {"repr": "for"}})
        else:
            runner.measure({"l": {"repr": "for"}})   # the runner's own latch
        print("finished", flush=True)
    except Interrupted as exc:
        print("interrupted", exc.name, runner.pid, flush=True)
        sys.exit(exc.exit_code)
""")


@pytest.fixture
def slow_study(tmp_path):
    path = tmp_path / "at_slow_study.py"
    path.write_text(SLOW_STUDY)
    (tmp_path / "parent.py").write_text(PARENT)
    return path


def _start(slow_study: Path, how: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, str(slow_study.parent / "parent.py"), str(slow_study), how],
        env=repo_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line.strip().isdigit(), (line, proc.communicate(timeout=60))
    return proc, int(line)


@pytest.mark.timing  # "at once" is a wall-clock bound on the parent's exit
@pytest.mark.parametrize("how", ["latch", "own-latch"])
def test_sigterm_during_a_slow_compile_kills_the_worker_at_once_and_the_parent_exits_143(slow_study, how):
    proc, worker = _start(slow_study, how)
    try:
        # the worker is busy (tracing or compiling the 800-step unroll) once it spends CPU again
        idle = cpu_seconds(worker)
        assert wait_until(lambda: cpu_seconds(worker) > idle + 0.5, timeout=60), "the worker never got to work"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "finished" not in out, "the compile ended before the signal; the workload is too small now"
    assert proc.returncode == 128 + signal.SIGTERM, (out, err)
    assert out.split()[-3:] == ["interrupted", "SIGTERM", "None"] and "Traceback" not in err, (out, err)
    assert took < 5.0, f"the parent took {took:.1f} s to stop: it waited for the trial"
    assert gone(worker, wait=5)


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_worker_exits_by_itself_when_its_parent_dies_of_sigterm_or_sigkill(slow_study):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc, worker = _start(slow_study, "idle")  # no latch while idle: the default action kills it
        proc.send_signal(sig)
        proc.wait(timeout=30)
        assert proc.returncode == -sig
        assert exited(worker, wait=10), f"worker {worker} outlived its parent ({signal.Signals(sig).name})"


def test_an_interrupt_caught_before_measuring_stops_the_trial_before_it_starts():
    f = lambda x: at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="l")[0]  # noqa: E731
    with (
        default_disposition(signal.SIGHUP),
        WorkerRunner(at.Call(f, (jnp.ones(3),)), {"target_s": 0.01}) as runner,
        InterruptLatch(),
    ):
        runner.measure({})
        pid = runner.pid
        os.kill(os.getpid(), signal.SIGHUP)  # caught by the latch between steps
        with pytest.raises(Interrupted) as info:
            runner.measure({"l": {"repr": "for"}})
        assert info.value.signum == signal.SIGHUP and gone(pid) and runner.pid is None


# --------------------------------------------------------------------------- Ctrl-C through the CLI

CLI_STUDY = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    @at.autotuned(expected_calls=100)
    def relax(x):
        return at.loop(lambda c, _: (jnp.tanh(c) * 0.9 + 0.1, None), x, length=64, name="relax")[0]

    def examples():
        return [(relax, (jnp.linspace(0.0, 1.0, 256),))]
""")


def _complete_trials(db: Path) -> list[int]:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return [n for (n,) in con.execute("SELECT number FROM trials WHERE state = 'COMPLETE' ORDER BY number")]
    except sqlite3.Error:
        return []


def _interrupt_after(
    cmd: list[str], env: dict, db: Path, more_than: int
) -> tuple[subprocess.CompletedProcess, list[int]]:
    """Run the CLI until it completed more than ``more_than`` trials, then SIGINT it."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=db.parent)
    try:

        def progressed() -> bool:
            assert proc.poll() is None, proc.communicate()
            return len(_complete_trials(db)) > more_than and bool(workers_of(proc.pid))

        assert wait_until(progressed, timeout=120, interval=0.1), "the CLI made no progress"
        workers = workers_of(proc.pid)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), workers


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_ctrl_c_stops_cleanly_keeps_trials_reaps_the_worker_and_resumes(tmp_path):
    (tmp_path / "relax_study.py").write_text(CLI_STUDY)
    db = tmp_path / "studies.db"
    cmd = [
        sys.executable,
        "-m",
        "autotune",
        "tune",
        "relax_study.py",
        "--cache",
        str(tmp_path / "cache.db"),
        "--storage",
        str(db),
    ]
    env = repo_env()

    first, workers = _interrupt_after(cmd, env, db, more_than=1)
    assert first.returncode == 130, first.stderr
    assert "interrupted (SIGINT): completed trials are kept" in first.stderr and "Traceback" not in first.stderr, (
        first.stderr
    )
    assert workers and all(gone(pid) for pid in workers)  # reaped, not orphaned
    kept = _complete_trials(db)
    assert len(kept) >= 2

    second, workers = _interrupt_after(cmd, env, db, more_than=len(kept))
    assert second.returncode == 130, second.stderr
    assert all(gone(pid) for pid in workers)
    now = _complete_trials(db)
    assert now[: len(kept)] == kept and len(now) > len(kept) and min(set(now) - set(kept)) > max(kept)


# A stand-in worker program that talks the protocol's framing (one JSON event per line): two
# events in one write, then one of TALKER_SIZE characters written in 3 MB pieces, then one more.
TALKER = textwrap.dedent("""
    import json, os, sys, time
    out = sys.stdout
    out.write(json.dumps({"event": "a"}) + "\\n" + json.dumps({"event": "b", "n": 1}) + "\\n")
    out.flush()
    text = json.dumps({"event": "big", "text": "x" * int(os.environ["TALKER_SIZE"])})
    for i in range(0, len(text), 3 << 20):
        out.write(text[i : i + (3 << 20)])
        out.flush()
    out.write("\\n" + json.dumps({"event": "c"}) + "\\n")
    out.flush()
    time.sleep(60)
""")


def _talk(tmp_path: Path, size: int) -> float:
    """Start the talker, read its four events (checking each), and return the seconds the large one took."""
    from autotune.measuring.process._channel import WorkerProcess

    (tmp_path / "talker.py").write_text(TALKER)
    env = {**repo_env(), "PYTHONPATH": str(tmp_path), "TALKER_SIZE": str(size)}
    w = WorkerProcess(sys.executable, env, module="talker")
    try:
        deadline = time.monotonic() + 300
        assert w.read(deadline) == {"event": "a"}
        assert w.read(deadline) == {"event": "b", "n": 1}
        t0 = time.perf_counter()
        big = w.read(deadline)
        took = time.perf_counter() - t0
        assert big["event"] == "big" and len(big["text"]) == size
        assert w.read(deadline) == {"event": "c"}
        assert len(w.buf) == 0  # nothing read past the last event
        return took
    finally:
        w.kill()


def test_events_arrive_whole_and_in_order_however_they_are_cut_into_writes(tmp_path):
    _talk(tmp_path, 10 << 20)


@pytest.mark.timing
def test_an_event_of_hundreds_of_megabytes_arrives_in_seconds(tmp_path):
    # A training step's outputs (its new parameters) come back from the worker as one event: a
    # 0.4 GB transformer's took minutes when the buffer was re-copied and re-scanned per chunk.
    took = _talk(tmp_path, 400 << 20)
    assert took < 20, f"a 400 MB event took {took:.1f} s to read"


def test_a_worker_maps_a_small_tpu_transfer_buffer_unless_the_user_chose_one(monkeypatch):
    from autotune.measuring.process._channel import PREMAPPED_BYTES, worker_env

    monkeypatch.delenv("TPU_PREMAPPED_BUFFER_SIZE", raising=False)
    assert worker_env({})["TPU_PREMAPPED_BUFFER_SIZE"] == str(256 << 20) == str(PREMAPPED_BYTES)
    monkeypatch.setenv("TPU_PREMAPPED_BUFFER_SIZE", "4294967296")
    assert worker_env({})["TPU_PREMAPPED_BUFFER_SIZE"] == "4294967296"
    assert worker_env({"TPU_PREMAPPED_BUFFER_SIZE": "1"})["TPU_PREMAPPED_BUFFER_SIZE"] == "1"
