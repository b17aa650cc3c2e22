"""Tier-up's cost: the default serves at once while the winner compiles beside it.

With ``@at.autotuned(tier_up=True)`` a call signature whose tuned winner compiles much slower
than the default (:func:`qualifies`) is served by the default's executable from its first call,
while the winner compiles on a background thread; the winner takes over at the first call after
it is built (`autotune.jit._tier`). The winner's compile is then not a stall: the program pays
what the compile costs the calls that run beside it.

The tiered cost of N calls (one process), :func:`tiered_cost`::

    ready = c·C_w                           the winner is ready c·C_w after the default's first call
                                            can run: no credit for the two compiles overlapping
    k     = min(N, ready / (s·r_d))         calls the default serves while the winner compiles
    wait  = max(0, ready − N·s·r_d)         the rest of the compile, waited for at exit when the
                                            N calls end before the winner is ready
    cost  = cw·(C_d + wait) + rw·(k·s·r_d + (N − k)·r_w)

``C_d``, ``C_w`` are the compile costs (trace + lower + compile) of the default and the winner,
``r_d``, ``r_w`` their run costs per call, ``s >= 1`` the slowdown of the default's calls while a
compile runs beside them and ``c >= 1`` how many times longer a compile takes beside those calls
than alone (both measured by the study on the default's executable, `autotune.study._slowdown`,
and kept on the default's point; on the CPU the compile and the calls share the cores, beside an
accelerator the compile has the host's spare cores and the calls may not feel it). On the 2-core
CPU the written-out loop of `studies/tier_sampler.py` built 1.6× longer beside the default's
calls than alone: told 5,000 calls, the model without ``c`` tiered it and the process ran 4% slower
than not tiering (docs/results/tier-up.md). The compile
thread keeps its normal priority: at the lowest, a program whose calls keep every core busy
starves it, and the faster winner arrives later.

Why no overlap: the background compile starts with the default's, and where a core is spare the
winner is ready ``C_w − C_d`` after the default's first call. On a host without one (2 cores,
docs/results/tier-up.md) the two compiles and the Python that traces them share the cores: at
1,000 calls of ``demo_unroll`` tier-up cost 0.067 s more than compiling the winner up front,
where crediting the overlap predicted 0.003 s less and this form predicts 0.073 s more. The
model errs towards compiling up front, which is what a program gets when tier-up does not pay.

So tiering pays only when the calls the default serves are worth more than its compile: the
tiered cost beats the winner compiled up front (``cw·C_w + rw·N·r_w``) by ``rw·k·r_w − cw·C_d``
once the winner is in. :func:`pays` says where; the decorator tiers a signature only there
(`autotune.jit._tier`, through :func:`entry_pays`), and the winner rule charges a point that
qualifies (:func:`tiers`) the cheaper of the two (`autotune.select._rule`, :func:`charged_at`).
When N calls finish before the winner is ready (``k = N``) the process
waits at exit for the compile under way (`autotune.jit._tier`: on CPython a daemon thread still
inside XLA when the interpreter finalizes aborts the process), so a short run pays the default's
compile and the winner's: there tier-up never pays, and the winner compiles up front.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

from autotune.program._config import Config
from autotune.select._budget import fits
from autotune.select._point import Point, point_of

__all__ = [
    "DEFAULT_COMPILE_SLOWDOWN",
    "DEFAULT_SLOWDOWN",
    "MIN_RATIO",
    "MIN_SECONDS",
    "TierCase",
    "TierFigures",
    "charged_at",
    "charged_kinks",
    "compile_slowdown_of",
    "entry_pays",
    "pays",
    "qualifies",
    "slowdown_of",
    "tiered_at",
    "tiered_cost",
    "tiered_figures",
    "tiered_kinks",
    "tiers",
]

MIN_RATIO = 2.0
"""A winner qualifies for tier-up when its compile costs at least this many times the default's..."""
MIN_SECONDS = 0.05
"""...and at least this many seconds more: below it a background thread costs more than it saves."""
DEFAULT_SLOWDOWN = 1.6
"""``s`` where none was measured (a study tuned for tier-up measures it: `autotune.study._slowdown`):
the slowdown of the default's calls beside a compile when the two share the CPU's cores, as
measured on a 2-core host (docs/results/tier-up.md). Pessimistic where the calls run on an
accelerator and the compile on spare host cores: an entry tuned before the study measured it."""


DEFAULT_COMPILE_SLOWDOWN = 1.0
"""``c`` where none was measured (an entry tuned before the study measured it): the winner's compile
taken at its length alone, as the model did before; re-tuning measures it. Measured, it is 1.6 for
`studies/tier_sampler.py`'s written-out loop beside the default's calls on a 2-core host
(docs/results/tier-up.md), and near 1 beside an accelerator, whose calls leave the host's cores to
the compile."""


def compile_slowdown_of(default: Any) -> float:
    """The ``c`` to charge against the default's point ``default``: its measured
    ``compile_slowdown`` (`autotune.study._slowdown`), else :data:`DEFAULT_COMPILE_SLOWDOWN`."""
    c = getattr(default, "compile_slowdown", None)
    return DEFAULT_COMPILE_SLOWDOWN if c is None else float(c)


def slowdown_of(default: Any) -> float:
    """The ``s`` to charge against the default's point ``default``: its measured ``slowdown``
    (`autotune.study._slowdown`), else :data:`DEFAULT_SLOWDOWN`."""
    s = getattr(default, "slowdown", None)
    return DEFAULT_SLOWDOWN if s is None else float(s)


def qualifies(default_compile_s: float, winner_compile_s: float) -> bool:
    """Whether a winner compiling in ``winner_compile_s`` is worth compiling in the background
    while the default (``default_compile_s``) serves: ``C_w >= MIN_RATIO·C_d`` and
    ``C_w − C_d >= MIN_SECONDS``."""
    return winner_compile_s >= MIN_RATIO * default_compile_s and winner_compile_s - default_compile_s >= MIN_SECONDS


@dataclass(frozen=True)
class TierFigures:
    """One tiered run of N calls: ``cost`` (:func:`tiered_cost`), ``served_by_default`` (k), and
    ``ready_s``, when the winner takes over, counted from the default's first call."""

    cost: float
    served_by_default: float
    ready_s: float

    def to_json(self) -> dict[str, float]:
        return {"tiered_cost": self.cost, "served_by_default": self.served_by_default, "ready_s": self.ready_s}


def tiered_figures(
    default_compile_s: float,
    default_run_s: float,
    winner_compile_s: float,
    winner_run_s: float,
    calls: float,
    *,
    slowdown: float = DEFAULT_SLOWDOWN,
    compile_slowdown: float = 1.0,
    compile_weight: float = 1.0,
    runtime_weight: float = 1.0,
) -> TierFigures:
    """The tiered cost of ``calls`` calls and its parts (the module's formula)."""
    for name, value in (
        ("default_compile_s", default_compile_s),
        ("default_run_s", default_run_s),
        ("winner_compile_s", winner_compile_s),
        ("winner_run_s", winner_run_s),
        ("calls", calls),
    ):
        if not value >= 0:
            raise ValueError(f"tiered_cost: {name}={value!r} must be >= 0.")
    if not slowdown >= 1:
        raise ValueError(f"tiered_cost: slowdown={slowdown!r} must be >= 1 (a compile beside never speeds calls up).")
    if not compile_slowdown >= 1:
        raise ValueError(
            f"tiered_cost: compile_slowdown={compile_slowdown!r} must be >= 1 (calls beside never speed a compile up)."
        )
    ready = compile_slowdown * winner_compile_s
    per_call = slowdown * default_run_s
    if calls == 0:
        k = 0.0
    elif per_call <= 0:
        k = float(calls) if ready > 0 else 0.0
    else:
        k = min(float(calls), ready / per_call)
    wait = max(0.0, ready - calls * per_call)  # the rest of the compile, waited for at exit
    cost = compile_weight * (default_compile_s + wait) + runtime_weight * (k * per_call + (calls - k) * winner_run_s)
    return TierFigures(cost=cost, served_by_default=k, ready_s=ready)


def tiered_cost(
    default_compile_s: float,
    default_run_s: float,
    winner_compile_s: float,
    winner_run_s: float,
    calls: float,
    **options: Any,
) -> float:
    """``cw·(C_d + wait) + rw·(k·s·r_d + (N − k)·r_w)``, ``k = min(N, ready / (s·r_d))``: what N
    calls cost with the default serving until the winner, compiled beside it, is ready (``wait``:
    the rest of the compile at exit when the calls end first; the module docstring).

    Example::

        >>> round(tiered_cost(0.1, 0.01, 2.1, 0.001, calls=1000, slowdown=1.0), 6)  # k = 210 calls
        2.99
    """
    return tiered_figures(default_compile_s, default_run_s, winner_compile_s, winner_run_s, calls, **options).cost


@dataclass(frozen=True)
class TierCase:
    """One winner against the default under one objective: what :func:`tiered_at`, :func:`pays`
    and :func:`charged_at` decide on.

    Attributes:
        objective: an :class:`~autotune.select._objective.Objective` (weights, processes, cache).
        default, winner: ``(compile_cost_s, run_cost_s)`` of the default and of the winner (their
            medians, or one round of each).
        loads: their ``load_cost_s`` (None: unknown), a later process's compile when the objective
            has JAX's compilation cache on (:meth:`Objective.line`).
        slowdown, compile_slowdown: ``s`` and ``c`` (the module docstring).
    """

    objective: Any
    default: tuple[float, float]
    winner: tuple[float, float]
    loads: tuple[float | None, float | None] = (None, None)
    slowdown: float = DEFAULT_SLOWDOWN
    compile_slowdown: float = DEFAULT_COMPILE_SLOWDOWN

    @classmethod
    def of(cls, objective: Any, default: Point, point: Point, pair: Any = None) -> TierCase:
        """``point`` against the default's point ``default``: their medians, or ``pair`` (a round of
        the default's and one of the point's); each one's load, and the ``s`` and ``c`` measured on
        the default's point (:func:`slowdown_of`, :func:`compile_slowdown_of`)."""
        d, w = pair or ((default.compile_cost_s, default.run_cost_s), (point.compile_cost_s, point.run_cost_s))
        loads = (default.load_cost_s, point.load_cost_s)
        return cls(objective, d, w, loads, slowdown_of(default), compile_slowdown_of(default))

    @functools.cached_property
    def exact(self) -> _Exact:
        """The case in fractions, converted once (the rule reads a case at many call counts)."""
        o = self.objective
        c_d, c_w = Fraction(self.default[0]), Fraction(self.winner[0])
        compiles = [(c_d, c_w, 1)]
        if o.processes > 1:  # every later process loads both from JAX's cache, or compiles again
            cached = o.compilation_cache and None not in self.loads
            again = (Fraction(self.loads[0]), Fraction(self.loads[1])) if cached else (c_d, c_w)
            compiles.append((*again, o.processes - 1))
        return _Exact(
            cw=Fraction(o.compile_weight),
            rw=Fraction(o.runtime_weight),
            per=Fraction(self.slowdown) * Fraction(self.default[1]),
            c=Fraction(self.compile_slowdown),
            r_w=Fraction(self.winner[1]),
            compiles=compiles,
            up_front=o.line(self.winner[0], self.winner[1], self.loads[1]),
        )


class _Exact(NamedTuple):
    """A :class:`TierCase` in fractions: the weights, ``s·r_d`` (``per``), ``c``, the winner's run
    cost, ``(default's compile, winner's compile, how many processes pay them)`` (the first
    process compiles both; a later one loads them from JAX's cache when the objective has it on
    and both loads are known, else compiles again: :meth:`Objective.line`), and the winner
    compiled up front as a line ``(a, b)`` in N."""

    cw: Fraction
    rw: Fraction
    per: Fraction
    c: Fraction
    r_w: Fraction
    compiles: list[tuple[Fraction, Fraction, int]]
    up_front: tuple[Fraction, Fraction]


def tiers(point: Point, default: Point | None, objective: Any) -> bool:
    """Whether ``objective`` charges ``point`` the tiered cost: it has ``tier_up``, the default's
    point is known and fits the objective's memory budget (it serves while the winner compiles:
    `autotune.select._budget.fits`), ``point`` is another config and its compile :func:`qualifies`
    against the default's (on the median compile costs, as the decorator decides)."""
    return (
        objective.tier_up
        and default is not None
        and fits(default, getattr(objective, "budget_bytes", None))
        and point.config != default.config
        and qualifies(default.compile_cost_s, point.compile_cost_s)
    )


def entry_pays(entry: Any, objective: Any) -> bool:
    """Whether the decorator tiers a cache entry's winner under ``objective`` (its own, with
    ``tier_up``): the winner is charged the tiered cost (:func:`tiers`: another config than the
    default, whose compile qualifies) and tiering :func:`pays` at ``objective.expected_calls``, on
    the stored medians and the default's measured ``slowdown`` and ``compile_slowdown``."""
    default = entry.default_point
    winner = point_of(entry.points, Config.from_dict(entry.config))
    if winner is None or not tiers(winner, default, objective):
        return False
    assert default is not None
    return pays(TierCase.of(objective, default, winner), Fraction(objective.expected_calls))


def _one_process(c_d: Fraction, c_w: Fraction, n: Fraction, e: _Exact) -> tuple[Fraction, Fraction]:
    """(tiered cost of one process's ``n`` calls, its slope just above ``n``), exactly: ``c_d``
    and ``c_w`` the compiles of the default and of the winner in that process."""
    ready = e.c * c_w
    if ready > 0 and (e.per == 0 or n < ready / e.per):  # the default still serves just above n,
        # and a process ending at n waits at exit for the rest of the compile
        return e.cw * (c_d + ready - n * e.per) + e.rw * n * e.per, (e.rw - e.cw) * e.per
    k = ready / e.per if e.per > 0 else Fraction(0)
    return e.cw * c_d + e.rw * (ready + (n - k) * e.r_w), e.rw * e.r_w


def tiered_kinks(case: TierCase) -> list[Fraction]:
    """The call counts where :func:`tiered_at`'s cost changes slope (the winner takes over from the
    default: ``ready / (s·r_d)``, for the first process and for the later ones), exactly, sorted;
    between two of them the tiered cost is a line in N."""
    e = case.exact
    return sorted({e.c * c_w / e.per for _, c_w, _ in e.compiles if c_w > 0 and e.per > 0})


def tiered_at(case: TierCase, n: Fraction) -> tuple[Fraction, Fraction]:
    """THE tiered cost under an :class:`~autotune.select._objective.Objective`, as the winner rule
    takes it: ``(cost at n calls per process, its slope just above n)``, in exact arithmetic.

    The first process pays the module's formula, every later one (``objective.processes``) the
    same with each config's load (``case.loads``) for its compile when the objective has JAX's
    compilation cache on and the load is known, else its compile again (:meth:`Objective.line`).

    Example::

        >>> from autotune.select._objective import Objective
        >>> case = TierCase(Objective(), (0.1, 0.01), (2.1, 0.001), slowdown=1.0)
        >>> [float(x) for x in tiered_at(case, Fraction(1000))]
        [2.99, 0.001]
    """
    value, slope = Fraction(0), Fraction(0)
    for c_d, c_w, times in case.exact.compiles:
        v, sl = _one_process(c_d, c_w, n, case.exact)
        value, slope = value + times * v, slope + times * sl
    return value, slope


def _costs(case: TierCase, n: Fraction) -> tuple[tuple[Fraction, Fraction], tuple[Fraction, Fraction], bool]:
    """``(tiered, up front, tiered is cheaper)`` at ``n``, each ``(cost, slope just above n)``:
    the comparison :func:`pays` and :func:`charged_at` share (a tie compiles up front)."""
    a, b = case.exact.up_front
    tiered = tiered_at(case, n)
    up_front = (a + b * n, b)
    return tiered, up_front, tiered[0] < up_front[0]


def pays(case: TierCase, n: Fraction) -> bool:
    """THE tier-up decision: whether serving the default while the winner compiles costs less at
    ``n`` calls per process (:func:`tiered_at`) than compiling the winner up front
    (:meth:`Objective.line`); a tie compiles up front. The decorator tiers a signature only where
    this holds at its ``expected_calls`` (`autotune.jit._tier`, through :func:`entry_pays`).

    Example::

        >>> from autotune.select._objective import Objective
        >>> # 0.1 s to save 5 ms a call served
        >>> slow_compile = TierCase(Objective(), (0.1, 0.01), (2.1, 0.005), slowdown=1.0)
        >>> [pays(slow_compile, Fraction(n)) for n in (10, 100, 10_000)]
        [False, True, True]
    """
    return _costs(case, n)[2]


def charged_at(case: TierCase, n: Fraction) -> tuple[Fraction, Fraction]:
    """What the winner rule charges a qualifying point under tier-up: ``(cost at n, slope just
    above n)`` of what the decorator does there (:func:`pays`): the tiered cost where tiering pays,
    else the winner compiled up front."""
    tiered, up_front, cheaper = _costs(case, n)
    return tiered if cheaper else min(up_front, tiered)


def charged_kinks(case: TierCase) -> list[Fraction]:
    """The call counts where :func:`charged_at` changes slope, exactly, sorted: the tiered cost's
    kinks (:func:`tiered_kinks`) and where it crosses the up-front line; between two of them the
    charged cost is a line in N."""
    ks = tiered_kinks(case)
    a_u, b_u = case.exact.up_front
    edges = [Fraction(0), *ks]
    out = set(ks)
    for i, lo in enumerate(edges):
        hi = edges[i + 1] if i + 1 < len(edges) else None
        probe = (lo + hi) / 2 if hi is not None else lo + 1
        value, slope = tiered_at(case, probe)
        a_t = value - slope * probe
        if slope != b_u:
            cross = (a_u - a_t) / (slope - b_u)
            if cross > lo and (hi is None or cross < hi):
                out.add(cross)
    return sorted(out)
