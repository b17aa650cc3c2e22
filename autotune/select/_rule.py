"""The winner rule, the re-pick for another call count and the crossover intervals (see the package docstring)."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from autotune.program._config import Config
from autotune.select._objective import Objective
from autotune.select._point import Point
from autotune.select._range import in_range as _in_range
from autotune.select._tiered import charged_at, charged_kinks, compile_slowdown_of, pays, qualifies, slowdown_of

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


def _rounds(point: Point) -> tuple[tuple[float, float], ...]:
    return point.rounds or ((point.compile_cost_s, point.run_cost_s),)


class _Line:
    """One point under one objective: its round lines, as exact fractions; under an objective with
    ``tier_up``, a point whose compile qualifies against ``default`` (the default's point) is charged
    what tier-up costs instead (`autotune.select._tiered.charged_at`: the tiered cost where tiering
    pays, else the up-front compile's; each round against the default's
    round of the same index, or its medians when the rounds do not pair)."""

    __slots__ = ("point", "text", "lines", "paired", "index", "tier")

    def __init__(self, point: Point, index: int, objective: Objective, default: Point | None = None):
        self.point, self.index = point, index
        self.text = point.config.to_json()
        self.paired = bool(point.rounds)
        rounds = _rounds(point)
        self.lines = [objective.line(c, r, point.load_cost_s) for c, r in rounds]
        self.tier = None
        if tiers(point, default, objective):
            assert default is not None
            theirs = _rounds(default)
            medians = (default.compile_cost_s, default.run_cost_s)
            pairs = theirs if len(theirs) == len(rounds) else [medians] * len(rounds)
            self.tier = (objective, list(zip(pairs, rounds)), _tier_figures(default, point))

    def at(self, n: Fraction) -> list[tuple[Fraction, Fraction]]:
        """Each round's (cost at n, its slope just above n)."""
        if self.tier is None:
            return [(a + b * n, b) for a, b in self.lines]
        objective, pairs, figures = self.tier
        return [charged_at(objective, d, w, n, **figures) for d, w in pairs]

    def pieces(self) -> tuple[list[tuple[Fraction, Fraction]], list[Fraction]]:
        """``(lines, kinks)``: lines ``(a, b)`` (cost ``a + b·n``) that hold each round's cost
        piecewise, and the call counts where a tiered round changes slope. A plain point's are
        its round lines and no kinks; a tiered round is a line between two of its kinks."""
        if self.tier is None:
            return list(self.lines), []
        objective, pairs, figures = self.tier
        lines: list[tuple[Fraction, Fraction]] = []
        kinks: set[Fraction] = set()
        for d, w in pairs:
            ks = charged_kinks(objective, d, w, **figures)
            kinks.update(ks)
            edges = [Fraction(0), *ks]
            probes = [(a + b) / 2 for a, b in zip(edges, edges[1:])] + [edges[-1] + 1]
            for n in probes:
                value, slope = charged_at(objective, d, w, n, **figures)
                lines.append((value - slope * n, slope))
        return lines, sorted(kinks)

    def key(self, n: Fraction) -> tuple[Fraction, Fraction]:
        """(median cost at n, its slope just above n): comparing these orders points by
        their cost at n, ties by the cost just above n."""
        keys = sorted(self.at(n))
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
        pairs = list(zip(self.at(n), other.at(n)))
        wins = sum(1 for mine, theirs in pairs if mine < theirs)
        return wins >= wins_needed(len(pairs))


def tiers(point: Point, default: Point | None, objective: Objective) -> bool:
    """Whether ``objective`` charges ``point`` the tiered cost: it has ``tier_up``, the default's
    point is known, ``point`` is another config and its compile qualifies against the default's
    (`autotune.select._tiered.qualifies`, on the median compile costs, as the decorator decides)."""
    return (
        objective.tier_up
        and default is not None
        and point.config != default.config
        and qualifies(default.compile_cost_s, point.compile_cost_s)
    )


def _tier_figures(default: Point, point: Point) -> dict[str, Any]:
    """The tiered cost's ``loads``, ``s`` and ``c`` for ``point`` against the default's point, as
    `autotune.select._tiered` takes them."""
    return {
        "loads": (default.load_cost_s, point.load_cost_s),
        "slowdown": slowdown_of(default),
        "compile_slowdown": compile_slowdown_of(default),
    }


def entry_pays(entry: Any, objective: Objective) -> bool:
    """Whether the decorator tiers a cache entry's winner under ``objective`` (its own, with
    ``tier_up``): the winner is charged the tiered cost (:func:`tiers`: another config than the
    default, whose compile qualifies) and tiering :func:`~autotune.select._tiered.pays` at
    ``objective.expected_calls``, on the stored medians and the default's measured ``slowdown``
    and ``compile_slowdown``."""
    default = entry.default_point
    winner = point_of(entry.points, Config.from_dict(entry.config))
    if winner is None or not tiers(winner, default, objective):
        return False
    assert default is not None
    return pays(
        objective,
        (default.compile_cost_s, default.run_cost_s),
        (winner.compile_cost_s, winner.run_cost_s),
        Fraction(objective.expected_calls),
        **_tier_figures(default, winner),
    )


def _lines(points: Sequence[Point], objective: Objective, default: Config | None = None) -> list[_Line]:
    """The points' lines; with ``default`` (a config among ``points``) and ``objective.tier_up``,
    the qualifying ones tiered against the default's point."""
    theirs = None if default is None or not objective.tier_up else point_of(points, default)
    return [_Line(p, i, objective, theirs) for i, p in enumerate(points)]


def _find_default(lines: list[_Line], default: Config | None) -> _Line | None:
    if default is None:
        return None
    return next((ln for ln in lines if ln.point.config == default), None)


def _winner(lines: list[_Line], dflt: _Line | None, n: Fraction) -> _Line:
    def order(ln: _Line):
        return ln.key(n), ln.text, ln.index

    if dflt is None:
        return min(lines, key=order)
    beating = [ln for ln in lines if ln is not dflt and ln.beats(dflt, n)]
    return min(beating, key=order) if beating else dflt


def cost(point: Point, objective: Objective, default: Point | None = None) -> float:
    """A point's cost under ``objective``: the median of its round costs, or
    ``cw * compile_cost_s + rw * N * run_cost_s`` without rounds (:meth:`Objective.line`, which adds
    the processes after the first: their compile, or with the compilation cache the point's ``load_cost_s``);
    the tiered cost where ``objective.tier_up`` and ``default`` (the default's point) say so (:func:`tiers`)."""
    ln = _Line(point, 0, objective, default)
    return float(ln.key(Fraction(objective.expected_calls))[0])


def tiered_cost_of(point: Point, default: Point | None, objective: Objective) -> float | None:
    """What ``point`` costs under ``objective`` with tier-up (whether or not the objective has
    ``tier_up``), or None when tier-up would not apply to it (no default point, the default itself,
    a compile that does not qualify, or tiering that costs no less than compiling it up front at
    the objective's call count: `autotune.select._tiered.pays`): the tables' "tiered" column and
    ``best --json``'s ``tiered_cost``."""
    goal = objective if objective.tier_up else dataclasses.replace(objective, tier_up=True)
    if not tiers(point, default, goal):
        return None
    charged = cost(point, goal, default)  # the cheaper of tiering and the up-front compile
    return charged if charged < cost(point, dataclasses.replace(goal, tier_up=False)) else None


def ranked(points: Sequence[Point], objective: Objective, default: Config | None = None) -> list[Point]:
    """The points by cost under ``objective``, ties by canonical config JSON: the order of
    every table and of confirmation's "top" (the winner is :func:`winner`'s, not the first).
    With ``default`` and ``objective.tier_up``, qualifying points by their tiered cost."""
    theirs = None if default is None or not objective.tier_up else point_of(points, default)
    return sorted(points, key=lambda p: (cost(p, objective, theirs), p.config.to_json()))


def winner(points: Sequence[Point], objective: Objective, default: Config | None = None) -> Point | None:
    """The point the rule above names for ``objective``; None for no points.

    Arguments:
        points: confirmed points (the default's among them when ``default`` is given).
        objective: the call count and weights.
        default: the default config; None compares on cost alone (the lower envelope).
    """
    if not points:
        return None
    lines = _lines(points, objective, default)
    return _winner(lines, _find_default(lines, default), Fraction(objective.expected_calls)).point


def beats(challenger: Point, holder: Point, objective: Objective) -> bool:
    """Whether ``challenger`` replaces ``holder`` under the rule above, ``holder`` standing
    where the default stands (the default itself, or a study's earlier winner, or a stored
    entry's config): a lower median and enough paired rounds."""
    picked = winner([holder, challenger], objective, holder.config)
    return picked.config == challenger.config != holder.config


@dataclass(frozen=True)
class Choice:
    """What :func:`choose` picked for one objective.

    Attributes:
        config: the chosen config.
        cost: its cost (median of its round costs) under the objective.
        compile_cost_s, run_cost_s: its median charged seconds (see :class:`Point`).
        expected_calls: the call count it was chosen for.
        in_range: whether that call count lies in the range where the measurements are
            complete (:func:`complete_range`); outside it a config nobody measured could be cheaper.
    """

    config: Config
    cost: float
    compile_cost_s: float
    run_cost_s: float
    expected_calls: float
    in_range: bool = True


def choose(
    points: Sequence[Point],
    objective: Objective,
    *,
    default: Config | None = None,
    complete: Mapping[str, Any] | None = None,
) -> Choice | None:
    """The winner for ``objective`` with its cost and whether the call count is covered.

    ``complete`` is a range as :func:`complete_range` returns it (None: unknown, taken as covered).
    """
    best = winner(points, objective, default)
    if best is None:
        return None
    return Choice(
        config=best.config,
        cost=cost(best, objective, None if default is None else point_of(points, default)),
        compile_cost_s=best.compile_cost_s,
        run_cost_s=best.run_cost_s,
        expected_calls=float(objective.expected_calls),
        in_range=_in_range(complete, objective.expected_calls),
    )


def point_of(points: Sequence[Point], config: Config) -> Point | None:
    """The point of ``config``, or of its program (a point listing ``config`` in ``equivalent``
    lowered to the same program), or None."""
    return next((p for p in points if p.config == config), None) or next((p for p in points if p.holds(config)), None)


def as_points(points: Sequence[Point | Mapping[str, Any]]) -> list[Point]:
    """Points from a public caller: :class:`Point` values, or dicts (``Point.from_json``) read once."""
    return [Point.from_json(p) for p in points]


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


def _breakpoints(lines: list[_Line]) -> list[Fraction]:
    """Every call count > 0 where two round lines (or a median of two) cross, and where a tiered
    round changes slope (:meth:`_Line.pieces`): the winner can change only there."""
    all_lines = set()
    xs = {Fraction(0)}
    for ln in lines:
        ls, kinks = ln.pieces()
        all_lines.update(ls)
        xs.update(k for k in kinks if k > 0)
        if len(ln.lines) % 2 == 0:  # an even count's median follows the mean of two lines
            all_lines.update(((a + c) / 2, (b + d) / 2) for i, (a, b) in enumerate(ls) for (c, d) in ls[i + 1 :])
    ordered = sorted(all_lines)
    for i, (a, b) in enumerate(ordered):
        for c, d in ordered[i + 1 :]:
            if b != d:
                x = (c - a) / (b - d)
                if x > 0:
                    xs.add(x)
    return sorted(xs)


def crossover_intervals(
    points: Sequence[Point | Mapping[str, Any]],
    compile_weight: float = 1.0,
    runtime_weight: float = 1.0,
    *,
    default: Config | Mapping[str, Any] | None = None,
    processes: int = 1,
    compilation_cache: bool = False,
    tier_up: bool = False,
) -> list[dict[str, Any]]:
    """The call counts for which each config is the winner: ``[from_calls, to_calls)``.

    Without ``default`` (or without rounds) this is the lower envelope of the lines
    ``cost(N) = compile_weight * compile_cost_s + runtime_weight * N * run_cost_s`` over ``N >= 0``;
    with them, the winner rule of this module. Computed exactly, in rational arithmetic
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
    )
    chosen_default = None if default is None else Config.from_dict(default)
    lines = _lines(as_points(points), objective, chosen_default)
    dflt = _find_default(lines, chosen_default)
    breaks = _breakpoints(lines)
    # The winner is constant between breakpoints: judge each stretch at its midpoint, in
    # floats (fast); then check every resulting stretch exactly and redo it all exactly if
    # floats were fooled by a near-tie. Tiered costs are judged exactly only.
    tiered = any(ln.tier is not None for ln in lines)
    for exact in (True,) if tiered else (False, True):
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
                        "config": w.point.config,
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
