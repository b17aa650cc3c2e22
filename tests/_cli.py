"""Helpers for the CLI tests: run ``autotune`` as a real subprocess, through a pipe or on a
real pseudo-terminal of a given width, and measure what a person would see."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import textwrap
from pathlib import Path

from _repo import python, repo_env

# A tiny study whose function prints while it is traced (tracing runs in the CLI's process).
STUDY = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    print("study file imported")

    @at.autotuned(expected_calls=100)
    def smooth(x):
        print("tracing smooth")
        return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=4, name="smooth")[0]

    def examples():
        return [(smooth, (jnp.zeros(8),))]
""")

_CSI = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78])")


def cli_env(tmp_path, **extra: str) -> dict[str, str]:
    """An environment with the repository importable and a private cache under ``tmp_path``."""
    base = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_STORAGE", "COLUMNS", "LINES")}
    return repo_env(base=base, **{"AUTOTUNE_CACHE": str(Path(tmp_path) / "cache.db"), **extra})


def run(*args: str, cwd, env, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m autotune ARGS`` with stdout and stderr on pipes."""
    return python("-m", "autotune", *args, cwd=cwd, env=env, timeout=timeout)


def on_terminal(
    argv: list[str], *, cwd=None, env=None, columns: int = 80, rows: int = 40, timeout: float = 300
) -> tuple[int, str]:
    """Run ``argv`` with stdout and stderr on one real pseudo-terminal of ``columns`` columns
    (the window size set, and ``$COLUMNS``), as at an interactive shell.

    Returns:
        (exit status, everything written, as text with the escape sequences kept).
    """
    env = dict(os.environ if env is None else env)
    env.setdefault("TERM", "xterm-256color")
    env["COLUMNS"] = str(columns)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    try:
        p = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True
        )
    finally:
        os.close(slave)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
    return p.wait(timeout=timeout), b"".join(chunks).decode("utf-8", errors="replace")


def run_in_pty(*args: str, cwd, env, columns: int = 80, timeout: float = 300) -> tuple[int, str]:
    """``python -m autotune ARGS`` on a real pseudo-terminal (see :func:`on_terminal`)."""
    return on_terminal(
        [sys.executable, "-m", "autotune", *args],
        cwd=cwd,
        env={**env, "TERM": "xterm-256color"},
        columns=columns,
        timeout=timeout,
    )


def visible_lines(text: str) -> list[str]:
    """What a terminal shows, line by line: escape sequences removed, each carriage return
    starting the line over (a progress bar redraws itself)."""
    plain = _CSI.sub("", text).replace("\r\n", "\n")
    lines = []
    for line in plain.split("\n"):
        lines += [part for part in line.split("\r")]
    return [ln.rstrip() for ln in lines]


def too_long(text: str, width: int = 80) -> list[str]:
    """The visible lines of ``text`` longer than ``width`` characters."""
    return [ln for ln in visible_lines(text) if len(ln) > width]
