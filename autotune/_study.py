"""The Optuna driver: search a program's loop configs for the lowest cost."""

from __future__ import annotations

import json
import math
import os
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _keys, _paths
from ._config import Config
from ._errors import StudyError
from ._measure import Measurement
from ._objective import Objective
from ._pareto import pareto_front as pareto_front
from ._runner import InProcessRunner as InProcessRunner, TrialFailed
from ._sites import LoopSite, trace_program
from ._space import Space

SAMPLERS = ("auto", "tpe", "grid", "random", "nsga2")
SEARCHES = ("cost", "pareto")


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a study: the config, what happened, and what it measured."""

    number: int
    config: Config
    state: str  # "complete" | "fail" | "pruned" | "rejected" | "duplicate" | "timeout" | "crashed" | "oom" | "error" | "interrupted"
    cost: float | None = None
    reason: str | None = None
    measurement: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "config": self.config.to_dict(), "state": self.state,
                "cost": self.cost, "reason": self.reason, "measurement": self.measurement}


@dataclass
class TuneResult:
    """What a study found.

    Attributes:
        best_config: the winner after interleaved re-measurement of the top configs.
        best_cost: its cost under ``objective``; ``best`` its confirmed measurement.
        default_cost: the default config's confirmed cost (the winner is never worse
            than the default by the confirmation's own numbers).
        trials: one :class:`TrialRecord` per trial of the study, resumed ones included.
        pareto: the (compile, run) Pareto set of accepted configs, as dicts.
    """

    best_config: Config
    best_cost: float
    best: Measurement
    default_cost: float
    default: Measurement
    trials: list[TrialRecord]
    objective: Objective
    sites: list[LoopSite]
    fingerprint: str
    signature: str
    device: dict[str, Any]
    study_name: str
    storage: str
    sampler: str
    space_size: int
    pareto: list[dict[str, Any]] = field(default_factory=list)
    confirmed: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    search: str = "cost"  # "cost" (one weighted objective) | "pareto" (NSGA-II on compile_s, run_s)

    @property
    def speedup(self) -> float:
        return self.default_cost / self.best_cost if self.best_cost > 0 else math.inf

    def rescore(self, objective: Objective) -> tuple[Config, float]:
        """The best Pareto config for another objective, without measuring again."""
        best = min(self.pareto, key=lambda p: (objective.cost_of(p["compile_s"], p["run_s"]), json.dumps(p["config"], sort_keys=True)))
        return Config.from_dict(best["config"]), objective.cost_of(best["compile_s"], best["run_s"])


def _tolerance(dtype: np.dtype, rtol: float | None, atol: float | None) -> tuple[float, float]:
    if rtol is not None and atol is not None:
        return rtol, atol
    if np.issubdtype(dtype, np.inexact):
        eps = float(np.finfo(dtype).eps) if dtype != np.dtype("bfloat16") else 2.0 ** -7
        r, a = max(1e-12, 1000 * eps), max(1e-12, 1000 * eps)
    else:
        r, a = 0.0, 0.0
    return (rtol if rtol is not None else r), (atol if atol is not None else a)


def compare_outputs(reference: Any, candidate: Any, rtol: float | None = None, atol: float | None = None) -> str | None:
    """None if ``candidate`` matches ``reference`` within the dtype's tolerance, else why not.

    The default tolerance is 1000 ulps of the dtype relative to the output's scale,
    which admits the float re-association that unrolling may cause.
    """
    import jax

    ref_leaves = jax.tree_util.tree_leaves(reference)
    cand_leaves = jax.tree_util.tree_leaves(candidate)
    if len(ref_leaves) != len(cand_leaves):
        return f"outputs have {len(cand_leaves)} leaves, the default config's have {len(ref_leaves)}"
    for i, (r, c) in enumerate(zip(ref_leaves, cand_leaves)):
        r, c = np.asarray(r), np.asarray(c)
        if r.shape != c.shape or r.dtype != c.dtype:
            return f"output leaf {i} is {c.dtype}{list(c.shape)}, the default's is {r.dtype}{list(r.shape)}"
        if r.size == 0:
            continue
        rt, at = _tolerance(r.dtype, rtol, atol)
        r64, c64 = r.astype(np.float64), c.astype(np.float64)
        scale = float(np.nanmax(np.abs(r64))) if np.isfinite(r64).any() else 1.0
        diff = np.abs(r64 - c64)
        bad = ~((diff <= at * max(scale, 1.0) + rt * np.abs(r64)) | (np.isnan(r64) & np.isnan(c64)) | (r64 == c64))
        if bad.any():
            return (f"output leaf {i} differs from the default config's by up to {float(np.nanmax(diff)):.3g} "
                    f"(rtol={rt:.3g}, atol={at:.3g} x scale {max(scale, 1.0):.3g})")
    return None


def _default_runner(fn: Callable, args: tuple, kwargs: dict, jit_kwargs: dict, timing: dict,
                    isolate: bool | str, trial_timeout: float | None, trial_memory_gb: float | None):
    """The runner tune() measures with when none is given: a worker process unless isolate=False."""
    if isolate not in ("auto", True, False):
        raise StudyError(f"isolate={isolate!r} must be 'auto', True or False.")
    if isolate is False:
        if trial_timeout is not None or trial_memory_gb is not None:
            raise StudyError("trial_timeout and trial_memory_gb need a worker process; drop isolate=False.")
        return InProcessRunner(fn, args, kwargs, jit_kwargs, timing)
    from .worker import WorkerRunner

    return WorkerRunner(fn, args, kwargs, jit_kwargs, timing, trial_timeout=trial_timeout,
                        memory_gb=trial_memory_gb, isolate=isolate)


def _measure_trial(runner, config: Config, study, objective: Objective) -> Measurement:
    """``runner.measure(config)``, with a compile budget (best cost / compile weight) once a
    best cost exists: past it, the config cannot win."""
    budget = None
    if len(study.directions) == 1 and objective.compile_weight > 0:
        try:
            best = study.best_value
        except ValueError:  # no complete trial yet
            best = None
        if best is not None and math.isfinite(best):
            budget = best / objective.compile_weight
    return runner.measure(config, compile_budget_s=budget)


def probe_program(fn: Callable, args: Sequence[Any], kwargs: dict[str, Any], jit_kwargs: dict[str, Any]):
    """The program and abstract signature exactly as ``jax.jit(fn, **jit_kwargs)`` sees them.

    Tracing under a throw-away jit makes Python scalars weak-typed tracers and
    static arguments concrete, just as at the decorator's trace time, so the
    fingerprint and signature computed here match the ones looked up there.
    """
    import jax

    found: dict[str, Any] = {}
    probe_kwargs = {k: v for k, v in jit_kwargs.items() if k in ("static_argnums", "static_argnames")}

    def probe(*a, **k):
        found["signature"] = _keys.signature(a, k)
        found["program"] = trace_program(fn, a, k)

    jax.jit(probe, **probe_kwargs).trace(*args, **kwargs)
    return found["program"], found["signature"]


def _create_study(**kwargs):
    """``optuna.create_study``, retried while another process creates Optuna's tables in
    the same empty database (workers started together on a fresh PostgreSQL database race
    on ``CREATE TYPE``/``CREATE TABLE`` and the losers fail with "already exists":
    optuna/optuna#1092)."""
    import optuna

    for attempt in range(6):
        try:
            return optuna.create_study(**kwargs)
        except Exception as exc:
            if attempt == 5 or "already exists" not in str(exc):
                raise
            time.sleep(0.1 * 2 ** attempt)


def _make_sampler(name: str, seed: int | None, n_trials: int):
    import optuna

    if name == "tpe":
        return optuna.samplers.TPESampler(
            seed=seed, multivariate=True, group=True, n_startup_trials=max(3, min(10, n_trials // 3)),
        )
    if name == "nsga2":  # small generations, so that a short budget still evolves
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(50, n_trials // 3)))
    return optuna.samplers.RandomSampler(seed=seed)


def study_name_for(function_key: str, fingerprint: str, signature: str, device: dict, objective: Objective,
                   search: str = "cost") -> str:
    """The default study name. A ``search="pareto"`` study does not depend on the
    objective (it minimises compile and run seconds separately), so its name ends in
    ``/pareto`` and every call count re-uses it."""
    head = f"{function_key}@{fingerprint[:10]}/{_keys.short_hash(signature, 8)}/{device['platform']}:{device['device_kind']}/"
    if search == "pareto":
        return head + "pareto"
    return head + (f"calls={objective.expected_calls:g},"
                   f"cw={objective.compile_weight:g},rw={objective.runtime_weight:g}")


def _record(trial, objective: Objective | None = None) -> TrialRecord:
    attrs = trial.user_attrs
    config = Config.from_dict(json.loads(attrs.get("config", "{}")))
    state = attrs.get("outcome") or trial.state.name.lower()
    values = trial.values
    if not values:
        cost = None
    elif len(values) == 1:
        cost = values[0]
    else:  # a multi-objective trial: values are (compile_s, run_s); its cost is the objective's
        cost = objective.cost_of(values[0], values[1]) if objective is not None else None
    return TrialRecord(
        number=trial.number, config=config, state=state, cost=cost,
        reason=attrs.get("reason"), measurement=attrs.get("measurement"),
    )


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
    progress: bool = False,
    join: bool = False,
    on_ready: Callable[[str, str], None] | None = None,
    before_finish: Callable[[], None] | None = None,
    objective: str = "cost",
    trial_timeout: float | None = None,
    trial_memory_gb: float | None = None,
    isolate: bool | str = "auto",
) -> TuneResult | None:
    """Search the loop configs of ``fn`` on ``args`` and return the cheapest.

    Trial 0 is always the default config. A space of at most ``n_trials`` configs
    (32 when ``n_trials`` is None) is searched exhaustively (``sampler="auto"``);
    a larger one with TPE. Every trial stores its trace/lower/compile/run seconds as
    user attributes, so a study can be re-scored for another call count. The top
    ``confirm_top`` configs and the default are then re-measured interleaved
    (A B C A B C ...) ``confirm_rounds`` times and the winner picked on those medians.

    Arguments:
        fn, args, kwargs: the function and example inputs.
        expected_calls, compile_weight, runtime_weight: the :class:`Objective`.
        n_trials, timeout: the budget (trials and/or seconds).
        sampler: ``"auto" | "tpe" | "grid" | "random" | "nsga2"``.
        storage: an Optuna storage URL or file path (default: ``studies.db`` beside the cache);
            re-running with the same storage and study resumes it.
        study_name: default derived from the function, program, signature, device and objective.
        jit_kwargs: ``jax.jit`` keyword arguments (``static_argnums``...).
        rtol, atol: the correctness guard's tolerance (default from the output dtype).
        join: only run trials on an existing study (another process enqueued it and
            will confirm the winner); returns None.
        on_ready: called with (storage URL, study name) once the study is enqueued,
            e.g. to start more workers on it; before_finish: called before confirmation.
        objective: ``"cost"`` searches the weighted cost; ``"pareto"`` searches the
            (compile_s, run_s) trade-off with NSGA-II (two objectives, both minimised;
            ``sampler="auto"`` means ``"nsga2"``) in a study that serves every call
            count, then confirms and picks the front's best config for ``expected_calls``.

        trial_timeout: seconds one trial (trace + lower + compile + run) may take before its
            worker is killed (state ``"timeout"``); None for no limit.
        trial_memory_gb: the worker's memory cap (``RLIMIT_DATA``) in GiB, or None.
        isolate: ``"auto"`` (default) measures in a worker process (``autotune.worker``),
            in-process with one warning for a program that cannot be isolated; ``True``
            raises instead; ``False`` measures in this process. Once a best cost exists, a
            worker trial whose compile alone reaches it is stopped and recorded as pruned.
    Returns:
        A :class:`TuneResult`.
    """
    import optuna

    if sampler not in SAMPLERS:
        raise StudyError(f"sampler={sampler!r} is not one of {list(SAMPLERS)}.")
    if n_trials is not None and (not isinstance(n_trials, int) or n_trials < 1):
        raise StudyError(f"n_trials={n_trials!r} must be a positive integer.")
    search = objective  # the name `objective` is the Objective below
    if search not in SEARCHES:
        raise StudyError(f"objective={search!r} is not one of {list(SEARCHES)}.")
    started = time.perf_counter()
    kwargs = dict(kwargs or {})
    jit_kwargs = dict(jit_kwargs or {})
    objective = Objective(expected_calls, compile_weight, runtime_weight)
    program, signature = probe_program(fn, args, kwargs, jit_kwargs)
    space = Space(program.sites)
    device = _keys.device_info()
    fkey = function_key or _keys.function_key(fn)
    name = study_name or study_name_for(fkey, program.fingerprint, signature, device, objective, search)
    storage_url = _paths.storage_url(storage) if storage else _paths.default_storage_url()
    if storage_url.startswith("sqlite:///") and ":memory:" not in storage_url:
        os.makedirs(os.path.dirname(storage_url[len("sqlite:///"):]) or ".", exist_ok=True)

    budget = n_trials if n_trials is not None else 32
    if sampler != "auto":
        kind = sampler
    else:
        kind = "nsga2" if search == "pareto" else ("grid" if len(space) <= budget else "tpe")
    if kind == "grid" and n_trials is None:
        budget = len(space)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    study = _create_study(
        study_name=name, storage=storage_url, directions=["minimize"] * (2 if search == "pareto" else 1),
        sampler=_make_sampler(kind, seed, budget), load_if_exists=True,
    )
    if len(study.directions) != (2 if search == "pareto" else 1):
        raise StudyError(
            f"Study {name!r} in {storage_url} has {len(study.directions)} objective(s), but objective={search!r} "
            f"needs {2 if search == 'pareto' else 1}; pass another study_name (the default names differ)."
        )
    ran_on = study.user_attrs.get("device")
    if ran_on is not None and _keys.device_key(ran_on) != _keys.device_key(device):
        raise StudyError(
            f"Study {name!r} in {storage_url} was measured on {_keys.device_key(ran_on)}, but this process "
            f"runs on {_keys.device_key(device)}; a study never mixes devices in one ranking. Use another "
            "study name (the default name includes the device) or run this on the study's device."
        )
    study.set_user_attr("function_key", fkey)
    study.set_user_attr("fingerprint", program.fingerprint)
    study.set_user_attr("device", device)
    study.set_user_attr("objective", objective.to_dict())
    study.set_user_attr("search", search)
    study.set_user_attr("sites", [s.to_dict() for s in program.sites])

    done = _completed(study, exclude=-1)
    default = space.default()
    if not join:
        seen = _configs_in_study(study, space)
        # Trial 0 is the default, so the result is never worse than what the user had.
        for config in ([default] + list(space.configs())[1:]) if kind == "grid" else [default]:
            if config.to_json() not in seen:
                study.enqueue_trial(space.to_params(config))
                seen.add(config.to_json())

    if on_ready is not None:
        on_ready(storage_url, name)
    runner = runner or _default_runner(fn, tuple(args), kwargs, jit_kwargs, dict(timing or {}), isolate,
                                       trial_timeout, trial_memory_gb)
    reference = None
    reporter = _Reporter(progress, budget, name)
    interrupt = _DeferredInterrupt()
    try:
        interrupt.__enter__()
        reference = _reference_outputs(runner, default, done)
        while True:
            interrupt.check()
            if timeout is not None and time.perf_counter() - started > timeout:
                break
            if kind == "grid" and not _has_waiting(study):
                break
            if kind != "grid" and _started(study) >= budget:
                break
            trial = study.ask()
            config = space.suggest(trial)
            trial.set_user_attr("config", config.to_json())
            trial.set_user_attr("device", _keys.device_key(device))
            key = config.to_json()
            # Owner first, then completed: states only move forward, so no trial slips between the two reads.
            running = _running_with(study, key, exclude=trial.number, space=space)
            done.update(_completed(study, exclude=trial.number))
            if key in done or running is not None:
                prior = done.get(key)
                trial.set_user_attr("outcome", "duplicate")
                if prior is not None:
                    trial.set_user_attr("reason", f"same config as trial {prior.number}; not measured again")
                    trial.set_user_attr("measurement", prior.measurement)
                    study.tell(trial, prior.value)
                else:
                    trial.set_user_attr("reason", f"same config as trial {running} (taken by another worker, or failed or pruned); not measured twice")
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                reporter.advance(study)
                continue
            try:
                m = _measure_trial(runner, config, study, objective)
            except TrialFailed as exc:  # timeout, crash, out of memory, pruned: a result, not a crash
                trial.set_user_attr("outcome", exc.state)
                trial.set_user_attr("reason", exc.reason[:2000])
                study.tell(trial, state=optuna.trial.TrialState.PRUNED if exc.state == "pruned"
                           else optuna.trial.TrialState.FAIL)
                reporter.advance(study)
                continue
            except KeyboardInterrupt:  # Ctrl-C: close this trial, so a resumed study does not wait on it
                trial.set_user_attr("outcome", "interrupted")
                trial.set_user_attr("reason", "interrupted (Ctrl-C) while being measured")
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                raise
            except Exception as exc:  # a config that does not compile or run is a result, not a crash
                trial.set_user_attr("outcome", "fail")
                trial.set_user_attr("reason", f"{type(exc).__name__}: {exc}"[:2000])
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                reporter.advance(study)
                continue
            trial.set_user_attr("measurement", m.to_dict())
            if reference is None and config != default:
                # Another worker has the default's trial: the guard compares with the default's outputs here too.
                reference = _reference_outputs(runner, default, {default.to_json(): None})
            if reference is None:
                reference = m.outputs
            why = compare_outputs(reference, m.outputs, rtol, atol) if m.outputs is not None else None
            if why is not None:
                trial.set_user_attr("outcome", "rejected")
                trial.set_user_attr("reason", f"correctness guard: {why}")
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                told = [m.compile_total_s, m.run_s] if search == "pareto" else objective.cost(m)
                study.tell(trial, told)
                done[key] = _Done(trial.number, told, m.to_dict())
            reporter.advance(study)
        if before_finish is not None:
            before_finish()
        trials = [_record(t, objective) for t in study.get_trials(deepcopy=False)]
        confirmed = [] if join else _confirm(runner, trials, default, objective, confirm_top, confirm_rounds,
                                             interrupt.check)
    finally:
        interrupt.__exit__(None, None, None)
        reporter.close()
        runner.close()
    if join:
        return None

    if not confirmed:
        raise StudyError(f"Study {name!r}: no config compiled and ran, not even the default; see the trial reasons.")
    best = pick_winner(confirmed, default)
    default_row = next(c for c in confirmed if Config.from_dict(c["config"]) == default)
    points = {
        t.config.to_json(): {"config": t.config.to_dict(), "compile_s": _compile_total(t.measurement),
                             "run_s": t.measurement["run_s"]}
        for t in trials if t.state == "complete" and t.measurement
    }
    for c in confirmed:  # the confirmation's medians replace single-trial numbers
        points[Config.from_dict(c["config"]).to_json()] = {
            "config": c["config"], "compile_s": c["compile_s"], "run_s": c["run_s"]}
    points = list(points.values())
    study.set_user_attr("confirmed", confirmed)
    return TuneResult(
        best_config=Config.from_dict(best["config"]), best_cost=best["cost"],
        best=Measurement.from_dict(best["measurement"]), default_cost=default_row["cost"],
        default=Measurement.from_dict(default_row["measurement"]), trials=trials, objective=objective,
        sites=program.sites, fingerprint=program.fingerprint, signature=signature, device=device,
        study_name=name, storage=storage_url, sampler=kind, space_size=len(space),
        pareto=pareto_front(points), confirmed=confirmed, wall_s=time.perf_counter() - started, search=search,
    )


@dataclass(frozen=True)
class _Done:
    """A config already measured in this study."""

    number: int
    value: Any  # the cost, or [compile_s, run_s] in a pareto study
    measurement: dict[str, Any] | None


def _configs_in_study(study, space: Space) -> set[str]:
    """Config keys of every trial, waiting (enqueued) ones included; not those a Ctrl-C interrupted."""
    seen = set()
    for t in study.get_trials(deepcopy=False):
        if t.user_attrs.get("outcome") == "interrupted":
            continue
        if t.user_attrs.get("config"):
            seen.add(t.user_attrs["config"])
        elif t.state.name == "WAITING":
            seen.add(space.from_params(t.system_attrs.get("fixed_params", {})).to_json())
    return seen


def _told(t) -> Any:
    """What a complete trial was told: its value, or its (compile_s, run_s) values in a pareto study."""
    values = t.values
    if not values:
        return None
    return values[0] if len(values) == 1 else list(values)


def _completed(study, exclude: int) -> dict[str, _Done]:
    return {t.user_attrs["config"]: _Done(t.number, _told(t), t.user_attrs.get("measurement"))
            for t in study.get_trials(deepcopy=False)
            if t.number != exclude and t.state.name == "COMPLETE" and t.user_attrs.get("config")
            and t.user_attrs.get("outcome") != "duplicate"}


def _running_with(study, key: str, exclude: int, space: Space | None = None, wait_s: float = 2.0) -> int | None:
    """The lower-numbered trial that owns config ``key`` (waiting, running, or finished:
    complete, failed, pruned), or None.

    A config is measured by its lowest-numbered trial, so two workers that draw the same
    config at once never both measure it nor both skip it (a symmetric "skip if another
    runs it" loses the config when both see each other). Duplicates and interrupted
    trials own nothing. An enqueued trial's config is known from its fixed params from
    the start; a lower-numbered trial still choosing its config (between ``ask`` and its
    "config" attribute, milliseconds) is waited for, up to ``wait_s`` (a crashed
    worker's trial is then ignored).
    """
    deadline = time.monotonic() + wait_s
    while True:
        choosing = False
        for t in study.get_trials(deepcopy=False):
            if t.number >= exclude or t.user_attrs.get("outcome") in ("duplicate", "interrupted"):
                continue
            config = t.user_attrs.get("config")
            if config is None and space is not None and "fixed_params" in t.system_attrs:
                config = space.from_params(t.system_attrs["fixed_params"]).to_json()
            if config == key:
                return t.number
            choosing = choosing or (config is None and t.state.name == "RUNNING")
        if not choosing or time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def _started(study) -> int:
    """Trials that count toward the budget: enqueued-but-waiting ones do not."""
    return sum(1 for t in study.get_trials(deepcopy=False) if t.state.name != "WAITING")


def _has_waiting(study) -> bool:
    return any(t.state.name == "WAITING" for t in study.get_trials(deepcopy=False))


def _compile_total(m: dict[str, Any]) -> float:
    return float(m["trace_s"]) + float(m["lower_s"]) + float(m["compile_s"])


def _reference_outputs(runner, default: Config, done: dict) -> Any:
    """The default config's outputs, for the correctness guard (measured now when resuming)."""
    if default.to_json() not in done:
        return None
    try:
        return runner.measure(default).outputs
    except Exception:
        return None


def _confirm(runner, trials, default: Config, objective: Objective, top: int, rounds: int,
             check_interrupt: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """Re-measure the best configs and the default interleaved; medians decide."""
    complete = sorted((t for t in trials if t.state == "complete" and t.cost is not None), key=lambda t: t.cost)
    candidates: list[Config] = []
    for t in complete:
        if t.config not in candidates:
            candidates.append(t.config)
        if len(candidates) >= top:
            break
    if default not in candidates:
        candidates.append(default)
    samples: dict[Config, list[Measurement]] = {c: [] for c in candidates}
    for _ in range(max(1, rounds)):
        for config in candidates:
            check_interrupt()
            try:
                samples[config].append(runner.measure(config))
            except Exception:
                samples[config].append(None)
    out = []
    for config, per_round in samples.items():
        ms = [m for m in per_round if m is not None]
        if not ms:
            continue
        med = Measurement(
            trace_s=statistics.median(m.trace_s for m in ms), lower_s=statistics.median(m.lower_s for m in ms),
            compile_s=statistics.median(m.compile_s for m in ms), run_s=statistics.median(m.run_s for m in ms),
            run_iqr_s=statistics.median(m.run_iqr_s for m in ms), reps=sum(m.reps for m in ms),
            config=config, memory=ms[-1].memory, flops=ms[-1].flops,
        )
        out.append({"config": config.to_dict(), "cost": objective.cost(med), "compile_s": med.compile_total_s,
                    "run_s": med.run_s, "rounds": len(ms), "measurement": med.to_dict(),
                    "round_costs": [None if m is None else objective.cost(m) for m in per_round]})
    return out


def pick_winner(confirmed: list[dict[str, Any]], default: Config) -> dict[str, Any]:
    """The confirmed config with the lowest median cost, if it beat the default.

    A challenger must be cheaper than the default in a majority of the interleaved
    rounds (paired, so drift on a shared machine hits both alike); a lower median
    alone can be noise, and then the default stays.
    """
    default_row = next(c for c in confirmed if Config.from_dict(c["config"]) == default)
    best = min(confirmed, key=lambda c: (c["cost"], c["config"] != default.to_dict()))
    if best is default_row:
        return best
    pairs = [(b, d) for b, d in zip(best.get("round_costs", []), default_row.get("round_costs", []))
             if b is not None and d is not None]
    wins = sum(1 for b, d in pairs if b < d)
    return best if pairs and 2 * wins > len(pairs) else default_row


class _DeferredInterrupt:
    """Ctrl-C during tuning is acted on between steps, never mid-write.

    Python raises KeyboardInterrupt wherever the main thread happens to be, and inside
    a garbage-collector callback (JAX and SQLAlchemy register some) it is printed as
    "Exception ignored" and lost. So the first Ctrl-C only sets a flag that the study
    checks between trials (a worker measuring a trial is stopped at once by its own
    latch); a second Ctrl-C raises immediately.
    """

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        import signal
        import threading

        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def check(self) -> None:
        if self.requested:
            self.requested = False
            raise KeyboardInterrupt

    def __exit__(self, *exc):
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        return False


class _Reporter:
    """A rich progress bar with the best cost so far (on stderr), or nothing."""

    def __init__(self, enabled: bool, total: int, name: str):
        self.progress = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("[bold]tuning[/bold]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[best]}"), console=Console(stderr=True), transient=False,
        )
        self.task = self.progress.add_task("tune", total=total, best="")
        self.progress.start()

    def advance(self, study) -> None:
        if self.progress is None:
            return
        try:
            if len(study.directions) > 1:  # a pareto study has a front, not a best value
                best = f"Pareto front of {len(study.best_trials)}"
            else:
                best = f"best cost {study.best_value:.4g}"
        except ValueError:
            best = "no complete trial yet"
        self.progress.update(self.task, advance=1, best=best)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
