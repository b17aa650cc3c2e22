"""The (compile, run) Pareto set and which of its configs wins for how many calls.

Every config costs ``cost(N) = compile_weight * compile_s + runtime_weight * N * run_s``
when the compiled function runs N times: a line in N. The Pareto set holds the
configs no other config beats on both seconds; the configs that are cheapest for
*some* N are those on the lower envelope of these lines, and the envelope's
breakpoints are the call counts where the winner flips (a fully unrolled ``for``
that compiles slowly but runs fast overtakes a ``scan`` once the function runs
often enough).

Only the standard library is needed here: the cache, the decorator, the CLI and
the report all use these functions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any


def _config_text(config: Any) -> str:
    """Canonical JSON of a config (a dict or an ``at.Config``), the deterministic tie-break."""
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def _seconds(point: Mapping[str, Any], name: str, index: int) -> float:
    try:
        value = float(point[name])
    except KeyError:
        raise ValueError(f"pareto point {index} has no {name!r}; each point needs 'config', "
                         "'compile_s' and 'run_s'.") from None
    except (TypeError, ValueError):
        raise ValueError(f"pareto point {index}: {name}={point[name]!r} is not a number.") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"pareto point {index}: {name}={value!r} must be a finite number >= 0.")
    return value


def _weight(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}={value!r} must be a finite number >= 0.")
    return float(value)


def pareto_front(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The points no other point beats on both ``compile_s`` and ``run_s``, by compile time.

    Arguments:
        points: ``{"config": ..., "compile_s": float, "run_s": float, ...}`` items
            (other keys are kept).

    Returns:
        The non-dominated points, sorted by ``compile_s`` (so ``run_s`` falls
        strictly along the list). Of points with equal seconds only the one whose
        config has the smallest canonical JSON text is kept.

    Example::

        >>> pts = [{"config": "a", "compile_s": 1.0, "run_s": 3.0},
        ...        {"config": "b", "compile_s": 2.0, "run_s": 3.5},   # dominated by a
        ...        {"config": "c", "compile_s": 5.0, "run_s": 1.0}]
        >>> [p["config"] for p in pareto_front(pts)]
        ['a', 'c']
    """
    ordered = sorted(points, key=lambda p: (p["compile_s"], p["run_s"], _config_text(p.get("config"))))
    front, best_run = [], math.inf
    for p in ordered:
        if p["run_s"] < best_run:
            front.append(p)
            best_run = p["run_s"]
    return front


def crossover_intervals(pareto: Sequence[Mapping[str, Any]], compile_weight: float = 1.0,
                        runtime_weight: float = 1.0) -> list[dict[str, Any]]:
    """The call counts for which each config is the cheapest: ``[from_calls, to_calls)``.

    The lower envelope of the lines ``cost(N) = compile_weight * compile_s +
    runtime_weight * N * run_s`` over ``N >= 0``, computed exactly (in rational
    arithmetic on the given floats, so near-ties are not decided by rounding).

    Arguments:
        pareto: ``{"config": ..., "compile_s": float, "run_s": float}`` items, usually
            a Pareto set (dominated points are allowed; they never win an interval).
        compile_weight, runtime_weight: the objective's weights.

    Returns:
        ``[{"config": ..., "from_calls": a, "to_calls": b}, ...]`` ordered by call
        count: the first interval starts at 0, each starts where the previous one
        ends, and the last ends at ``math.inf``. At a crossover N both configs cost
        the same; the interval starting there belongs to the config that is cheaper
        for every N above it (the one that runs faster). Configs that are never
        strictly cheapest (on the Pareto set but above the envelope, or duplicates
        of another line) get no interval; among identical lines the config with the
        smallest canonical JSON text wins, as in ``cache.best_for``. Empty input
        gives ``[]``.

    Example (compile 10 s / run 1 ms vs compile 1 s / run 10 ms: they cost the same
    at 1000 calls)::

        >>> crossover_intervals([{"config": "for", "compile_s": 10.0, "run_s": 1e-3},
        ...                      {"config": "scan", "compile_s": 1.0, "run_s": 1e-2}])
        [{'config': 'scan', 'from_calls': 0.0, 'to_calls': 1000.0}, {'config': 'for', 'from_calls': 1000.0, 'to_calls': inf}]
    """
    cw = Fraction(_weight("compile_weight", compile_weight))
    rw = Fraction(_weight("runtime_weight", runtime_weight))
    lines = []
    for i, p in enumerate(pareto):
        c, r = _seconds(p, "compile_s", i), _seconds(p, "run_s", i)
        # intercept, slope, then the deterministic tie-break between identical lines
        lines.append((cw * Fraction(c), rw * Fraction(r), _config_text(p.get("config")), i))
    if not lines:
        return []

    def winner_at(x: Fraction, candidates) -> tuple:
        """The cheapest line at x; of equals, the one cheapest just above x (smallest slope)."""
        return min(candidates, key=lambda ln: (ln[0] + ln[1] * x, ln[1], ln[2], ln[3]))

    out: list[dict[str, Any]] = []
    x = Fraction(0)
    current = winner_at(x, lines)
    while True:
        a0, b0 = current[0], current[1]
        # The next breakpoint: the nearest crossing with a line that falls more slowly.
        steeper = [(ln, (ln[0] - a0) / (b0 - ln[1])) for ln in lines if ln[1] < b0]
        if not steeper:
            out.append({"config": pareto[current[3]]["config"], "from_calls": float(x), "to_calls": math.inf})
            return out
        nxt_x = min(cross for _, cross in steeper)
        nxt = winner_at(nxt_x, [ln for ln, cross in steeper if cross == nxt_x])
        if nxt_x > x:
            out.append({"config": pareto[current[3]]["config"], "from_calls": float(x), "to_calls": float(nxt_x)})
        x, current = nxt_x, nxt


def best_at(intervals: Sequence[Mapping[str, Any]], calls: float) -> Any:
    """The config of the interval that holds ``calls`` (the winner for that call count).

    Arguments:
        intervals: the output of :func:`crossover_intervals`.
        calls: an expected call count >= 0.

    Returns:
        The interval's ``config``, or None when ``intervals`` is empty.
    """
    for it in intervals:
        if it["from_calls"] <= calls < it["to_calls"]:
            return it["config"]
    return intervals[-1]["config"] if intervals else None


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
