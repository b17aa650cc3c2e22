"""The table of where a tuning run's wall-clock seconds went (``autotune tune``, after the winner):
a row per part of the run (setting up, the search, the confirmation...), a column per stage
(`autotune.measuring._wall.STAGES` and the rest), and the total."""

from __future__ import annotations

from typing import Any

from autotune import _display
from autotune.cli._tables import table
from autotune.measuring._wall import OTHER, STAGES


def wall_table(report: Any, wide: bool = False):
    """The wall of ``report`` (:class:`autotune.measuring._wall.WallReport`) as a table."""
    stages = (*STAGES, OTHER)
    grid = table(
        f"where the {_display.seconds(report.total_s, 3)} went",
        ("part", "wall", *stages),
        right=("wall", *stages),
        wide=wide,
    )

    def cell(x: float) -> str:
        return "-" if x < 5e-4 else _display.seconds(x, 3)

    for part, wall_s in report.parts.items():
        grid.add_row(part, cell(wall_s), *(cell(report.by_part[part][s]) for s in stages))
    by_stage = report.by_stage
    grid.add_row("total", cell(report.total_s), *(cell(by_stage[s]) for s in stages))
    return grid
