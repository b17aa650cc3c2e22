"""The winner rule, the re-pick for another call count and the crossover intervals (see the package docstring)."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ._range import in_range as _in_range

SIGN_TEST_LEVEL = Fraction(1, 8)
"""How often a challenger no better than the default may, by chance alone, win the paired
rounds it needs (a one-sided sign test): see :func:`wins_needed`."""


@functools.cache
def wins_needed(n: int) -> int:
    """How many of ``n`` paired rounds a challenger must win to replace the default: the fewest
    that a coin (a challenger exactly as good) reaches with probability at most
    :data:`SIGN_TEST_LEVEL`, or all ``n`` when even that is likelier (n <= 2).

    Example::

        >>> [wins_needed(n) for n in range(1, 10)]
        [1, 2, 3, 4, 5, 5, 6, 7, 7]
    """
    if n <= 0:
        return 1  # no paired round: nothing to win
    tail = 0
    for w in range(n, 0, -1):
        tail += math.comb(n, w)
        if Fraction(tail, 2**n) > SIGN_TEST_LEVEL:
            return min(n, w + 1)
    return n


def config_text(config: Any) -> str:
    """Canonical JSON of a config (a dict or an ``at.Config``): the deterministic tie-break."""
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def _weight(name: str, value: Any) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}={value!r} must be a finite number >= 0.")
    return Fraction(value)


def _seconds(point: Mapping[str, Any], name: str, index: int) -> float:
    try:
        value = float(point[name])
    except KeyError:
        raise ValueError(
            f"point {index} has no {name!r}; each point needs 'config', 'compile_s' and 'run_s'."
        ) from None
    except (TypeError, ValueError):
        raise ValueError(f"point {index}: {name}={point[name]!r} is not a number.") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"point {index}: {name}={value!r} must be a finite number >= 0.")
    return value


def _rounds(point: Mapping[str, Any], index: int) -> list[tuple[float, float]] | None:
    rounds = point.get("rounds")
    if not rounds:
        return None
    out = []
    for r in rounds:
        try:
            c, s = float(r[0]), float(r[1])
        except (TypeError, ValueError, IndexError, KeyError):
            raise ValueError(f"point {index}: round {r!r} is not a [compile_s, run_s] pair.") from None
        if not (math.isfinite(c) and math.isfinite(s)) or c < 0 or s < 0:
            raise ValueError(f"point {index}: round {r!r} must hold finite seconds >= 0.")
        out.append((c, s))
    return out


class _Line:
    """One point under one objective: its round lines, as exact fractions."""

    __slots__ = ("point", "text", "lines", "paired", "index")

    def __init__(self, point: Mapping[str, Any], index: int, cw: Fraction, rw: Fraction):
        self.point, self.index = point, index
        self.text = config_text(point.get("config"))
        rounds = _rounds(point, index)
        self.paired = rounds is not None
        if rounds is None:
            rounds = [(_seconds(point, "compile_s", index), _seconds(point, "run_s", index))]
        self.lines = [(cw * Fraction(c), rw * Fraction(r)) for c, r in rounds]

    def key(self, n: Fraction) -> tuple[Fraction, Fraction]:
        """(median cost at n, its slope just above n): comparing these orders points by
        their cost at n, ties by the cost just above n."""
        keys = sorted((a + b * n, b) for a, b in self.lines)
        m = len(keys)
        if m % 2:
            return keys[m // 2]
        (v1, s1), (v2, s2) = keys[m // 2 - 1], keys[m // 2]
        return (v1 + v2) / 2, (s1 + s2) / 2

    def beats(self, other: _Line, n: Fraction) -> bool:
        if not self.key(n) < other.key(n):
            return False
        if not (self.paired and other.paired):
            return True
        pairs = list(zip(self.lines, other.lines))
        wins = sum(1 for (a, b), (c, d) in pairs if (a + b * n, b) < (c + d * n, d))
        return wins >= wins_needed(len(pairs))


def _lines(points: Sequence[Mapping[str, Any]], compile_weight: float, runtime_weight: float) -> list[_Line]:
    cw, rw = _weight("compile_weight", compile_weight), _weight("runtime_weight", runtime_weight)
    return [_Line(p, i, cw, rw) for i, p in enumerate(points)]


def _find_default(lines: list[_Line], default: Any) -> _Line | None:
    if default is None:
        return None
    text = config_text(default)
    return next((ln for ln in lines if ln.text == text), None)


def _winner(lines: list[_Line], dflt: _Line | None, n: Fraction) -> _Line:
    def order(ln: _Line):
        return ln.key(n), ln.text, ln.index

    if dflt is None:
        return min(lines, key=order)
    beating = [ln for ln in lines if ln is not dflt and ln.beats(dflt, n)]
    return min(beating, key=order) if beating else dflt


def _calls(calls: Any) -> Fraction:
    if isinstance(calls, bool) or not isinstance(calls, (int, float)) or math.isnan(calls) or calls < 0:
        raise ValueError(f"expected_calls={calls!r} must be a number >= 0.")
    return Fraction(calls) if math.isfinite(calls) else Fraction(10**30)


def cost(point: Mapping[str, Any], objective: Any) -> float:
    """A point's cost under ``objective`` (an ``at.Objective`` or a dict of its fields):
    the median of its round costs, or ``cw * compile_s + rw * N * run_s`` without rounds."""
    n, cw, rw = _objective(objective)
    (ln,) = _lines([point], cw, rw)
    return float(ln.key(_calls(n))[0])


def winner(points: Sequence[Mapping[str, Any]], objective: Any, default: Any = None) -> dict[str, Any] | None:
    """The point the rule above names for ``objective``; None for no points.

    Arguments:
        points: confirmed points (the default's among them when ``default`` is given).
        objective: an ``at.Objective``, or a dict with ``expected_calls``,
            ``compile_weight`` and ``runtime_weight``.
        default: the default config; None compares on cost alone (the lower envelope).
    """
    if not points:
        return None
    n, cw, rw = _objective(objective)
    lines = _lines(points, cw, rw)
    return dict(_winner(lines, _find_default(lines, default), _calls(n)).point)


def beats(challenger: Mapping[str, Any], holder: Mapping[str, Any], objective: Any) -> bool:
    """Whether ``challenger`` replaces ``holder`` under the rule above, ``holder`` standing
    where the default stands (the default itself, or a study's earlier winner, or a stored
    entry's config): a lower median and enough paired rounds."""
    picked = winner([holder, challenger], objective, holder["config"])
    return config_text(picked["config"]) == config_text(challenger["config"]) != config_text(holder["config"])


@dataclass(frozen=True)
class Choice:
    """What :func:`choose` picked for one objective.

    Attributes:
        config: the chosen config (a dict).
        cost: its cost (median of its round costs) under the objective.
        compile_s, run_s: its median seconds.
        expected_calls: the call count it was chosen for.
        in_range: whether that call count lies in the range where the measurements are
            complete (:func:`complete_range`); outside it a config nobody measured could be cheaper.
    """

    config: dict[str, Any]
    cost: float
    compile_s: float
    run_s: float
    expected_calls: float
    in_range: bool = True


def choose(
    points: Sequence[Mapping[str, Any]],
    objective: Any,
    *,
    default: Any = None,
    complete: Mapping[str, Any] | None = None,
) -> Choice | None:
    """The winner for ``objective`` with its cost and whether the call count is covered.

    ``complete`` is a range as :func:`complete_range` returns it (None: unknown, taken as covered).
    """
    best = winner(points, objective, default)
    if best is None:
        return None
    n = _objective(objective)[0]
    return Choice(
        config=dict(best["config"]),
        cost=cost(best, objective),
        compile_s=float(best["compile_s"]),
        run_s=float(best["run_s"]),
        expected_calls=float(n),
        in_range=_in_range(complete, n),
    )


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
    ordered = sorted(points, key=lambda p: (p["compile_s"], p["run_s"], config_text(p.get("config"))))
    front, best_run = [], math.inf
    for p in ordered:
        if p["run_s"] < best_run:
            front.append(p)
            best_run = p["run_s"]
    return front


def _breakpoints(lines: list[_Line]) -> list[Fraction]:
    """Every call count > 0 where two round lines (or a median of two) cross: the winner
    can change only there."""
    all_lines = set()
    for ln in lines:
        all_lines.update(ln.lines)
        if len(ln.lines) % 2 == 0:  # an even count's median follows the mean of two lines
            ls = ln.lines
            all_lines.update(((a + c) / 2, (b + d) / 2) for i, (a, b) in enumerate(ls) for (c, d) in ls[i + 1 :])
    ordered = sorted(all_lines)
    xs = {Fraction(0)}
    for i, (a, b) in enumerate(ordered):
        for c, d in ordered[i + 1 :]:
            if b != d:
                x = (c - a) / (b - d)
                if x > 0:
                    xs.add(x)
    return sorted(xs)


def crossover_intervals(
    points: Sequence[Mapping[str, Any]],
    compile_weight: float = 1.0,
    runtime_weight: float = 1.0,
    *,
    default: Any = None,
) -> list[dict[str, Any]]:
    """The call counts for which each config is the winner: ``[from_calls, to_calls)``.

    Without ``default`` (or without rounds) this is the lower envelope of the lines
    ``cost(N) = compile_weight * compile_s + runtime_weight * N * run_s`` over ``N >= 0``;
    with them, the winner rule of this module. Computed exactly, in rational arithmetic
    on the given floats, so near-ties are not decided by rounding.

    Arguments:
        points: ``{"config": ..., "compile_s": float, "run_s": float[, "rounds": [...]]}``
            items (dominated points are allowed; they never win an interval).
        compile_weight, runtime_weight: the objective's weights.
        default: the default config, whose point the challengers must beat.

    Returns:
        ``[{"config": ..., "from_calls": a, "to_calls": b}, ...]`` ordered by call
        count: the first interval starts at 0, each starts where the previous one
        ends, and the last ends at ``math.inf``. At a crossover N the interval starting
        there belongs to the config that is cheaper just above it. Empty input gives ``[]``.

    Example (compile 10 s / run 1 ms vs compile 1 s / run 10 ms: they cost the same
    at 1000 calls)::

        >>> for interval in crossover_intervals([{"config": "for", "compile_s": 10.0, "run_s": 1e-3},
        ...                                      {"config": "scan", "compile_s": 1.0, "run_s": 1e-2}]):
        ...     print(interval)
        {'config': 'scan', 'from_calls': 0.0, 'to_calls': 1000.0}
        {'config': 'for', 'from_calls': 1000.0, 'to_calls': inf}
    """
    if not points:
        return []
    lines = _lines(points, compile_weight, runtime_weight)
    dflt = _find_default(lines, default)
    breaks = _breakpoints(lines)
    # The winner is constant between breakpoints: judge each stretch at its midpoint, in
    # floats (fast); then check every resulting stretch exactly and redo it all exactly if
    # floats were fooled by a near-tie.
    for exact in (False, True):
        out: list[dict[str, Any]] = []
        current = None
        for i, x in enumerate(breaks):
            probe = (x + breaks[i + 1]) / 2 if i + 1 < len(breaks) else (x * 2 if x else Fraction(1))
            w = _winner(lines, dflt, probe) if exact else _float_winner(lines, dflt, float(probe))
            if current is None or w is not current:
                if out:
                    out[-1]["to_calls"] = _float_up(x)
                out.append(
                    {
                        "config": w.point["config"],
                        "from_calls": _float_up(x),
                        "to_calls": math.inf,
                        "_line": w,
                        "_from": x,
                    }
                )
                current = w
        if exact or all(_winner(lines, dflt, _probe_of(it, out)) is it["_line"] for it in out):
            break
    for it in out:
        del it["_line"], it["_from"]
    return out


def _float_up(x: Fraction) -> float:
    """The smallest float >= x, so that a boundary as a float already belongs to the stretch it starts."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def _probe_of(it: dict[str, Any], out: list[dict[str, Any]]) -> Fraction:
    i = out.index(it)
    x = it["_from"]
    if i + 1 < len(out):
        return (x + out[i + 1]["_from"]) / 2
    return x * 2 if x else Fraction(1)


def _float_winner(lines: list[_Line], dflt: _Line | None, n: float) -> _Line:
    def key(ln: _Line) -> float:
        costs = sorted(float(a) + float(b) * n for a, b in ln.lines)
        m = len(costs)
        return costs[m // 2] if m % 2 else (costs[m // 2 - 1] + costs[m // 2]) / 2

    keys = {id(ln): key(ln) for ln in lines}

    def beats(p: _Line, d: _Line) -> bool:
        if not keys[id(p)] < keys[id(d)]:
            return False
        if not (p.paired and d.paired):
            return True
        pairs = list(zip(p.lines, d.lines))
        wins = sum(1 for (a, b), (c, e) in pairs if float(a) + float(b) * n < float(c) + float(e) * n)
        return wins >= wins_needed(len(pairs))

    def order(ln: _Line):
        return keys[id(ln)], ln.text, ln.index

    if dflt is None:
        return min(lines, key=order)
    beating = [ln for ln in lines if ln is not dflt and beats(ln, dflt)]
    return min(beating, key=order) if beating else dflt


def best_at(intervals: Sequence[Mapping[str, Any]], calls: float) -> Any:
    """The config of the interval that holds ``calls``; None when ``intervals`` is empty."""
    for it in intervals:
        if it["from_calls"] <= calls < it["to_calls"]:
            return it["config"]
    return intervals[-1]["config"] if intervals else None


def _objective(objective: Any) -> tuple[float, float, float]:
    if isinstance(objective, Mapping):
        get = objective.get
    else:

        def get(name, default=None):
            return getattr(objective, name, default)

    return (float(get("expected_calls", 1000)), float(get("compile_weight", 1.0)), float(get("runtime_weight", 1.0)))
