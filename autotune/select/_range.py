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


def format_calls(x: float | None) -> str:
    """A call count as text: ``0``, ``37.5``, ``1,250``, ``∞``. It stays here, below ``_display``,
    because the ``why`` of a complete range (stored in entries and studies) is written with it;
    everything else people see about a range is ``_display.range_text``."""
    if x is None or x == math.inf:
        return "∞"
    if x >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def json_bound(x: float | None) -> float | None:
    """THE one spelling of an unbounded call count in JSON: ``math.inf`` (or None) becomes null."""
    return None if x is None or x == math.inf else x


def intervals_json(intervals: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`crossover_intervals` output as strict JSON (configs as dicts, an unbounded ``to_calls`` null)."""
    return [{**it, "config": it["config"].to_dict(), "to_calls": json_bound(it["to_calls"])} for it in intervals]


def range_json(complete: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A range as strict JSON (an unbounded ``to_calls`` becomes null)."""
    if complete is None:
        return None
    return {**complete, "to_calls": json_bound(complete.get("to_calls"))}
