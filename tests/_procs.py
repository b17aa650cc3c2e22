"""Process helpers for the worker tests: is a pid gone, how much CPU it used, which signals it
ignores, which workers a parent started."""

from __future__ import annotations

import contextlib
import os
import signal

from _wait import wait_until


def _no_process(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _exited_now(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def gone(pid: int, wait: float = 10.0) -> bool:
    """True once no process ``pid`` exists (reaped: not even a zombie)."""
    return wait_until(lambda: _no_process(pid), timeout=wait, interval=0.05)


def exited(pid: int, wait: float = 10.0) -> bool:
    """True once ``pid`` is gone or a zombie (an orphan's reaping is up to PID 1, not to us)."""
    return wait_until(lambda: _exited_now(pid), timeout=wait, interval=0.05)


def cpu_seconds(pid: int) -> float:
    """The CPU seconds (user + system) process ``pid`` has used so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ignores(pid: int, sig: int) -> bool:
    """Whether process ``pid`` ignores ``sig`` (SIG_IGN, from /proc): the kernel drops such a signal
    when it is sent, so nothing is left to wait for."""
    with open(f"/proc/{pid}/status") as f:
        mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn:"))
    return bool(mask >> (int(sig) - 1) & 1)


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
