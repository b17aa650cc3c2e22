"""Whether and how a study searches XLA's compile options (``TuneOptions.xla``): in a second stage.

A study that searches them measures the loop configs first, under XLA's defaults (the *loop
stage*, by the run's sampler), then each XLA choice on the :data:`XLA_TOP` best loop configs
(the *XLA stage*, the best one's choices first), as ordinary trials of the same study
(:class:`autotune.program._staged.StagedSpace`): the options no longer multiply every loop config.
``xla=True``, and ``"auto"`` on a GPU, always take the XLA stage; ``"auto"`` on the CPU decides
when the loop stage ends, on its own measurements of those best loop configs (:func:`searched`),
and the study keeps the decision (``xla_searched``, and what it was taken on in ``xla_basis``):
a resumed study, or a ``--workers`` helper, never decides again.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from autotune import select as _select
from autotune._options import TuneOptions
from autotune.program._config import Config
from autotune.program._space import Space
from autotune.program._staged import StagedSpace
from autotune.program._xla import choices, gpu_platform, offered
from autotune.select import Point
from autotune.select._objective import Objective
from autotune.study._finish import Run
from autotune.study._optuna import Study
from autotune.study._propose import make_proposer
from autotune.study._search import record_of
from autotune.study._trials import TrialView

XLA_TOP: int | None = 3
"""How many of the loop stage's best configs (one per lowered program first) the XLA stage tries
every XLA choice on. None: no stages, every loop config × every choice (the product space, which
``benchmarks.bench`` measures beside the stages). Measured: docs/results/xla.md#two-stages."""

XLA_SHARE = 0.5
"""The share of a trial budget the XLA stage keeps at least where the budget cannot hold every loop
config and the XLA stage both (:func:`reserve`)."""

AUTO_COMPILE_SHARE = 0.10
"""``TuneOptions.xla="auto"`` searches the options on CPU when the compile of the loop stage's best
configs is at least this share of their cost at ``expected_calls`` (see :func:`searched`): the options
act on the compile, so where it is a small share they have little to win. A run-time win no compile
rule sees is left to ``xla=True``. Measured: docs/results/xla.md#the-auto-rule-which-compile-share-threshold."""

AUTO_MIN_COMPILE_S = 0.25
"""... and at least this many CPU seconds of trace + lower + compile (see :func:`searched`): below it
what the options can save is within a measurement's noise, and small programs (a test suite's)
stay clear of the line. Measured: docs/results/xla.md#the-auto-rule-which-compile-share-threshold."""


def compile_share(objective: Objective, best: Sequence[Point]) -> tuple[float, float]:
    """``(share, seconds)``: the medians over the points ``best`` of the one-off seconds' share of a
    point's cost (``objective.line`` at ``expected_calls``, processes and cache included; a point's
    ``load_cost_s`` the load a later process is charged) and of its compile seconds."""
    shares, seconds = [], []
    for p in best:
        intercept, slope = objective.line(float(p.compile_cost_s), float(p.run_cost_s), p.load_cost_s)
        total = intercept + slope * objective.expected_calls
        shares.append(float(intercept / total) if total > 0 else 0.0)
        seconds.append(float(p.compile_cost_s))
    return statistics.median(shares), statistics.median(seconds)


def searched(xla: bool | str, objective: Objective | None, best: Sequence[Point], platform: str) -> bool:
    """THE rule of whether a study searches the XLA options (``TuneOptions.xla``).

    ``True``/``False`` say so; ``"auto"`` searches them on GPU (there they move the runtime:
    loop unrolling, command buffers), and on CPU where, over ``best`` (the points of the loop
    stage's best configs, those the options would be tried on), the medians of :func:`compile_share`
    reach :data:`AUTO_COMPILE_SHARE` and :data:`AUTO_MIN_COMPILE_S`: the CPU options only trade
    compile for runtime. A median of several configs' measurements crosses the line only where
    most of them sit at it, so one noisy sample near it does not decide alone. Nothing measured:
    not searched.

    Example::

        >>> searched("auto", None, (), "gpu"), searched(False, None, (), "gpu")
        (True, False)
    """
    if isinstance(xla, bool):
        return xla
    if gpu_platform(platform):
        return True
    if not best or objective is None:
        return False
    share, compile_cost_s = compile_share(objective, best)
    return compile_cost_s >= AUTO_MIN_COMPILE_S and share >= AUTO_COMPILE_SHARE


def xla_space(options: TuneOptions, device: dict[str, Any], study: Study, sites: list) -> Space:
    """The study's space: a :class:`StagedSpace` over the XLA choices this jaxlib accepts on the
    device where the study searches them or may (``"auto"`` on the CPU, not decided yet: the loop
    stage's end decides, :class:`StagedProposer`), else the loop configs alone. A decision the study
    holds (a resumed study, a ``--workers`` helper) stands; ``True``/``False`` and a GPU's
    ``"auto"`` are recorded as the decision at once."""
    held = study.attrs.get("xla_searched")
    on = options.xla if options.xla != "auto" else held
    if on is None and gpu_platform(device["platform"]):
        on = True
    if on is not None:
        study.set_attrs(xla_searched=on)
    found = () if on is False else choices(offered(device["platform"], device["device_kind"])[0])
    if len(found) < 2:
        return Space(sites)
    return Space(sites, xla=found) if XLA_TOP is None else StagedSpace(sites, xla=found, top=XLA_TOP)


def reserve(budget: int, space: StagedSpace) -> int:
    """The trials of ``budget`` the XLA stage keeps: what the budget leaves once every loop config is
    measured, and at least :data:`XLA_SHARE` of it; never more than the XLA stage holds."""
    loops = len(space.loops())
    return max(0, min(len(space) - loops, max(int(budget * XLA_SHARE), budget - loops)))


def loop_counted(views: Iterable[TrialView]) -> int:
    """The loop stage's trials that count toward ``n_trials`` (XLA's defaults: no XLA choice)."""
    return sum(1 for v in views if v.counted and v.config is not None and not v.config.xla)


def ranked_loops(views: Iterable[TrialView], objective: Objective) -> tuple[list[Point], list[Config]]:
    """``(points, rest)``: the loop stage's measured points, cheapest first under ``objective`` (those over
    its memory budget last) and one
    per lowered program before the configs that share a program; then the loop configs it took
    without a measurement (stopped, failed), in trial order, which only fill an XLA stage that
    has fewer measured programs than it tries."""
    points, rest = [], []
    for v in views:
        config = v.config
        if config is None or config.xla or not v.takes_config or v.outcome is None:
            continue
        point = record_of(v, objective).point()
        if point is None:
            rest.append(config)
        elif all(p.config != config for p in points):
            points.append(point)
    points.sort(key=lambda p: (not _select.fits(p, objective.budget_bytes), _select.cost(p, objective)))
    seen: set[Any] = set()
    first, shared = [], []
    for p in points:
        (shared if p.program and p.program in seen else first).append(p)
        seen.add(p.program)
    return first + shared, rest


class StagedProposer:
    """The loop stage's proposer (``_propose``'s, over :meth:`StagedSpace.loops`), then the XLA
    stage: each XLA choice on the best loop configs, in order (see the module docstring).

    The loop stage ends when its trials reach the budget less :func:`reserve`, or when it has
    no config left; ``"auto"`` decides there (once, under the study's proposal lock, as every
    proposal is made) and, declined, leaves the whole budget to the loop stage. Everything is
    read from the study's trials, so a resumed study continues where it was.
    """

    def __init__(self, loop: Any, state: Run, budget: int):
        self.loop, self.kind = loop, loop.kind
        self.study, self.space, self.objective = state.study, state.space, state.objective
        self.platform = state.device["platform"]
        self.budget, self.reserve = budget, reserve(budget, state.space)

    def pin(self, site_ids) -> None:
        self.loop.pin(site_ids)

    def _loop_left(self, views: list[TrialView]) -> int:
        """Trials the loop stage may still take before the XLA stage's share of the budget."""
        return self.budget - self.reserve - loop_counted(views)

    def propose(self, taken: set[str]) -> Config | None:
        views, decided = self.study.trials(self.space), self.study.attrs.get("xla_searched")
        if decided is False:  # declined: the loop stage has the whole budget
            return self.loop.propose(taken)
        config = self.loop.propose(taken) if self._loop_left(views) > 0 else None
        if config is not None:
            return config
        if decided is None and not self.decide(views):
            return self.loop.propose(taken)
        return next((c for c in self.stage(views) if c.to_json() not in taken), None)

    def done(self, views: list[TrialView]) -> bool:
        """Whether a loop stage that ends by itself (the ladder's walk, `_ladder`) has ended and the
        XLA stage, declined or taken, has nothing left: the study has nothing to measure."""
        loop_done = getattr(self.loop, "done", None)
        if loop_done is None:
            return False
        decided, taken = self.study.attrs.get("xla_searched"), {v.config_json for v in views if v.takes_config}
        if decided is None or not (loop_done(views) or (decided and self._loop_left(views) <= 0)):
            return False
        return not decided or all(c.to_json() in taken for c in self.stage(views))

    def upcoming(self, taken: set[str], n: int) -> list[Config]:
        """The next ``n`` configs :meth:`propose` hands out where they are known ahead: the loop
        stage's (where its proposer walks a fixed order, the grid), then the XLA stage's."""
        views, decided = self.study.trials(self.space), self.study.attrs.get("xla_searched")
        left = n if decided is False else min(n, self._loop_left(views))
        if left > 0:
            ahead = getattr(self.loop, "upcoming", None)
            return ahead(taken, left) if ahead is not None else []
        return [c for c in self.stage(views) if c.to_json() not in taken][:n] if decided else []

    def stage(self, views: list[TrialView]) -> list[Config]:
        """The XLA stage's configs, in order, on the loop stage's trials so far."""
        points, rest = ranked_loops(views, self.objective)
        return self.space.stage([*(p.config for p in points), *rest])

    def decide(self, views: list[TrialView]) -> bool:
        """``"auto"``'s decision at the loop stage's end (:func:`searched` on its best points), recorded."""
        best = ranked_loops(views, self.objective)[0][: self.space.top]
        on = searched("auto", self.objective, best, self.platform)
        share, seconds = compile_share(self.objective, best) if best else (None, None)
        basis = {"compile_share": share, "compile_cost_s": seconds, "configs": [p.config.to_dict() for p in best]}
        self.study.set_attrs(xla_searched=on, xla_basis=basis)
        return on


def xla_proposer(state: Run, seed: int | None, budget: int) -> Any:
    """The proposer of a run: ``_propose``'s for its sampler, staged where its space is."""
    space, limited = state.space, state.objective.budget_bytes is not None
    if not isinstance(space, StagedSpace) or not space.xla:
        return make_proposer(state.sampler, state.study, space, seed, budget, limited)
    loop = make_proposer(state.sampler, state.study, space.loops(), seed, budget - reserve(budget, space), limited)
    return StagedProposer(loop, state, budget)


def settled(state: Run) -> Run:
    """The run once its search is over: where ``"auto"`` declined the XLA stage, its space is the
    loop configs alone (and the study's ``space_size`` says so), as a resumed study's is."""
    space = state.space
    if not isinstance(space, StagedSpace) or state.study.attrs.get("xla_searched") is not False:
        return state
    loops = space.loops()
    state.study.set_attrs(space_size=len(loops))
    return dataclasses.replace(state, space=loops)
