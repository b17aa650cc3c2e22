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


# `python -m autotune` with the worker start's wait for a held device shortened (20 s in the
# product): the wait, its retries and the one line are the same, in a fraction of the time.
AUTOTUNE_RETRYING_FOR = (
    "import sys; from autotune.measuring.process import _slot; _slot.BUSY_RETRY_S = float(sys.argv.pop(1)); "
    "from autotune.cli import main; sys.exit(main(sys.argv[1:]))"
)


def tune(tmp_path, env: dict[str, str], retry_s: float | None = None) -> subprocess.CompletedProcess:
    study = str(ROOT / "studies" / "demo_unroll.py")
    command = ("-m", "autotune") if retry_s is None else ("-c", AUTOTUNE_RETRYING_FOR, str(retry_s))
    return python(
        *command, "tune", study, "--trials", "2", "--run-seconds", "0.05",
        "--storage", str(tmp_path / "studies.db"), "--json", env=env, timeout=600,
    )  # fmt: skip


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
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
        r = tune(tmp_path, env, retry_s=3.0)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "without isolation" not in r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert "another process holds the device" in line and "fn.tune" in line
    assert "still held after 3 s" in line, line  # it waited, retrying, before it gave up
