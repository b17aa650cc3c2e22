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
        completed: the steps done already (a resumed study's trials): the first frame shows them.
    """

    def __init__(self, enabled: bool, total: int, title: str = "tuning", transient: bool = False, completed: int = 0):
        self.bar = None
        self._status = ""
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        from autotune._display import shorten

        console = Console(stderr=True)
        title = shorten(title, 28)
        # What is left of the line once the title, the bar (narrower below 100 columns), n/N and
        # the clock are drawn: the standing best (first, up to 3/4 of it) and the status share
        # it, each shortened between words to fit, never cut mid-word by the terminal; a status
        # with no room left is not shown.
        bar_width = 16 if console.width >= 100 else 10
        n_of_n = 2 * len(str(max(1, total))) + 1
        self._room = max(20, console.width - len(title) - bar_width - n_of_n - 7 - 6)
        self._shorten = shorten
        self._best = ""
        self.bar = RichProgress(
            TextColumn(f"[bold]{title}[/bold]"),
            BarColumn(bar_width=bar_width),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[best]}"),
            TextColumn("{task.fields[status]}"),
            console=console,
            transient=transient,
        )
        self.task = self.bar.add_task(title, total=max(1, total), completed=completed, status="", best="")
        self.bar.start()

    @property
    def shown(self) -> bool:
        """Whether the bar is drawn (so callers can skip building its texts)."""
        return self.bar is not None

    def update(
        self,
        completed: int | None = None,
        status: str | None = None,
        total: int | None = None,
        advance: int = 0,
        best: str | None = None,
    ) -> None:
        """Move the bar; ``best`` is the standing best-so-far text (kept until replaced, ``""``
        clears it), ``status`` what is happening now."""
        if self.bar is None:
            return
        fields: dict[str, Any] = {}
        if completed is not None:
            fields["completed"] = completed
        if total is not None:
            fields["total"] = max(1, total)
        if best is not None:
            self._best = self._shorten(best, self._room * 3 // 4) if best else ""
            fields["best"] = self._best + (" ·" if self._best else "")
        if status is not None:
            self._status = status
        if status is not None or best is not None:
            room = self._room - (len(self._best) + 3 if self._best else 0)
            fields["status"] = self._shorten(self._status, room) if room >= 14 else ""
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
