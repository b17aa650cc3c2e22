"""The one progress bar (on stderr): tuning trials and report figures both use it.

``progress=None`` means "when stderr is a terminal": an interactive ``fn.tune(x)`` shows
its trials, a batch job's log stays clean.
"""

from __future__ import annotations

import sys
from typing import Any


def wanted(progress: bool | None) -> bool:
    """``progress`` resolved: None shows progress only when stderr is a terminal."""
    if progress is None:
        try:
            return sys.stderr.isatty()
        except (AttributeError, ValueError):
            return False
    return bool(progress)


class Progress:
    """A rich progress bar with a status text, or nothing.

    Arguments:
        enabled: show it (see :func:`wanted`).
        total: how many steps.
        title: the bold text before the bar (``tuning``, ``report``).
        transient: remove the bar when done.
    """

    def __init__(self, enabled: bool, total: int, title: str = "tuning", transient: bool = False):
        self.bar = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn

        from .._display import shorten

        console = Console(stderr=True)
        title = shorten(title, 28)
        # What is left of the line once the title, a 16-cell bar, n/N and the clock are drawn:
        # the status is shortened between words to fit it, never cut mid-word by the terminal.
        self._room = max(12, console.width - len(title) - 16 - 9 - 8 - 5)
        self._shorten = shorten
        self.bar = RichProgress(
            TextColumn(f"[bold]{title}[/bold]"), BarColumn(bar_width=16), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"), console=console, transient=transient)
        self.task = self.bar.add_task(title, total=max(1, total), status="")
        self.bar.start()

    def update(self, completed: int | None = None, status: str | None = None, total: int | None = None,
               advance: int = 0) -> None:
        if self.bar is None:
            return
        fields: dict[str, Any] = {}
        if completed is not None:
            fields["completed"] = completed
        if total is not None:
            fields["total"] = max(1, total)
        if status is not None:
            fields["status"] = self._shorten(status, self._room)
        if advance:
            fields["advance"] = advance
        self.bar.update(self.task, **fields)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
