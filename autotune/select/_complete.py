"""`complete_range`: which call counts the measured points decide (what stopped and unmeasured configs leave open)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

from autotune.program._config import Config
from autotune.select._front import stretches
from autotune.select._objective import Objective
from autotune.select._point import Point
from autotune.select._range import format_calls
from autotune.select._rule import Line, default_line, lines_of


def _chosen_cost_crosses(winners: list[tuple[Fraction, Line]], bound: Fraction) -> Fraction:
    """The largest N such that the chosen config's cost stays <= bound on [0, N] (may be inf):
    ``winners`` as :func:`~autotune.select._front.stretches` gives them."""
    for i, (x, w) in enumerate(winners):
        value, slope = w.key(x)
        if value > bound:
            return x
        nxt = winners[i + 1][0] if i + 1 < len(winners) else None
        if slope > 0:
            cross = x + (bound - value) / slope
            if nxt is None or cross < nxt:
                return cross
    return Fraction(-1)  # never crosses


def complete_range(
    points: Sequence[Point],
    objective: Objective,
    *,
    default: Config | None = None,
    stopped: Iterable[tuple[Config, float]] = (),
    unmeasured: int = 0,
) -> dict[str, Any]:
    """The call counts over which the measured points are the whole story.

    A study leaves configs open in two ways: *stopped* ones (pruned by the compile
    budget, predicted over it, or timed out) are known to compile for at least some
    seconds ``lb`` but their run time is unknown, so they might win once
    ``compile_weight * lb`` drops below the chosen config's cost, i.e. above some call
    count; *unmeasured* ones (a sampled search never reached them, or XLA's options were tried
    on the best loop configs only) might win anywhere.
    The study's own call count is always covered: that is what it searched for.

    Arguments:
        points: the confirmed points; objective: the study's objective.
        default: the default config.
        stopped: ``(config, compile_seconds_lower_bound)`` pairs.
        unmeasured: how many configs of the space were never measured nor stopped.

    Returns:
        ``{"from_calls": a, "to_calls": b, "why": text}``: the closed range ``[a, b]``
        (``b`` is ``math.inf`` when unbounded).
    """
    n0 = float(objective.expected_calls)
    stopped = list(stopped)
    if unmeasured > 0:
        return {
            "from_calls": n0,
            "to_calls": n0,
            "why": f"{unmeasured} config(s) of the space were never measured (a sampled search, or XLA's "
            "options tried on the best loop configs only), so the "
            f"measurements decide only the tuned call count {format_calls(n0)}",
        }
    if not stopped or not points:
        return {"from_calls": 0.0, "to_calls": math.inf, "why": "every config of the space was measured"}
    lines = lines_of(points, objective)
    winners = stretches(lines, default_line(lines, default))
    hi, limiting = math.inf, None
    for config, lb in stopped:
        # at least: its compile, and (load unknown, taken as 0) nothing more from a process that loads it
        cross = _chosen_cost_crosses(winners, objective.line(float(lb), 0.0, 0.0)[0])
        if cross >= 0 and float(cross) < hi:
            hi, limiting = float(cross), config
    hi = max(hi, n0)
    if limiting is None:
        why = f"{len(stopped)} stopped config(s) compile too slowly to win at any call count measured"
    else:
        why = (
            f"{len(stopped)} config(s) were stopped before their run time was known (pruned or timed out); "
            f"above {format_calls(hi)} calls one of them could be cheaper"
        )
    return {"from_calls": 0.0, "to_calls": hi, "why": why}
