"""The worker process itself, spoken to over its real pipes: the protocol, event by event."""

from __future__ import annotations

import os
import signal
import textwrap
import time

import pytest
from _procs import ignores

from autotune.measuring.process._channel import WorkerProcess, worker_env
from autotune.measuring.process._policy import jax_env
from autotune.measuring.process._protocol import PROTOCOL

STUDY = textwrap.dedent("""
    import jax, jax.numpy as jnp
    import autotune as at

    print("hello from the study file")   # must not corrupt the protocol

    @at.autotuned
    def doubling(x):
        print("tracing")
        return jax.lax.scan(lambda c, _: (c * 2.0 + 1.0, None), x, None, length=8)[0]

    def examples():
        return [(doubling, (jnp.linspace(0.0, 1.0, 8),))]
""")

TIMING = {"target_s": 0.01, "warmup": 1, "min_reps": 2}


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "at_child_study.py"
    path.write_text(STUDY)
    import sys

    w = WorkerProcess(sys.executable, worker_env(jax_env()))
    w.path = str(path)
    yield w
    w.kill()


def read(w, timeout=120.0):
    event = w.read(time.monotonic() + timeout)
    assert event is not None, "the worker did not answer"
    return event


def events_until(w, name, timeout=120.0):
    seen = []
    while not seen or seen[-1]["event"] != name:
        seen.append(read(w, timeout))
        assert seen[-1]["event"] != "error", seen[-1]
    return seen


def test_the_worker_speaks_json_lines_and_ignores_sigint(worker):
    ready = read(worker)
    assert ready["event"] == "ready" and ready["protocol"] == PROTOCOL and ready["pid"] == worker.pid
    assert ready["platform"] == "cpu" and "xla_flags" in ready
    worker.send({"op": "bogus", "id": 1})
    err = read(worker)
    assert err["event"] == "error" and err["type"] == "ProtocolError" and err["id"] == 1
    os.kill(worker.pid, signal.SIGINT)  # the parent decides what Ctrl-C means
    assert ignores(worker.pid, signal.SIGINT)  # dropped when sent: no moment to wait for it to land
    assert worker.alive()  # and the exchange below shows it still serves
    worker.send({"op": "load_study", "path": worker.path, "index": 0})
    loaded = read(worker)
    assert loaded["event"] == "loaded" and loaded["function"].endswith("doubling") and len(loaded["digest"]) == 16
    worker.send({"op": "load_study", "path": worker.path, "index": 5, "id": 2})
    err = read(worker)
    assert err["event"] == "error" and "no index 5" in err["message"]
    worker.send({"op": "exit"})
    assert worker.proc.wait(timeout=30) == 0
    worker.stderr.seek(0)
    assert b"hello from the study file" in worker.stderr.read()  # what user code prints goes to stderr


def test_a_trial_reports_each_stage_and_waits_for_the_parent_after_lowering(worker):
    read(worker)
    worker.send({"op": "load_study", "path": worker.path, "index": 0})
    assert read(worker)["event"] == "loaded"
    # First trial: default config; the worker says when it lowered and waits for go/skip.
    worker.send(
        {
            "op": "trial",
            "id": 1,
            "mode": "study",
            "config": {},
            "sampling": TIMING,
            "keep_outputs": True,
            "ask_lowered": True,
        }
    )
    assert read(worker)["event"] == "started"
    lowered = read(worker)
    assert lowered["event"] == "lowered" and lowered["id"] == 1 and len(lowered["program_hash"]) == 64
    assert lowered["trace_s"] > 0 and lowered["lower_s"] > 0
    worker.send({"op": "lowered_reply", "id": 1, "skip": False})
    names = [e["event"] for e in events_until(worker, "result")]
    assert names == ["compile_start", "compile_end", "result"]
    # Second trial, same config: told to skip, it compiles nothing.
    worker.send({"op": "trial", "id": 2, "mode": "study", "config": {}, "sampling": TIMING, "ask_lowered": True})
    assert [e["event"] for e in events_until(worker, "lowered")] == ["started", "lowered"]
    worker.send({"op": "lowered_reply", "id": 2, "skip": True})
    result = read(worker)
    assert result["event"] == "result" and result["skipped"] and result["measurement"]["program_hash"]
    # Its executable is kept: re-time it, then drop it.
    worker.send({"op": "retime", "id": 3, "key": "{}", "sampling": TIMING})
    again = read(worker)
    assert again["event"] == "result" and again["measurement"]["reps"] >= 2
    worker.send({"op": "retain", "id": 4, "keys": []})
    assert read(worker) == {"event": "retained", "id": 4, "kept": 0}
    worker.send({"op": "retime", "id": 5, "key": "{}", "sampling": TIMING})
    assert read(worker) == {"event": "gone", "id": 5}


def test_a_worker_exits_when_its_parent_is_gone(tmp_path):
    import subprocess
    import sys

    from _procs import exited
    from _repo import repo_env

    # A parent that starts a worker naming it as parent, then exits at once without killing it.
    code = textwrap.dedent("""
        import subprocess, sys
        p = subprocess.Popen([sys.executable, "-m", "autotune.worker", "--parent", str(__import__("os").getpid())],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        print(p.pid, flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", code], env=repo_env(), capture_output=True, text=True, timeout=60)
    pid = int(done.stdout.split()[0])
    assert exited(pid, wait=20), f"worker {pid} outlived its parent"
