"""The honest range: the call counts over which a study's measurements are complete."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def in_range(complete: Mapping[str, Any] | None, calls: float) -> bool:
    """Whether ``calls`` lies in a range from :func:`complete_range` (None: unknown, taken as covered)."""
    if not complete:
        return True
    hi = complete.get("to_calls")
    hi = math.inf if hi is None else float(hi)
    return float(complete.get("from_calls", 0.0)) <= calls <= hi


def range_text(complete: Mapping[str, Any] | None) -> str:
    """``[0, 12,500]``, ``[1,000, 1,000]`` or ``[0, ∞)`` for people."""
    if not complete:
        return "unknown"
    hi = complete.get("to_calls")
    hi = math.inf if hi is None else float(hi)
    lo = format_calls(float(complete.get("from_calls", 0.0)))
    return f"[{lo}, ∞)" if hi == math.inf else f"[{lo}, {format_calls(hi)}]"


def format_calls(x: float | None) -> str:
    """A call count for people: ``0``, ``37.5``, ``1,250``, ``∞``."""
    if x is None or x == math.inf:
        return "∞"
    if x >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def intervals_json(intervals: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`crossover_intervals` output as strict JSON (an unbounded ``to_calls`` becomes null)."""
    return [{**it, "to_calls": None if it["to_calls"] == math.inf else it["to_calls"]} for it in intervals]


def range_json(complete: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A range as strict JSON (an unbounded ``to_calls`` becomes null)."""
    if complete is None:
        return None
    hi = complete.get("to_calls")
    return {**complete, "to_calls": None if hi is None or hi == math.inf else hi}
