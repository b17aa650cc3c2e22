"""Process helpers for the worker tests: is a pid gone, which workers a parent started."""

from __future__ import annotations

import contextlib
import os
import signal
import time


def gone(pid: int, wait: float = 10.0) -> bool:
    """True once no process ``pid`` exists (reaped: not even a zombie)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def exited(pid: int, wait: float = 10.0) -> bool:
    """True once ``pid`` is gone or a zombie (an orphan's reaping is up to PID 1, not to us)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


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
        if (
            b"autotune.worker" in argv
            and b"--parent" in argv
            and argv[argv.index(b"--parent") + 1] == str(parent_pid).encode()
        ):
            found.append(int(entry))
    return found


@contextlib.contextmanager
def default_disposition(sig: int):
    """Give ``sig`` the disposition a program started at a shell has, for the block (the session
    may have inherited it ignored, see conftest.py), and put the previous one back after."""
    previous = signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(sig, previous)
