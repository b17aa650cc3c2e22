"""The report's breakdown of where the tuner's and the grid's wall went (``benchmarks.bench``):
per study, each approach's seconds by stage (process starts, trace + lower, compile, load, timing,
the rest), and the tuner's by part of its run (setting up, the search, the confirmation...)."""

from __future__ import annotations

from typing import Any

STAGES = ("process starts", "trace+lower", "compile", "load", "timing", "other")


def _cell(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def walls(result: dict[str, Any]) -> list[str]:
    """The markdown section (empty when no study carries a breakdown)."""
    rows = []
    for s in result.get("studies", []):
        grid = s.get("grid_wall_report")
        tuned = (s.get("approaches", {}).get("tuned") or {}).get("wall_report")
        if not grid and not tuned:
            continue
        for name, report in (("grid", grid), ("tuned", tuned)):
            if report:
                stages = report["by_stage"]
                rows.append(
                    f"| {s['study']} | {name} | {_cell(report['total_s'])} | "
                    + " | ".join(_cell(stages.get(k)) for k in STAGES)
                    + " |"
                )
        if tuned:
            parts = ", ".join(f"{p} {v:.1f}" for p, v in tuned["parts"].items())
            rows.append(f"|  | tuned, by part | | {parts} |" + " |" * (len(STAGES) - 1))
    if not rows:
        return []
    head = "| study | approach | wall s | " + " | ".join(STAGES) + " |"
    return [
        "",
        "## Where the wall went (seconds)",
        "",
        "The grid's wall is its worker's start and every measurement; the tuner's is the whole `tune()` call. "
        "A stage is what the process waited for; `other` is the rest (the study's bookkeeping, proposals, Python).",
        "",
        head,
        "|" + "---|" * (3 + len(STAGES)),
        *rows,
    ]
