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
from .._space import Space
from ._confirm import confirm
from ._optuna import Study
from ._progress import Progress, wanted
from ._propose import make_proposer
from ._result import TrialRecord, TuneResult
from ._search import Search

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
    kind = sampler if sampler != "auto" else (
        "grid" if space_size <= budget else ("nsga2" if search == "pareto" else "tpe"))
    if kind == "grid" and n_trials is None:
        budget = space_size
    return kind, min(budget, space_size)


def default_runner(fn: Callable, args: tuple, kwargs: dict, jit_kwargs: dict, timing: dict, isolate: bool | str,
                   trial_timeout: float | None, trial_memory_gb: float | None, location: Any = None):
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
    return WorkerRunner(fn, args, kwargs, jit_kwargs, timing, trial_timeout=trial_timeout,
                        memory_gb=trial_memory_gb, isolate=isolate, location=location)


def open_study(name: str, url: str, search: str, device: dict, attrs: dict[str, Any]) -> Study:
    """Create or resume the study, refusing one measured on another device."""
    study = Study(name, url, 2 if search == "pareto" else 1)
    ran_on = study.attrs.get("device")
    if ran_on is not None and _keys.device_key(ran_on) != _keys.device_key(device):
        study.close()
        raise StudyError(
            f"Study {name!r} in {_paths.redact(url)} was measured on {_keys.device_key(ran_on)}, but this process "
            f"runs on {_keys.device_key(device)}; a study never mixes devices in one ranking. Use another study "
            "name (the default name includes the device) or run this on the study's device.")
    study.set_attrs(device=device, **attrs)
    return study


def tune(fn: Callable, *args: Any, kwargs: dict[str, Any] | None = None, expected_calls: float = 1000,
         compile_weight: float = 1.0, runtime_weight: float = 1.0, n_trials: int | None = None,
         timeout: float | None = None, sampler: str = "auto", storage: str | None = None,
         study_name: str | None = None, function_key: str | None = None, jit_kwargs: dict[str, Any] | None = None,
         seed: int | None = 0, confirm_top: int = 3, confirm_rounds: int = 3, rtol: float | None = None,
         atol: float | None = None, timing: dict[str, Any] | None = None, runner: Any = None,
         progress: bool | None = None, join: bool = False, on_ready: Callable[[str, str], None] | None = None,
         before_finish: Callable[[], None] | None = None, objective: str = "cost",
         trial_timeout: float | None = None, trial_memory_gb: float | None = None, isolate: bool | str = "auto",
         location: Any = None, retune: str | None = None) -> TuneResult | None:
    """Search the loop configs of ``fn`` on ``args`` and return the winner.

    Trial 0 is the default config, measured three times. Every later trial measures a
    config no trial has measured yet (``n_trials`` counts distinct measurements): the whole
    space in order when it fits the budget (``sampler="auto"``), else TPE. Trials whose
    compile alone cannot beat the best cost are pruned (or skipped when their compile
    time is predicted over budget); configs that lower to an already measured program
    share its measurement. The contenders are then re-timed side by side and the winner
    named by :func:`autotune._select.winner`.

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

    Returns:
        A :class:`TuneResult` (None with ``join``).
    """
    started = time.perf_counter()
    kwargs, jit_kwargs = dict(kwargs or {}), dict(jit_kwargs or {})
    goal = Objective(expected_calls, compile_weight, runtime_weight)
    if runner is None:  # started first: the worker imports JAX while this process traces and opens the study
        runner = default_runner(fn, tuple(args), kwargs, jit_kwargs, dict(timing or {}), isolate, trial_timeout,
                                trial_memory_gb, location)
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
        study = open_study(name, url, objective, device, dict(
            function_key=fkey, fingerprint=program.fingerprint, objective=goal.to_dict(), search=objective,
            sites=[s.to_dict() for s in program.sites], default_config=default.to_dict(), space_size=len(space),
            sampler=kind, **({"retune": retune} if retune else {})))
    except BaseException:
        runner.close()
        raise
    try:
        proposer = make_proposer(kind, study, space, seed, budget)
        if on_ready is not None:
            on_ready(url, name)
        with InterruptLatch() as latch, Progress(wanted(progress), budget, f"tuning {fkey}") as bar:
            try:
                search = Search(study, space, runner, goal, objective, proposer, _keys.device_key(device),
                                rtol=rtol, atol=atol, progress=bar, latch=latch)
                search.keep_top = confirm_top
                search.run(budget, None if timeout is None else time.monotonic() + timeout)
                if before_finish is not None:
                    before_finish()
                if join:
                    return None
                bar.update(status="confirming the contenders side by side")
                records = search.records()
                confirmed = confirm(runner, search.points(records), default, goal, top=confirm_top,
                                    rounds=confirm_rounds, check=latch.check, whole_front=objective == "pareto")
            finally:
                runner.close()
            result = _result(study, space, program, signature, device, goal, objective, kind, records,
                             confirmed, url, started)
            bar.update(best="", status=f"winner {result.best_config.label(program.sites)} at {result.best_cost:.4g} s")
        return result
    finally:
        study.close()


def _result(study: Study, space: Space, program, signature: str, device: dict, goal: Objective, search: str,
            kind: str, records: list[TrialRecord], confirmed: list[dict[str, Any]], url: str,
            started: float) -> TuneResult:
    default = space.default()
    if not confirmed:
        raise StudyError(f"Study {study.name!r}: no config compiled and ran, not even the default; see the "
                         "trial reasons (TuneResult.trials, or `autotune report`).")
    choice = _select.choose(confirmed, goal, default=default.to_dict())
    by_text = {_select.config_text(p["config"]): p for p in confirmed}
    best = by_text[_select.config_text(choice.config)]
    dflt = by_text.get(default.to_json(), best)
    stopped, decided = [], set()
    for r in records:
        if r.outcome is None or r.outcome.releases:
            continue
        decided.add(r.config.to_json())
        if r.outcome.stopped:
            stopped.append((r.config.to_dict(), float(r.compile_s_at_least or 0.0)))
    complete = _select.complete_range(confirmed, goal, default=default.to_dict(), stopped=stopped,
                                      unmeasured=max(0, len(space) - len(decided)))
    study.set_attrs(confirmed=confirmed, winner=choice.config, complete_range=_select.range_json(complete))
    return TuneResult(
        best_config=Config.from_dict(choice.config), best_cost=choice.cost,
        best=Measurement.from_dict(best["measurement"]), default_cost=_select.cost(dflt, goal),
        default=Measurement.from_dict(dflt["measurement"]), trials=records, objective=goal, sites=program.sites,
        fingerprint=program.fingerprint, signature=signature, device=device, study_name=study.name, storage=url,
        sampler=kind, space_size=len(space), confirmed=confirmed, default_config=default, complete_range=complete,
        wall_s=time.perf_counter() - started, search=search)


__all__ = ["SAMPLERS", "SEARCHES", "Outcome", "plan", "tune"]
