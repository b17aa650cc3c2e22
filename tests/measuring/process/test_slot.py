"""autotune.measuring.process._slot: starting the worker when another process holds the device.

On a device that admits one process (tests/fixtures/exclusive_device, as libtpu with a TPU
chip), a worker that finds the device held by a process other than its parent waits for it
(the holder may be about to exit) and, when it stays held, the tuner stops with one line that
names the cause, never measuring in the parent (which traces on the CPU and would time that).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

import pytest
from _exclusive import exclusive_env
from _repo import ROOT, python

HOLD = "import sys, time, jax; jax.devices(); print('held', flush=True); time.sleep(float(sys.argv[1]))"


@contextlib.contextmanager
def device_held(env: dict[str, str], seconds: float) -> Iterator[subprocess.Popen]:
    """A process that opens the device and keeps it ``seconds`` (killed at the end of the block);
    the block starts once it holds it, and is handed the process."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(seconds)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def tune(tmp_path, env: dict[str, str]) -> subprocess.CompletedProcess:
    study = str(ROOT / "studies" / "demo_unroll.py")
    return python(
        "-m", "autotune", "tune", study, "--trials", "2", "--run-seconds", "0.05",
        "--storage", str(tmp_path / "studies.db"), "--json", env=env, timeout=600,
    )  # fmt: skip


def test_a_worker_waits_for_a_holder_that_exits_then_measures_on_the_device(tmp_path):
    env = exclusive_env(tmp_path)
    with device_held(env, 4.0) as holder:
        r = tune(tmp_path, env)
        holder_exit = holder.poll()
    assert r.returncode == 0, r.stderr
    assert "without isolation" not in r.stderr and "Traceback" not in r.stderr
    assert holder_exit == 0  # it did wait for the holder: the holder ended by itself before the tuner did
    assert '"complete"' in r.stdout


@pytest.mark.slow
def test_a_device_held_by_another_process_stops_the_tuner_with_one_line(tmp_path):
    env = exclusive_env(tmp_path)
    with device_held(env, 300.0):
        r = tune(tmp_path, env)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "without isolation" not in r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert "another process holds the device" in line and "fn.tune" in line
