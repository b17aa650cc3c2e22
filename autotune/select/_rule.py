"""The winner rule: a point's cost, the winner for a call count and its re-pick for another (see the package docstring).

The crossover intervals, the winner over every call count, are `autotune.select._front`'s."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from autotune.program._config import Config
from autotune.select._budget import feasible
from autotune.select._objective import Objective
from autotune.select._point import Point, point_of
from autotune.select._range import in_range as _in_range
from autotune.select._tiered import TierCase, charged_at, charged_kinks, tiers

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


Piece = tuple[Fraction, Fraction]
"""A line ``(a, b)`` in the call count: cost ``a + b·n``."""
Cost = tuple[Fraction, Fraction]
"""A cost at one call count n and its slope just above n."""


class Line:
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
        self.tier: list[TierCase] | None = None
        if tiers(point, default, objective):
            assert default is not None
            theirs = _rounds(default)
            medians = (default.compile_cost_s, default.run_cost_s)
            pairs = theirs if len(theirs) == len(rounds) else [medians] * len(rounds)
            self.tier = [TierCase.of(objective, default, point, pair) for pair in zip(pairs, rounds)]

    def at(self, n: Fraction) -> list[Cost]:
        """Each round's (cost at n, its slope just above n)."""
        if self.tier is None:
            return [(a + b * n, b) for a, b in self.lines]
        return [charged_at(case, n) for case in self.tier]

    def pieces(self) -> list[list[tuple[Fraction, Piece]]]:
        """Each round's cost as lines ``[(from_n, (a, b)), ...]``: ``a + b·n`` from ``from_n`` on to
        the next one. A plain round is one line from 0; a tiered round bends where
        `autotune.select._tiered.charged_kinks` says, and each of its lines is read off
        :meth:`at` between two bends."""
        if self.tier is None:
            return [[(Fraction(0), line)] for line in self.lines]
        rounds = []
        for case in self.tier:
            edges = [Fraction(0), *charged_kinks(case)]
            probes = [(a + b) / 2 for a, b in zip(edges, edges[1:])] + [edges[-1] + 1]
            rounds.append([(lo, line_at(charged_at(case, n), n)) for lo, n in zip(edges, probes)])
        return rounds

    def key(self, n: Fraction) -> Cost:
        """(median cost at n, its slope just above n) (:func:`median_cost`)."""
        return median_cost(self.at(n))

    def outvotes(self, other: Line, mine: list[Cost], theirs: list[Cost]) -> bool:
        """Whether this point wins enough of its rounds paired with ``other``'s
        (:func:`wins_needed`; True when either has no rounds: nothing to pair). ``mine`` and
        ``theirs``: each one's round costs at one call count (:meth:`at`)."""
        if not (self.paired and other.paired):
            return True
        wins = sum(1 for a, b in zip(mine, theirs) if a < b)
        return wins >= wins_needed(min(len(mine), len(theirs)))


def line_at(cost: Cost, n: Fraction) -> Piece:
    """The line through ``cost`` (a cost at ``n`` and its slope just above ``n``)."""
    value, slope = cost
    return value - slope * n, slope


def median_cost(costs: list[Cost]) -> Cost:
    """The median of round costs ``(cost at n, slope just above n)``: comparing these orders
    points by their cost at n, ties by the cost just above n."""
    keys = sorted(costs)
    m = len(keys)
    if m % 2:
        return keys[m // 2]
    (v1, s1), (v2, s2) = keys[m // 2 - 1], keys[m // 2]
    return (v1 + v2) / 2, (s1 + s2) / 2


def lines_of(points: Sequence[Point], objective: Objective, default: Config | None = None) -> list[Line]:
    """The points' lines; with ``default`` (a config among ``points``) and ``objective.tier_up``,
    the qualifying ones tiered against the default's point."""
    theirs = None if default is None or not objective.tier_up else point_of(points, default)
    return [Line(p, i, objective, theirs) for i, p in enumerate(points)]


def default_line(lines: list[Line], default: Config | None) -> Line | None:
    if default is None:
        return None
    return next((ln for ln in lines if ln.point.config == default), None)


def winner_line(lines: list[Line], dflt: Line | None, n: Fraction) -> Line:
    """THE rule at ``n`` (the package docstring): the cheapest of the points that beat the
    default's, on the median and in enough paired rounds, else the default's; without one, the
    cheapest. Every comparison is of costs at ``n`` and, on a tie, just above it."""
    costs = {id(ln): ln.at(n) for ln in lines}
    keys = {i: median_cost(c) for i, c in costs.items()}

    def order(ln: Line):
        return keys[id(ln)], ln.text, ln.index

    if dflt is None:
        return min(lines, key=order)
    bar, theirs = keys[id(dflt)], costs[id(dflt)]
    beating = [ln for ln in lines if ln is not dflt and keys[id(ln)] < bar and ln.outvotes(dflt, costs[id(ln)], theirs)]
    return min(beating, key=order) if beating else dflt


def cost(point: Point, objective: Objective, default: Point | None = None) -> float:
    """A point's cost under ``objective``: the median of its round costs, or
    ``cw * compile_cost_s + rw * N * run_cost_s`` without rounds (:meth:`Objective.line`, which adds
    the processes after the first: their compile, or with the compilation cache the point's ``load_cost_s``);
    the tiered cost where ``objective.tier_up`` and ``default`` (the default's point) say so
    (`autotune.select._tiered.tiers`)."""
    ln = Line(point, 0, objective, default)
    return float(ln.key(Fraction(objective.expected_calls))[0])


def round_costs(point: Point, objective: Objective, default: Point | None = None) -> list[float]:
    """A point's cost in each of its rounds under ``objective`` (as :func:`cost` charges them, whose
    median it is); one cost for a point without rounds."""
    ln = Line(point, 0, objective, default)
    return [float(v) for v, _ in ln.at(Fraction(objective.expected_calls))]


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
        objective: the call count, weights and memory budget (a point over the budget never
            wins: `autotune.select._budget.feasible`).
        default: the default config; None compares on cost alone (the lower envelope).
    """
    if not points:
        return None
    points, default = feasible(points, objective.budget_bytes, default)
    lines = lines_of(points, objective, default)
    return winner_line(lines, default_line(lines, default), Fraction(objective.expected_calls)).point


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
