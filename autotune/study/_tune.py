"""`at.tune`: search a function's loop configs for the lowest cost."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .. import _keys, _paths, _select
from .._config import Config
from .._errors import StudyError
from .._interrupt import InterruptLatch
from .._measure import Measurement
from .._objective import Objective
from .._runner import InProcessRunner, Outcome
from .._space import Space, unrewritable
from ._confirm import confirm, contenders, point_of
from ._optuna import Study
from ._progress import Progress, wanted
from ._propose import make_proposer
from ._result import TrialRecord, TuneResult
from ._search import Search, _counted, record_of

SAMPLERS = ("auto", "tpe", "grid", "random", "nsga2")
SEARCHES = ("cost", "pareto")
DEFAULT_TRIALS = 32


def plan(sampler: str, search: str, space_size: int, n_trials: int | None) -> tuple[str, int]:
    """(sampler kind, trial budget): ``auto`` is the exhaustive grid when the whole space fits
    the budget, else TPE (NSGA-II for a Pareto search)."""
    if sampler not in SAMPLERS:
        raise StudyError(f"sampler={sampler!r} is not one of {list(SAMPLERS)}.")
    if n_trials is not None and (isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1):
        raise StudyError(f"n_trials={n_trials!r} must be a positive integer.")
    if search not in SEARCHES:
        raise StudyError(f"objective={search!r} is not one of {list(SEARCHES)}.")
    budget = n_trials if n_trials is not None else DEFAULT_TRIALS
    kind = (
        sampler
        if sampler != "auto"
        else ("grid" if space_size <= budget else ("nsga2" if search == "pareto" else "tpe"))
    )
    if kind == "grid" and n_trials is None:
        budget = space_size
    return kind, min(budget, space_size)


def default_runner(
    fn: Callable,
    args: tuple,
    kwargs: dict,
    jit_kwargs: dict,
    timing: dict,
    isolate: bool | str,
    trial_timeout: float | None,
    trial_memory_gb: float | None,
    location: Any = None,
):
    """A worker process unless ``isolate=False``."""
    if isolate not in ("auto", True, False):
        raise StudyError(f"isolate={isolate!r} must be 'auto', True or False.")
    if isolate is False:
        if trial_timeout is not None or trial_memory_gb is not None:
            raise StudyError("trial_timeout and trial_memory_gb need a worker process; drop isolate=False.")
        return InProcessRunner(fn, args, kwargs, jit_kwargs, timing)
    from ..worker import WorkerRunner

    if location is None:  # a module-level function: a worker can import it if jax.export cannot carry it
        from ..worker import Location

        location = Location.of(fn)
    return WorkerRunner(
        fn,
        args,
        kwargs,
        jit_kwargs,
        timing,
        trial_timeout=trial_timeout,
        memory_gb=trial_memory_gb,
        isolate=isolate,
        location=location,
    )


def open_study(name: str, url: str, search: str, device: dict, attrs: dict[str, Any]) -> Study:
    """Create or resume the study, refusing one measured on another device."""
    study = Study(name, url, 2 if search == "pareto" else 1)
    ran_on = study.attrs.get("device")
    if ran_on is not None and _keys.device_key(ran_on) != _keys.device_key(device):
        study.close()
        raise StudyError(
            f"Study {name!r} in {_paths.redact(url)} was measured on {_keys.device_key(ran_on)}, but this process "
            f"runs on {_keys.device_key(device)}; a study never mixes devices in one ranking. Use another study "
            "name (the default name includes the device) or run this on the study's device."
        )
    study.set_attrs(device=device, **attrs)
    return study


def tune(
    fn: Callable,
    *args: Any,
    kwargs: dict[str, Any] | None = None,
    expected_calls: float = 1000,
    compile_weight: float = 1.0,
    runtime_weight: float = 1.0,
    n_trials: int | None = None,
    timeout: float | None = None,
    sampler: str = "auto",
    storage: str | None = None,
    study_name: str | None = None,
    function_key: str | None = None,
    jit_kwargs: dict[str, Any] | None = None,
    seed: int | None = 0,
    confirm_top: int = 3,
    confirm_rounds: int = 3,
    rtol: float | None = None,
    atol: float | None = None,
    timing: dict[str, Any] | None = None,
    runner: Any = None,
    progress: bool | None = None,
    join: bool = False,
    on_ready: Callable[[str, str], None] | None = None,
    before_finish: Callable[[], None] | None = None,
    objective: str = "cost",
    trial_timeout: float | None = None,
    trial_memory_gb: float | None = None,
    isolate: bool | str = "auto",
    location: Any = None,
    retune: str | None = None,
    reconfirm: bool = False,
) -> TuneResult | None:
    """Search the loop configs of ``fn`` on ``args`` and return the winner.

    Trial 0 is the default config, measured three times. Every later trial measures a
    config no trial has measured yet (``n_trials`` counts distinct measurements): the whole
    space in order when it fits the budget (``sampler="auto"``), else TPE. Trials whose
    compile alone cannot beat the best cost are pruned (or skipped when their compile
    time is predicted over budget); configs that lower to an already measured program
    share its measurement. The contenders are then re-timed side by side and the winner
    named by :func:`autotune._select.winner`; against the study's winner from an earlier
    confirmation, a new pick must also win the paired rounds (:func:`keep_or_replace`).

    A study that already holds its trials (``n_trials`` counted, or every config taken) and a
    confirmation of exactly those trials is *finished*: nothing is measured, the stored
    confirmation is the result (``TuneResult.finished``), in about the time it takes to trace
    ``fn`` and open the study. ``reconfirm=True`` re-times its contenders anyway.

    Arguments:
        fn, args, kwargs: the function and example inputs.
        expected_calls, compile_weight, runtime_weight: the :class:`Objective`.
        n_trials, timeout: the budget (distinct measured configs, and/or seconds).
        sampler: ``"auto" | "tpe" | "grid" | "random" | "nsga2"``.
        storage: an Optuna storage URL or file path (default: ``studies.db`` beside the cache);
            running again with the same storage and study resumes it.
        study_name: default derived from the function, program, signature, device and objective.
        jit_kwargs: ``jax.jit`` keyword arguments (``static_argnums``...).
        confirm_top, confirm_rounds: how many contenders to re-time, in how many rounds.
        rtol, atol: override the correctness guard's tolerances (see ``study/_guard.py``).
        timing: runtime sampling options of :func:`autotune.measure`.
        runner: a :class:`autotune.Runner` (default: a worker process, see ``isolate``).
        progress: show progress on stderr; None (default) when stderr is a terminal.
        join: only run trials on an existing study whose owner confirms the winner; returns None.
        on_ready: called with (storage URL, study name) once the study exists (to start helpers);
            before_finish: called before confirmation.
        objective: ``"cost"`` searches the weighted cost; ``"pareto"`` the (compile_s, run_s)
            trade-off with NSGA-II, then picks the front's winner for ``expected_calls``.
        trial_timeout, trial_memory_gb: per-trial limits in the worker process.
        isolate: ``"auto"`` measures in a worker (in-process with one warning for a program
            that cannot be isolated), ``True`` raises instead, ``False`` measures here.
        location: where a worker can import ``fn`` from (for programs ``jax.export`` cannot carry).
        retune: the command that re-tunes this function, ``{calls}`` standing for the call count.
        reconfirm: re-time the contenders of a finished study (see above).

    Returns:
        A :class:`TuneResult` (None with ``join``).
    """
    started = time.perf_counter()
    kwargs, jit_kwargs = dict(kwargs or {}), dict(jit_kwargs or {})
    goal = Objective(expected_calls, compile_weight, runtime_weight)
    if runner is None:  # started first: the worker imports JAX while this process traces and opens the study
        runner = default_runner(
            fn, tuple(args), kwargs, jit_kwargs, dict(timing or {}), isolate, trial_timeout, trial_memory_gb, location
        )
        runner.start()
    try:
        program, signature = _keys.program_key(fn, args, kwargs, jit_kwargs)
        space = Space(program.sites)
        kind, budget = plan(sampler, objective, len(space), n_trials)
        device = _keys.device_info()
        fkey = function_key or _keys.function_key(fn)
        name = study_name or _keys.study_name(fkey, program.fingerprint, signature, device, goal, objective)
        url = _paths.storage_url(storage) if storage else _paths.default_storage_url()
        default = space.default()
        study = open_study(
            name,
            url,
            objective,
            device,
            dict(
                function_key=fkey,
                fingerprint=program.fingerprint,
                objective=goal.to_dict(),
                search=objective,
                sites=[s.to_dict() for s in program.sites],
                default_config=default.to_dict(),
                space_size=len(space),
                sampler=kind,
                **({"retune": retune} if retune else {}),
            ),
        )
    except BaseException:
        runner.close()
        raise
    try:
        views = study.trials(space)
        held = [record_of(v, goal) for v in views]
        before = _counted(views)
        idle = nothing_to_measure(views, len(space), budget)
        if idle and (join or (not reconfirm and confirmed_as_is(study, held))):
            runner.close()  # a finished study: no trial, no confirmation, no helper
            if join:
                return None
            result = _result(study, space, program, signature, device, goal, objective, kind, held, None, url, started)
            with Progress(wanted(progress), budget, f"tuning {fkey}", completed=min(budget, before)) as bar:
                bar.update(status="finished: nothing new to measure")
            return result
        proposer = make_proposer(kind, study, space, seed, budget)
        if on_ready is not None:
            on_ready(url, name)
        with (
            InterruptLatch() as latch,
            Progress(wanted(progress), budget, f"tuning {fkey}", completed=min(budget, before)) as bar,
        ):  # a resumed study's trials
            try:
                search = Search(
                    study,
                    space,
                    runner,
                    goal,
                    objective,
                    proposer,
                    _keys.device_key(device),
                    rtol=rtol,
                    atol=atol,
                    progress=bar,
                    latch=latch,
                    unrewritable=lambda c: unrewritable(fn, tuple(args), kwargs, jit_kwargs, space, c),
                )
                search.keep_top = confirm_top
                if not idle:  # an idle search would only measure the default again, for the guard
                    search.run(budget, None if timeout is None else time.monotonic() + timeout)
                if before_finish is not None:
                    before_finish()
                if join:
                    return None
                bar.update(status="confirming the contenders side by side")
                records = search.records()
                points = search.points(records)
                top = _top_with(points, incumbent(study.attrs, goal), default, goal, confirm_top, objective)
                confirmed = confirm(
                    runner,
                    points,
                    default,
                    goal,
                    top=top,
                    rounds=confirm_rounds,
                    check=latch.check,
                    whole_front=objective == "pareto",
                )
            finally:
                runner.close()
            result = _result(
                study,
                space,
                program,
                signature,
                device,
                goal,
                objective,
                kind,
                records,
                confirmed,
                url,
                started,
                new_trials=len(_measured(records)) - len(_measured(held)),
            )
            bar.update(best="", status=f"winner {result.best_config.label(program.sites)} at {result.best_cost:.4g} s")
        return result
    finally:
        study.close()


def nothing_to_measure(views: list, space_size: int, budget: int) -> bool:
    """Whether a search would open no trial: the study holds ``budget`` counted trials (or
    every config is taken) and none is in flight or queued."""
    if any(v.outcome is None for v in views):
        return False
    taken = {v.config_json for v in views if v.takes_config}
    return _counted(views) >= budget or len(taken) >= space_size


def confirmed_as_is(study: Study, records: list[TrialRecord]) -> bool:
    """Whether the study's stored confirmation was taken over exactly the trials it holds now."""
    attrs = study.attrs
    winner, confirmed = attrs.get("winner"), attrs.get("confirmed") or []
    return (
        winner is not None
        and attrs.get("confirmed_trials") == _measured(records)
        and point_of(confirmed, winner) is not None
    )


def incumbent(attrs: dict[str, Any], goal: Objective) -> Any:
    """The winner of the study's last confirmation, when it was named for this objective
    (a Pareto study serves every call count), else None."""
    return attrs.get("winner") if attrs.get("confirmed_for") == goal.to_dict() else None


def _measured(records: list[TrialRecord]) -> list[int]:
    """The numbers of the trials that are measurements (selection points), in order."""
    return sorted(r.number for r in records if r.point() is not None)


def _top_with(
    points: list[dict[str, Any]], incumbent: Any, default: Config, goal: Objective, top: int, search: str
) -> int:
    """``top``, raised until the study's earlier winner (or a config of its program) is a
    contender: it must be re-timed side by side for a new pick to replace it."""
    mine = None if incumbent is None else point_of(points, incumbent)
    if mine is None:
        return top
    same = {
        _select.config_text(p["config"])
        for p in points
        if p is mine or (mine.get("program") and p.get("program") == mine.get("program"))
    }
    while top < len(points) and not same & {
        c.to_json() for c in contenders(points, default, goal, top, whole_front=search == "pareto")
    }:
        top += 1
    return top


def keep_or_replace(
    confirmed: list[dict[str, Any]], goal: Objective, default: Config, incumbent: Any
) -> dict[str, Any]:
    """The winner of a confirmation: the rule's pick against the default; when the study
    named another winner in an earlier confirmation (``incumbent``) and it was re-timed in
    these rounds, the pick must also beat it under the same rule (median and paired rounds),
    else it stays. So re-timing a study never flips its winner on noise alone."""
    pick = _select.winner(confirmed, goal, default.to_dict())
    kept = None if incumbent is None else point_of(confirmed, incumbent)
    if kept is None or _select.config_text(kept["config"]) == _select.config_text(pick["config"]):
        return pick
    return pick if _select.beats(pick, kept, goal) else kept


def entry_stands(current: Any, entry: Any, result: TuneResult) -> bool:
    """Whether the cache's ``current`` entry stands against ``entry``, written from ``result``.

    Only an entry from the same study and objective can stand. It does when the study was
    finished (nothing measured: the entry already records this study); when the winner is
    its config and no new trial was measured (a re-confirmation that only re-timed it); and
    when its config was re-timed in this confirmation and the new winner does not beat it
    there under the winner rule (median and paired rounds, with the stored config as the one
    to beat). Figures of two confirmations are never set against each other.
    """
    if current is None or current.study_name != entry.study_name or current.objective != entry.objective:
        return False
    stored, new = _select.config_text(current.config), _select.config_text(entry.config)
    if result.finished or (stored == new and not result.new_trials):
        return True
    if stored == new:
        return False
    old, won = point_of(result.confirmed, current.config), point_of(result.confirmed, entry.config)
    if old is None or won is None or old is won:  # not re-timed, or the same program under another name
        return False
    return not _select.beats(won, old, result.objective)


def _result(
    study: Study,
    space: Space,
    program,
    signature: str,
    device: dict,
    goal: Objective,
    search: str,
    kind: str,
    records: list[TrialRecord],
    confirmed: list[dict[str, Any]] | None,
    url: str,
    started: float,
    new_trials: int = 0,
) -> TuneResult:
    """The result of a confirmation (recorded in the study), or with ``confirmed=None`` the
    study's stored one (a finished study)."""
    default = space.default()
    finished = confirmed is None
    attrs = study.attrs
    if finished:
        confirmed = attrs["confirmed"]
    if not confirmed:
        raise StudyError(
            f"Study {study.name!r}: no config compiled and ran, not even the default; see the "
            "trial reasons (TuneResult.trials, or `autotune report`)."
        )
    by_text = {_select.config_text(p["config"]): p for p in confirmed}
    if finished and incumbent(attrs, goal) is not None:
        best = point_of(confirmed, attrs["winner"])
    else:  # a finished Pareto study re-picks for this call count from its stored rounds, measuring nothing
        pick = keep_or_replace(confirmed, goal, default, incumbent(attrs, goal))
        best = by_text[_select.config_text(pick["config"])]
    dflt = by_text.get(default.to_json(), best)
    stopped, decided = [], set()
    for r in records:
        if r.outcome is None or r.outcome.releases:
            continue
        decided.add(r.config.to_json())
        if r.outcome.stopped:
            stopped.append((r.config.to_dict(), float(r.compile_s_at_least or 0.0)))
    complete = _select.complete_range(
        confirmed, goal, default=default.to_dict(), stopped=stopped, unmeasured=max(0, len(space) - len(decided))
    )
    if not finished:
        study.set_attrs(
            confirmed=confirmed,
            winner=best["config"],
            complete_range=_select.range_json(complete),
            confirmed_trials=_measured(records),
            confirmed_for=goal.to_dict(),
        )
    return TuneResult(
        best_config=Config.from_dict(best["config"]),
        best_cost=_select.cost(best, goal),
        best=Measurement.from_dict(best["measurement"]),
        default_cost=_select.cost(dflt, goal),
        default=Measurement.from_dict(dflt["measurement"]),
        trials=records,
        objective=goal,
        sites=program.sites,
        fingerprint=program.fingerprint,
        signature=signature,
        device=device,
        study_name=study.name,
        storage=url,
        sampler=kind,
        space_size=len(space),
        confirmed=confirmed,
        default_config=default,
        complete_range=complete,
        wall_s=time.perf_counter() - started,
        search=search,
        finished=finished,
        new_trials=max(0, new_trials),
        unrewritable=dict(attrs.get("unrewritable") or {}),
    )


__all__ = ["SAMPLERS", "SEARCHES", "Outcome", "entry_stands", "keep_or_replace", "nothing_to_measure", "plan", "tune"]
