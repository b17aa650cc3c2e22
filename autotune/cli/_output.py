"""Where the CLI writes: consoles sized for people, JSON that stays alone on stdout.

Width policy: at a terminal the tables fit its width (``$COLUMNS`` or the window). Through
a pipe or into a log they get the same layout as an 80-column terminal (``$COLUMNS`` if
set), so a log reads like the screen; ``--wide`` shows everything and puts each row on one
line (a terminal folds it; a pipe keeps it whole for ``grep`` and ``cut``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from collections.abc import Iterator
from typing import Any

PARTIAL = 3
"""The exit status of a partial result: ``tune --recorded`` tuned what it could, and skipped
(or failed on) at least one record, each named on stderr with why (see ``autotune.cli.EXIT_STATUS``)."""

WIDE_PIPE_WIDTH = 100_000
"""Console width for ``--wide`` through a pipe: wide enough that no row wraps (a table there
takes the width of its widest row, not this)."""


def console(stderr: bool = False, wide: bool = False):
    """A rich console on stdout (or stderr) that follows the width policy above.

    It writes to whatever ``sys.stdout`` / ``sys.stderr`` is at the time of each print.
    """
    from rich.console import Console

    c = Console(stderr=stderr, highlight=False)
    if wide:  # at a terminal too: a row is one line, which the terminal folds (nothing is cropped)
        c = Console(stderr=stderr, highlight=False, width=WIDE_PIPE_WIDTH)
    c.on_broken_pipe = _broken_pipe  # rich would exit 1 itself; the CLI ends a closed pipe quietly with 0
    return c


def _broken_pipe() -> None:
    raise BrokenPipeError


@contextlib.contextmanager
def stdout_to_stderr(active: bool = True) -> Iterator[None]:
    """While active, everything written to stdout goes to stderr: ``sys.stdout`` and file
    descriptor 1 alike (``print`` in a user's traced function, a C library, a child
    process started meanwhile). Used around loading and tracing a study file, so that
    ``--json`` output is the only thing on stdout."""
    if not active:
        yield
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1: only the Python stream to swap
        saved = None
    if saved is not None:
        try:
            os.dup2(2, 1)
        except OSError:
            os.close(saved)
            saved = None
    old = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        sys.stdout = old
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _strict(x: Any) -> Any:
    """``x`` with every non-finite float (an unknown figure) as None."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _strict(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_strict(v) for v in x]
    return x


def emit_json(data: Any) -> None:
    """Print ``data`` as strict JSON on stdout: a NaN or infinite figure becomes null."""
    sys.stdout.write(json.dumps(_strict(data), indent=2, allow_nan=False) + "\n")
    sys.stdout.flush()


def shell_lines(command: str, width: int, indent: str = "  ") -> list[str]:
    """A shell command split at spaces into lines of at most ``width`` characters, each but
    the last ending in `` \\``, so that the printed lines still paste as one command.
    A single word longer than a line stays whole (it must, to paste)."""
    words = command.split(" ")
    lines, current = [], indent
    for w in words:
        if current.strip() and len(current) + 1 + len(w) + 2 > width:
            lines.append(current + " \\")
            current = indent + "  " + w
        else:
            current = f"{current} {w}" if current.strip() else current + w
    lines.append(current)
    return lines


def retune_lines(command: str | None, width: int) -> list[str]:
    """The command that re-tunes for another call count, as lines to paste."""
    if not command:
        return ["  (no re-tune command was recorded: run `autotune tune FILE --expected-calls N`)"]
    return shell_lines(command, width)
