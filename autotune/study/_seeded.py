"""A seeded search: the default, then the neighbours' configs (`autotune.study._neighbours`), then
the stop rule, which ends the search there when the rest cannot be expected to beat them.

The stop rule (:func:`decide`) asks whether the landscape the nearest neighbour measured still
holds at the new key. Two configs are *apart* when one costs more than ``1 + margin`` times the
other; the margin is the noise of one measurement here: the spread of the default's own
reference rounds (``(max - min) / median`` of their costs), at least :data:`MARGIN`. The search
stops after the seeds when

1. the neighbour's winner was measured here and no measured config (the default, any seed) is
   apart from it on the cheap side: it is still the cheapest, up to the noise; and
2. no two of the neighbour's configs swapped places: none it ranked apart ahead of another is
   apart behind it here.

Otherwise the ordinary search goes on with what is left of the budget (the seeds count toward
``n_trials``, and TPE learns from them). Either way the contenders are confirmed as usual
(``_confirm``). A config the neighbour ranked below its best few was never measured here: the rule
bets that a landscape whose best few kept their order kept the rest of it too.
``benchmarks/shapes.py`` measures the bet (docs/results/shapes.md).

A study is seeded only when it is new (a resumed study carries on with the seeding it recorded);
its seeding and the verdict are recorded in its attributes, so a stopped study that is run again
is finished, and ``neighbours=False`` searches on past the stop.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from autotune import select as _select
from autotune._options import Plumbing, TuneOptions
from autotune.program import _keys
from autotune.program._config import Config
from autotune.select import Point, point_of
from autotune.select._objective import Objective
from autotune.study._neighbours import Seeding, Verdict, plan

MARGIN = 0.05
"""The least relative margin by which two configs' costs must differ to count as apart."""


class SeedProposer:
    """Proposes the seeds in order (each not taken), then nothing: the first phase of a seeded
    search. ``pin`` holds the sites found unrewritable at their default, as the other proposers do."""

    kind = "seeds"

    def __init__(self, space: Any, seeds: tuple[Config, ...]):
        self.space, self.seeds, self.pinned = space, tuple(seeds), frozenset()

    def pin(self, site_ids) -> None:
        self.pinned = frozenset(site_ids)

    def _held(self) -> list[Config]:
        return [self.space.with_defaults(c, self.pinned) if self.pinned else c for c in self.seeds]

    def upcoming(self, taken: set[str], n: int) -> list[Config]:
        """The next ``n`` seeds :meth:`propose` would hand out (a runner compiles them ahead)."""
        return [c for c in self._held() if c.to_json() not in taken][:n]

    def propose(self, taken: set[str]) -> Config | None:
        ahead = self.upcoming(taken, 1)
        return ahead[0] if ahead else None


def margin(default: Point | None, goal: Objective) -> float:
    """The noise margin: the relative spread of the default's reference rounds' costs, at least
    :data:`MARGIN` (a default measured once: :data:`MARGIN`)."""
    if default is None or len(default.rounds) < 2:
        return MARGIN
    costs = [_select.cost(Point(default.config, c, r), goal) for c, r in default.rounds]
    mid = statistics.median(costs)
    return max(MARGIN, (max(costs) - min(costs)) / mid) if mid > 0 else MARGIN


def decide(seeding: Seeding, points: list[Point], default: Config, goal: Objective, search: str) -> Verdict:
    """The stop rule (see the module docstring) on the points measured here."""
    if search == "pareto":
        return Verdict(False, "pareto")
    d = point_of(points, default)
    m = margin(d, goal)
    tiered = d if goal.tier_up else None
    wanted = {default, *seeding.seeds}
    here = {p.config: _select.cost(p, goal, tiered) for p in points if p.config in wanted}
    ref = seeding.sources[0]
    w = ref.winner
    if w is None or w not in here:
        return Verdict(False, "unmeasured", first=w or ref.ranking[0][0], margin=m)
    known = [c for c, _ in ref.ranking if c in here]
    if len(known) < 2:
        return Verdict(False, "thin", margin=m)
    order = sorted(here, key=lambda c: (here[c], c.to_json()))
    best = order[0]
    if here[best] * (1 + m) < here[w]:
        return Verdict(False, "beaten", first=w, second=best, ratio=here[w] / here[best], margin=m)
    there = dict(ref.ranking)
    swaps = [
        (here[a] / here[b], a, b)
        for a in known
        for b in known
        if there[a] * (1 + m) < there[b] and here[b] * (1 + m) < here[a]
    ]
    if swaps:
        ratio, a, b = max(swaps, key=lambda s: s[0])
        return Verdict(False, "swapped", first=a, second=b, ratio=ratio, margin=m)
    runner_up = next((c for c in order if c != w), None)
    ratio = None if runner_up is None else here[runner_up] / here[w]
    return Verdict(True, "holds", first=w, second=runner_up, ratio=ratio, margin=m)


def planned(run: Any, options: TuneOptions, plumbing: Plumbing, budget: int, views: list) -> Seeding | None:
    """The seeding of the study ``run`` opened (``_finish.Run``): the one it recorded, else for a
    new study a plan from ``plumbing.neighbours_of`` (``(fingerprint, signature, device key) ->
    [Neighbour]``), recorded; None when it is not seeded (``options.neighbours`` off, a helper of
    ``--workers``, no neighbour that fits). With ``neighbours`` off, a recorded stop is marked
    searched past."""
    held = Seeding.from_json(run.study.attrs.get("seeding"))
    if plumbing.join:
        return None
    if not options.neighbours:
        if held is not None and held.stopped:
            run.study.set_attrs(seeding=held.decided(Verdict(False, "searched on")).to_json())
        return None
    if held is not None or views or plumbing.neighbours_of is None:
        return held
    found = plumbing.neighbours_of(run.program.fingerprint, run.signature, _keys.device_key(run.device))
    seeding = plan(list(found), run.space, run.objective, run.signature, budget - 1)
    if seeding is not None:
        run.study.set_attrs(seeding=seeding.to_json())
    return seeding


def stopped(seeding: Seeding | None) -> bool:
    """Whether the study stopped after its seeds (nothing more for a search to measure)."""
    return seeding is not None and seeding.stopped


def search(searcher: Any, seeding: Seeding | None, budget: int, deadline: float | None) -> Seeding | None:
    """Run the study's search (``_search.Search``): with a seeding not decided yet, the seeds
    first (after the default), then the stop rule's verdict, recorded in the study; then the
    ordinary search with what is left of ``budget``, unless the verdict stopped it."""
    if seeding is not None and seeding.verdict is None:
        ordinary = searcher.proposer
        searcher.proposer = SeedProposer(searcher.space, seeding.seeds)
        try:
            searcher.run(budget, deadline)
        finally:
            searcher.proposer = ordinary
        verdict = decide(seeding, searcher.points(), searcher.default, searcher.objective, searcher.search)
        seeding = seeding.decided(verdict)
        searcher.study.set_attrs(seeding=seeding.to_json())
        if searcher.progress.shown:
            searcher.progress.update(status="neighbours: " + verdict.text(lambda c: c.label(searcher.space.sites)))
    if stopped(seeding) or (seeding is not None and deadline is not None and time.monotonic() > deadline):
        return seeding
    searcher.run(budget, deadline)
    return seeding


__all__ = ["MARGIN", "SeedProposer", "decide", "margin", "planned", "search", "stopped"]
