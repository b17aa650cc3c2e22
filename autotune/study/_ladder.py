"""A one-knob search: a space of one loop site whose choices are ``scan`` unroll factors and the
full unroll (``for``) is walked as a ladder, from the default's rung up (more body copies) and
then down, each direction until the cost stops falling.

Compile time grows with the body copies a config emits, and the run time falls with them and then
levels off (or rises, as the program outgrows the caches): along the ladder the cost falls to a
lowest rung and then rises. So a direction stops after :data:`PATIENCE` rungs in a row that
improve on the best before them on the walk, and at once after a rung stopped for its compile
(pruned, skipped, timed out, or measured whole with a compile that alone costs the best before
it: one fact, whether a build was stopped at its budget or finished within its grace) or its
memory (out of memory, over the budget): every rung above it emits more copies still (on the
way down such a rung is a miss). A rung that failed otherwise (rejected, an error, a crash) is a
miss.

The full unroll (``for``) is measured when the way up ends, unless a rung stopped it for its
compile or memory: with no loop left, XLA can fuse across the steps, so its cost can fall far
below the unroll factors' curve (on the CPU, ``studies/demo_unroll.py``'s ``for`` costs 1/17 of
``scan×8``). Its compile is held to the compile budget, as every trial's is.

Which configs this measures, and where it stops, follow from the study's trials alone, so a
resumed or re-run study walks on from where it was, and one whose walk has ended has nothing to
measure (:meth:`LadderProposer.done`).

``sampler="auto"`` takes the ladder for such a space when it is larger than the trial budget
(where it fits, the grid measures it whole); ``sampler="ladder"`` asks for it. A space of more
sites, other representations (``fori``, ``while``) or rematerialisation policies is not a ladder:
there ``"ladder"`` is refused and ``"auto"`` takes TPE.
"""

from __future__ import annotations

import math
from typing import Any

from autotune.measuring._measurement import Measurement
from autotune.measuring._outcome import Outcome
from autotune.program._config import Config, SiteChoice
from autotune.select._objective import Objective
from autotune.study._predict import body_copies

PATIENCE = 2
"""Rungs in a row that improve on nothing measured before a direction of the walk stops."""

AHEAD = 2
"""The most rungs above the one under way that the builders compile ahead of the walk: the next is
measured whenever this one improves, those past it only if every one below does too, and each is
dearer to lower (in the parent) and to compile (on cores the builds under way share). On the chip,
with four handed ahead, ``accel_rnn``'s walk of four rungs had the parent trace, lower and export
eight (the last four never measured: ``scan×16`` to ``scan×128``, a second of the search's wall)."""

_STOPS = (Outcome.PRUNED, Outcome.TIMEOUT, Outcome.OOM)  # every rung above it would be too
_UNMEASURED = (Outcome.ABANDONED, Outcome.INTERRUPTED, Outcome.DUPLICATE)  # no measurement of its own


def is_ladder(space: Any) -> bool:
    """Whether ``space`` is one site's ladder: one entry offering ``scan`` unroll factors and
    ``for`` only, under the program's own policy, and no XLA dimension."""
    if getattr(space, "xla", ()) or len(space.entries) != 1:
        return False
    e = space.entries[0]
    return set(e.reprs) <= {"scan", "for"} and tuple(e.policies) == (None,) and not e.guards


def _height(site: Any, c: SiteChoice) -> tuple[int, bool]:
    return body_copies(site, c), c.repr == "for"


def rungs(space: Any) -> list[Config]:
    """The ladder's configs, fewest body copies first (``for`` above every unroll factor)."""
    e = space.entries[0]
    return [Config({e.site.id: c}) for c in sorted(e.choices, key=lambda c: _height(e.site, c))]


def _cost(view: Any) -> float | None | str:
    """A trial's cost on the ladder: a number, ``"stop"``, ``"miss"``, or None (not measured yet)."""
    outcome = view.outcome
    if outcome is None or outcome in _UNMEASURED:
        return None
    if outcome in _STOPS or view.skipped or (view.attrs.get("memory_over_bytes") or 0) > 0:
        return "stop"
    if outcome in (Outcome.COMPLETE, Outcome.SHARED) and view.values:
        return float(view.values[0])
    return "miss"


def _charge(view: Any, objective: Objective | None) -> float | None:
    """What a measured rung's compile alone costs under ``objective`` (None: not measured, or no
    objective whose compile charge is the cost's one-off part, as under tier-up)."""
    if objective is None or objective.tier_up or view.outcome not in (Outcome.COMPLETE, Outcome.SHARED):
        return None
    if not view.measurement:
        return None
    return float(objective.line(Measurement.from_dict(view.measurement).compile_cost_s, 0.0)[0])


class LadderProposer:
    """The ladder's next rung not measured, or None once both directions have stopped."""

    kind = "ladder"

    def __init__(self, study: Any, space: Any):
        if not is_ladder(space):
            raise ValueError("sampler='ladder' needs a space of one scan site (scan unroll factors and 'for').")
        self.study, self.space = study, space
        held = study.attrs.get("objective") if study is not None else None
        self.objective = None if held is None else Objective.from_dict(held)
        self.pinned: frozenset = frozenset()
        site = space.entries[0].site
        self.default = space.default().to_json()
        # The default's place by its height: a program's own unroll may be no rung (one clamped to the length).
        mine, ladder = _height(site, site.default), rungs(space)
        up = [c for c in ladder if _height(site, c[site.id]) > mine]
        self.down = [c for c in ladder if _height(site, c[site.id]) < mine][::-1]
        self.top = up.pop() if up and up[-1][site.id].repr == "for" else None  # measured once the way up ends
        self.up = up

    def pin(self, site_ids) -> None:
        self.pinned = frozenset(site_ids)  # the one site cannot be rewritten: nothing is left to walk

    def propose(self, taken: set[str]) -> Config | None:
        return self._next(self.study.trials(self.space), taken)

    def upcoming(self, taken: set[str], n: int) -> list[Config]:
        """The next ``n`` rungs the walk measures if those under way do not end it: the way up, for
        builders to compile while a rung is measured (one that turns out past the walk's end is dropped)."""
        return self._ahead(self.study.trials(self.space), taken, n)

    def done(self, views: list[Any]) -> bool:
        """Whether the walk has ended on the trials ``views`` (a study that has nothing to measure):
        none of them in flight or queued, and no rung left to measure (or the site pinned)."""
        if any(v.outcome is None for v in views):
            return False
        unrewritable = (self.study.attrs.get("unrewritable") or {}) if self.study is not None else {}
        if self.space.entries[0].site.id in unrewritable:
            return True
        return self._next(views, {v.config_json for v in views if v.takes_config}) is None

    def _ahead(self, views: list[Any], taken: set[str], n: int) -> list[Config]:
        """:meth:`_next` ``n`` times (at most :data:`AHEAD`), each rung it names taken in turn."""
        taken, out, n = set(taken), [], min(n, AHEAD)
        while len(out) < n and (config := self._next(views, taken)) is not None:
            out.append(config)
            taken.add(config.to_json())
        return out

    def _next(self, views: list[Any], taken: set[str]) -> Config | None:
        """The walk replayed on the trials: each rung judged against the best before it on the walk
        (the default's, then each improvement; the way down starts from the way up's best). A rung
        another worker is measuring is passed over, but the full unroll waits for the way up."""
        if self.pinned:
            return None
        seen: dict[str, float | str] = {}
        charges: dict[str, float] = {}
        for v in views:
            key = v.config_json
            if key is None or key in seen or (cost := _cost(v)) is None:
                continue
            seen[key] = cost
            if (charge := _charge(v, self.objective)) is not None:
                charges[key] = charge
        start = seen.get(self.default)
        best = start if isinstance(start, float) else math.inf
        for going_up, walk in ((True, self.up), (False, self.down)):
            misses, stopped, pending = 0, False, False
            for config in walk:
                key = config.to_json()
                cost = seen.get(key)
                if cost is None:
                    if key in taken:  # being measured by another worker of the study
                        pending = True
                        continue
                    return config
                if going_up and (cost == "stop" or charges.get(key, -math.inf) >= best):
                    stopped = True  # its compile alone cannot win: nor can any rung above it
                    break
                if cost == "stop" or cost == "miss" or cost >= best:
                    misses += 1
                    if misses >= PATIENCE:
                        break
                else:
                    best, misses = cost, 0
            if going_up and self.top is not None and not stopped:  # a loop-free program can fall off the curve
                cost = seen.get(self.top.to_json())
                if cost is None:
                    if pending or self.top.to_json() in taken:
                        return None  # the way up is still being measured: its end decides
                    return self.top
                if isinstance(cost, float):
                    best = min(best, cost)
        return None
