"""The ``autotune`` command: tune study files (or recorded calls), inspect and move the cache,
and write reports.

``main(argv)`` returns the exit status; :data:`EXIT_STATUS` is the complete table (the
documentation quotes it): 0 done, 1 nothing found (or a bug: its traceback, then one line
saying so), 2 an error autotune raises on purpose or a bad option (one line, naming the thing
and the fix), 3 a partial result (``tune --recorded`` skipped a record), 128 + the signal for
an interrupted run (completed trials are kept).

``import autotune.cli`` loads neither JAX, Optuna nor matplotlib; each command imports what it needs, so
``--help``, ``--version`` and a bad option answer without JAX.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable

from autotune._errors import AutotuneError
from autotune.cli._output import PARTIAL as PARTIAL
from autotune.cli._output import console
from autotune.cli._parser import build_parser as build_parser

EXIT_STATUS: dict[str, str] = {
    "0": "done; also when the reader of a pipe went away (`autotune best --json | head -1` ends quietly)",
    "1": "nothing found: `best` matched no entry, `tune --recorded` found no recorded call; or an unexpected "
    "exception, a bug: its traceback is printed, then one line saying so",
    "2": "an error autotune raises on purpose (a bad study file, an unknown --function, an unreachable cache "
    "or storage) or a bad option: one line naming the thing and the fix",
    "3": "a partial result: `tune --recorded` tuned the records it could and skipped or failed on at least "
    "one; each is named on stderr with why, the tuned ones are in the cache",
    "128 + N": "interrupted by signal N (Ctrl-C: 130, SIGTERM: 143, SIGHUP: 129): completed trials are kept; "
    "the same command resumes",
}
"""Every exit status of ``autotune``, the one table (``docs/reference/exit-codes.md`` shows it)."""


def _command(name: str) -> Callable:
    if name == "tune":
        from autotune.cli._tune_cmd import cmd_tune as cmd
    elif name == "sites":
        from autotune.cli._sites import cmd_sites as cmd
    elif name in ("best", "list", "export", "import"):
        from autotune.cli import _cache_cmds

        cmd = getattr(_cache_cmds, f"cmd_{name}")
    elif name == "report":
        from autotune.cli._report_cmd import cmd_report as cmd
    elif name == "pending":
        from autotune.cli._record import cmd_pending as cmd
    else:  # argparse only lets the names above through
        raise AutotuneError(f"Unknown command {name!r}; run `autotune --help` for the list.")
    return cmd


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _quiet_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so the final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    """Run the ``autotune`` command line; returns the exit status (see the module docstring)."""
    args = build_parser().parse_args(argv)
    err = console(stderr=True)
    try:
        status = _command(args.command)(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:  # the reader went away (`| head`): what it wanted was written
        _quiet_stdout()
        return 0
    except AutotuneError as exc:
        # One line in a log (grep finds it whole); wrapped at word boundaries at a terminal.
        err.print(f"[red]error:[/red] {_escape(str(exc))}", soft_wrap=not err.is_terminal, highlight=False)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP caught by the interrupt latch
        from autotune._interrupt import Interrupted

        signum = exc.signum if isinstance(exc, Interrupted) else 2
        err.print(
            f"interrupted ({Interrupted(signum).name}): completed trials are kept in the study; run the "
            "same command again to resume."
        )
        return 128 + signum
    except Exception:  # a bug: show where, and say so
        traceback.print_exc()
        err.print(
            f"autotune {args.command}: an unexpected error (a bug in autotune, or in the program it ran); "
            "the traceback above shows where.",
            soft_wrap=True,
        )
        return 1


__all__ = ["EXIT_STATUS", "PARTIAL", "build_parser", "main"]
