"""A run's end: whether a study is finished, which contenders confirmation re-times, the
winner against the study's incumbent, and the :class:`TuneResult`.

``study/_tune`` orchestrates a run and hands its state over as one :class:`Run`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from autotune import select as _select
from autotune._errors import StudyError
from autotune.measuring._outcome import counted
from autotune.program._config import Config
from autotune.program._space import Space
from autotune.select import Point, point_of
from autotune.select._objective import Objective
from autotune.study._contenders import contenders, serves
from autotune.study._optuna import Study
from autotune.study._result import TrialRecord, TuneResult


@dataclass(frozen=True)
class Run:
    """What a run knows once its study is open: the study, the space, the program traced
    and its key, the objective, the search mode, the sampler, the storage and the start."""

    study: Study
    space: Space
    program: Any
    signature: str
    device: dict
    objective: Objective
    search: str
    sampler: str
    url: str
    started: float


def nothing_to_measure(views: list, space_size: int, budget: int) -> bool:
    """Whether a search would open no trial: the study holds ``budget`` counted trials (or
    every config is taken) and none is in flight or queued."""
    if any(v.outcome is None for v in views):
        return False
    taken = {v.config_json for v in views if v.takes_config}
    return counted(views) >= budget or len(taken) >= space_size


def confirmed_as_is(study: Study, records: list[TrialRecord]) -> bool:
    """Whether the study's stored confirmation was taken over exactly the trials it holds now."""
    attrs = study.attrs
    winner, confirmed = attrs.get("winner"), stored_points(attrs)
    return (
        winner is not None
        and attrs.get("confirmed_trials") == measured(records)
        and point_of(confirmed, Config.from_dict(winner)) is not None
    )


def stored_points(attrs: dict[str, Any]) -> list[Point]:
    """The confirmed points a study recorded (JSON in its attributes; older spellings read too)."""
    return [Point.from_json(p) for p in attrs.get("confirmed") or ()]


def incumbent(attrs: dict[str, Any], goal: Objective) -> Config | None:
    """The winner of the study's last confirmation, when it was named for this objective
    (a Pareto study serves every call count), else None."""
    winner = attrs.get("winner")
    return Config.from_dict(winner) if winner is not None and attrs.get("confirmed_for") == goal.to_dict() else None


def measured(records: list[TrialRecord]) -> list[int]:
    """The numbers of the trials that are measurements (selection points), in order."""
    return sorted(r.number for r in records if r.point() is not None)


def decided(records: list[TrialRecord]) -> set[str]:
    """The configs (canonical JSON) the search decided: measured, or stopped before their run time
    was known (pruned, predicted over the compile budget, timed out)."""
    return {r.config.to_json() for r in records if r.outcome is not None and not r.outcome.releases}


def serving(run: Run, records: list[TrialRecord]) -> str:
    """What the run's confirmation serves (`autotune.study._contenders.serves`), from its trials."""
    return serves(run.search, run.space.product_size(), len(decided(records)))


def top_with(
    points: list[Point], incumbent: Config | None, default: Config, goal: Objective, top: int, serve: str
) -> int:
    """``top``, raised until the study's earlier winner (or a config of its program) is a
    contender: it must be re-timed side by side for a new pick to replace it."""
    mine = None if incumbent is None else point_of(points, incumbent)
    if mine is None:
        return top
    same = {p.config for p in points if p is mine or (mine.program and p.program == mine.program)}
    while top < len(points) and not same & set(contenders(points, default, goal, top, serve=serve)):
        top += 1
    return top


def keep_or_replace(confirmed: list[Point], goal: Objective, default: Config, incumbent: Config | None) -> Point:
    """The winner of a confirmation: the rule's pick against the default; when the study
    named another winner in an earlier confirmation (``incumbent``) and it was re-timed in
    these rounds, the pick must also beat it under the same rule (median and paired rounds),
    else it stays. So re-timing a study never flips its winner on noise alone."""
    pick = _select.winner(confirmed, goal, default)
    kept = None if incumbent is None else point_of(confirmed, incumbent)
    if kept is None or kept.config == pick.config:
        return pick
    return pick if _select.beats(pick, kept, goal) else kept


def result(run: Run, records: list[TrialRecord], confirmed: list[Point] | None, new_trials: int = 0) -> TuneResult:
    """The result of a confirmation (recorded in the study), or with ``confirmed=None`` the
    study's stored one (a finished study)."""
    study, space, goal = run.study, run.space, run.objective
    default = space.default()
    finished = confirmed is None
    attrs = study.attrs
    if finished:
        confirmed = stored_points(attrs)
    if not confirmed:
        raise StudyError(
            f"Study {study.name!r}: no config compiled and ran, not even the default; see the "
            "trial reasons (TuneResult.trials, or `autotune report`)."
        )
    if finished and incumbent(attrs, goal) is not None:
        best = point_of(confirmed, incumbent(attrs, goal))
    else:  # a finished Pareto study re-picks for this call count from its stored rounds, measuring nothing
        best = keep_or_replace(confirmed, goal, default, incumbent(attrs, goal))
    dflt = next((p for p in confirmed if p.config == default), best)
    stopped = [
        (r.config, float(r.compile_s_at_least or 0.0))
        for r in records
        if r.outcome is not None and not r.outcome.releases and r.outcome.stopped
    ]
    # A staged space's XLA stage took the best loop configs at this call count only: every config of
    # the product it left out is unmeasured for another call count.
    unmeasured = max(0, space.product_size() - len(decided(records)))
    complete = _select.complete_range(confirmed, goal, default=default, stopped=stopped, unmeasured=unmeasured)
    if not finished:
        study.set_attrs(
            confirmed=[p.to_json() for p in confirmed],
            winner=best.config.to_dict(),
            complete_range=_select.range_json(complete),
            confirmed_trials=measured(records),
            confirmed_for=goal.to_dict(),
        )
    return TuneResult(
        best_config=best.config,
        best_cost=_select.cost(best, goal, dflt),  # tiered where goal.tier_up and best qualifies
        best=best.measurement,
        default_cost=_select.cost(dflt, goal),
        default=dflt.measurement,
        trials=records,
        objective=goal,
        sites=run.program.sites,
        fingerprint=run.program.fingerprint,
        signature=run.signature,
        device=run.device,
        study_name=study.name,
        storage=run.url,
        sampler=run.sampler,
        space_size=len(space),
        confirmed=confirmed,
        default_config=default,
        complete_range=complete,
        wall_s=time.perf_counter() - run.started,
        search=run.search,
        finished=finished,
        new_trials=max(0, new_trials),
        unrewritable=dict(attrs.get("unrewritable") or {}),
    )


__all__ = ["Run", "confirmed_as_is", "incumbent", "keep_or_replace", "measured", "nothing_to_measure", "result"]
