"""The Pareto front and the crossover intervals: which config the winner rule names at every call count.

:func:`crossover_intervals` asks the rule (`autotune.select._rule`, exact: rational arithmetic on
the given floats, so rounding never decides a near-tie) at N = 0 and then only where its answer
could change (:func:`stretches`). Each point's cost is a piecewise line in N (:class:`_Track`: its
median round cost, and whether its paired rounds outvote the default's, both read off the rule
where they may change); the winner ``w`` holds until its own line or the default's changes, it
stops beating the default, or another point gets below it (below the default, where the default
holds) with enough paired rounds. Those call counts are a few dozen where judging the rule at
every crossing of two round lines would take (points × rounds)² / 2 judgements.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from autotune.program._config import Config
from autotune.select._budget import feasible
from autotune.select._objective import Objective
from autotune.select._point import Point, as_points
from autotune.select._rule import Cost, Line, Piece, default_line, line_at, lines_of, median_cost, winner_line

Bound = Fraction | float
"""A call count, or ``math.inf`` for none."""


def pareto_front(points: Sequence[Point | Mapping[str, Any]]) -> list[Point]:
    """The points no other point beats on both ``compile_cost_s`` and ``run_cost_s``, by compile time.

    Arguments:
        points: :class:`Point` values, or dicts ``{"config", "compile_cost_s", "run_cost_s"[,
            "rounds"]}`` (``at.pareto_front`` is public; a dict is read once, as ``Point.from_json``).

    Returns:
        The non-dominated points, sorted by ``compile_cost_s`` (so ``run_cost_s`` falls
        strictly along the list). Of points with equal seconds only the one whose
        config has the smallest canonical JSON text is kept.

    Example::

        >>> a, b, c = (Config({"l": {"repr": r, "unroll": k}}) for r, k in (("scan", 1), ("scan", 2), ("for", 1)))
        >>> pts = [Point(a, 1.0, 3.0), Point(b, 2.0, 3.5), Point(c, 5.0, 1.0)]  # b: dominated by a
        >>> [str(p.config) for p in pareto_front(pts)]
        ['l=scan×1', 'l=for']
    """
    ordered = sorted(as_points(points), key=lambda p: (p.compile_cost_s, p.run_cost_s, p.config.to_json()))
    front, best_run = [], math.inf
    for p in ordered:
        if p.run_cost_s < best_run:
            front.append(p)
            best_run = p.run_cost_s
    return front


Round = list[tuple[Fraction, Piece]]
"""One round's cost over N, as `Line.pieces` gives it: lines, each from a call count on."""


def _cost(round_: Round, n: Fraction) -> Cost:
    """The round's cost at ``n`` and its slope just above ``n``."""
    a, b = round_[bisect_right(round_, n, key=lambda piece: piece[0]) - 1][1]
    return a + b * n, b


def _changes(rounds: Sequence[Round]) -> list[Fraction]:
    """The call counts where the order of the rounds' costs may change, sorted: 0, where a round
    bends, and where two rounds cross."""
    edges = sorted({start for r in rounds for start, _ in r})
    out = set(edges)
    for lo, hi in zip(edges, [*edges[1:], math.inf]):
        lines = [r[bisect_right(r, lo, key=lambda piece: piece[0]) - 1][1] for r in rounds]
        for i, (a, b) in enumerate(lines):
            for c, d in lines[i + 1 :]:
                if b != d and lo < (x := (c - a) / (b - d)) < hi:
                    out.add(x)
    return sorted(out)


def _steps(xs: Sequence[Fraction], f: Callable[[Fraction], Any]) -> tuple[list[Fraction], list[Any]]:
    """``f`` read at the sorted call counts ``xs``, kept where it changes: ``(starts, values)``."""
    starts: list[Fraction] = []
    values: list[Any] = []
    for x in xs:
        v = f(x)
        if not values or v != values[-1]:
            starts.append(x)
            values.append(v)
    return starts, values


class _Track:
    """One point over N: ``keys[i]``, the line its median round cost (`_rule.median_cost`) follows
    from ``key_at[i]`` on, and ``votes[i]``, whether its paired rounds outvote the default's
    point's (`Line.outvotes`) from ``vote_at[i]`` on. Each is read off the rule at every call
    count where it may change (:func:`_changes`): where a round bends or two of its rounds cross,
    and where a round crosses the default's round of the same index."""

    __slots__ = ("line", "key_at", "keys", "vote_at", "votes")

    def __init__(self, line: Line, dflt: Line | None, theirs: list[Round]):
        self.line = line
        mine = line.pieces()
        self.key_at, self.keys = _steps(_changes(mine), lambda n: line_at(median_cost([_cost(r, n) for r in mine]), n))
        self.vote_at, self.votes = [Fraction(0)], [True]
        if dflt is not None and dflt is not line and line.paired and dflt.paired:
            xs = sorted(set().union(*(_changes(pair) for pair in zip(mine, theirs))))
            self.vote_at, self.votes = _steps(
                xs, lambda n: line.outvotes(dflt, [_cost(r, n) for r in mine], [_cost(r, n) for r in theirs])
            )

    def key(self, n: Bound) -> Piece:
        return self.keys[bisect_right(self.key_at, n) - 1]

    def breaks_after(self, n: Bound) -> Bound:
        """The next call count after ``n`` where the key's line or the vote changes."""
        return min(_after(self.key_at, n), _after(self.vote_at, n))

    def threat(self, bar: Piece, x: Fraction, limit: Bound, tie: bool) -> Bound:
        """The first call count in ``(x, limit)`` where this point outvotes the default and its
        key is below the line ``bar`` (or on it, with ``tie``), else ``limit``."""
        lo: Bound = x
        while lo < limit:
            hi = min(limit, self.breaks_after(lo))
            if self.votes[bisect_right(self.vote_at, lo) - 1]:
                (a, b), (c, d) = self.key(lo), bar
                n = _first_below((a - c, b - d), lo, tie)
                if n is not None and x < n < hi:
                    return n
            lo = hi
        return limit


def _after(starts: list[Fraction], n: Bound) -> Bound:
    i = bisect_right(starts, n)
    return starts[i] if i < len(starts) else math.inf


def _first_below(diff: Piece, lo: Bound, tie: bool) -> Bound | None:
    """The first call count >= ``lo`` just above which the line ``diff`` is below 0 (or is 0 at
    every call count, with ``tie``); None if there is none."""
    a, b = diff
    if b < 0:
        return max(lo, -a / b)
    if b > 0:
        return lo if a + b * lo < 0 else None
    return lo if a < 0 or (a == 0 and tie) else None


def _next_change(tracks: dict[int, _Track], w: Line, dflt: Line | None, x: Fraction) -> Bound:
    """The first call count after ``x`` where the winner may be another than ``w`` (the winner
    just above ``x``): where the line of ``w``'s key or the default's changes, where ``w`` stops
    beating the default, or where another point first would be picked before ``w``."""
    mine = tracks[id(w)]
    guard = None if dflt is None else tracks[id(dflt)]
    limit = min(_after(mine.key_at, x), math.inf if guard is None else _after(guard.key_at, x))
    bar = mine.key(x) if guard is None or w is not dflt else guard.key(x)
    if guard is not None and w is not dflt:
        (a, b), (c, d) = guard.key(x), bar
        leaves = _first_below((a - c, b - d), x, True)  # the default no longer above w
        limit = min(limit, _after(mine.vote_at, x), math.inf if leaves is None or leaves <= x else leaves)
    for t in tracks.values():
        if t.line is not w and t.line is not dflt:
            # where the default holds only a lower key beats it; else the rule's tie-break decides a tie with w
            tie = w is not dflt and (t.line.text, t.line.index) < (w.text, w.index)
            limit = t.threat(bar, x, limit, tie)
    return limit


def stretches(lines: list[Line], dflt: Line | None) -> list[tuple[Fraction, Line]]:
    """The winner over N >= 0: ``[(x, w), ...]``, ``w`` the winner (`autotune.select._rule.winner_line`)
    from ``x`` to the next ``x``, along which its key is one line; the first ``x`` is 0."""
    if not lines:
        return []
    theirs = [] if dflt is None else dflt.pieces()
    tracks = {id(ln): _Track(ln, dflt, theirs) for ln in lines}
    out: list[tuple[Fraction, Line]] = []
    x: Bound = Fraction(0)
    while isinstance(x, Fraction):
        w = winner_line(lines, dflt, x)
        out.append((x, w))
        x = _next_change(tracks, w, dflt, x)
    return out


def crossover_intervals(
    points: Sequence[Point | Mapping[str, Any]],
    compile_weight: float = 1.0,
    runtime_weight: float = 1.0,
    *,
    default: Config | Mapping[str, Any] | None = None,
    processes: int = 1,
    compilation_cache: bool = False,
    tier_up: bool = False,
    max_memory: int | None = None,
) -> list[dict[str, Any]]:
    """The call counts for which each config is the winner: ``[from_calls, to_calls)``.

    Without ``default`` (or without rounds) this is the lower envelope of the lines
    ``cost(N) = compile_weight * compile_cost_s + runtime_weight * N * run_cost_s`` over ``N >= 0``;
    with them, the winner rule (`autotune.select._rule`). Computed exactly, in rational arithmetic
    on the given floats, so near-ties are not decided by rounding.

    Arguments:
        points: :class:`Point` values, or dicts as :meth:`Point.from_json` reads them (this is
            ``at.crossover_intervals``, public; dominated points never win an interval).
        compile_weight, runtime_weight: the objective's weights.
        processes, compilation_cache: the objective's processes and whether later ones load the
            executable from JAX's persistent cache (:meth:`Objective.line`; N is each process's calls).
        default: the default config (a ``Config`` or its dict), whose point the challengers must beat.
        tier_up: with ``default``, charge a config that qualifies for tier-up its tiered cost
            (`autotune.select._tiered`), as a study tuned for ``@at.autotuned(tier_up=True)`` does.
        max_memory: a memory budget in bytes: a point over it wins no interval
            (`autotune.select._budget.feasible`).

    Returns:
        ``[{"config": Config, "from_calls": a, "to_calls": b}, ...]`` ordered by call
        count: the first interval starts at 0, each starts where the previous one
        ends, and the last ends at ``math.inf``. At a crossover N the interval starting
        there belongs to the config that is cheaper just above it. Empty input gives ``[]``.

    Example (compile 10 s / run 1 ms vs compile 1 s / run 10 ms: they cost the same
    at 1000 calls)::

        >>> unrolled, rolled = Config({"l": {"repr": "for"}}), Config({"l": {"repr": "scan"}})
        >>> for it in crossover_intervals([Point(unrolled, 10.0, 1e-3), Point(rolled, 1.0, 1e-2)]):
        ...     print(it["config"], it["from_calls"], it["to_calls"])
        l=scan×1 0.0 1000.0
        l=for 1000.0 inf
    """
    if not points:
        return []
    objective = Objective(
        compile_weight=compile_weight,
        runtime_weight=runtime_weight,
        processes=processes,
        compilation_cache=compilation_cache,
        tier_up=tier_up,
        max_memory=max_memory,
    )
    chosen_default = None if default is None else Config.from_dict(default)
    fitting, chosen_default = feasible(as_points(points), objective.budget_bytes, chosen_default)
    lines = lines_of(fitting, objective, chosen_default)
    out: list[dict[str, Any]] = []
    current = None
    for x, w in stretches(lines, default_line(lines, chosen_default)):
        if w is not current:
            if out:
                out[-1]["to_calls"] = _float_up(x)
            out.append({"config": w.point.config, "from_calls": _float_up(x), "to_calls": math.inf})
            current = w
    return out


def _float_up(x: Fraction) -> float:
    """The smallest float >= x, so that a boundary as a float already belongs to the stretch it starts."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def best_at(intervals: Sequence[Mapping[str, Any]], calls: float) -> Any:
    """The config of the interval that holds ``calls``; None when ``intervals`` is empty."""
    for it in intervals:
        if it["from_calls"] <= calls < it["to_calls"]:
            return it["config"]
    return intervals[-1]["config"] if intervals else None
