"""The house's loaded machine: one core kept busy by a child process, in one place for the
benchmarks (``bench.py --burner``) and the loaded-machine test (tests/study/test_stable.py).

    >>> with burner() as proc:
    ...     pass  # measure here, beside a busy core
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

BURNER_CODE = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
"""
"""``while True: pass``, which also ends when its parent (the pid it is given: one read at its
start could already be the reaper's) has gone, so a run killed with SIGKILL leaves no core busy
behind it."""


@contextlib.contextmanager
def burner(on: bool = True) -> Iterator[subprocess.Popen | None]:
    """One core kept busy for the block (None and nothing started when ``on`` is false), killed
    at its end: on success, on an exception, on Ctrl-C, and on SIGTERM (turned into SystemExit
    meanwhile). ``proc.poll() is None`` while it burns; killing it earlier is allowed."""
    if not on:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", BURNER_CODE, str(os.getpid())])

    def terminated(signum, _frame):
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread: SIGTERM keeps its handler, the block's end still kills
        previous = None
    try:
        yield proc
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        proc.kill()
        proc.wait()
