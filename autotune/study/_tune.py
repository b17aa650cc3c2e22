"""`at.tune`: search a function's loop configs for the lowest cost.

:func:`tune` is the public entry point; :func:`run` the orchestrator every caller ends in
(``fn.tune``, ``autotune tune``), with the options built once (:class:`TuneOptions`) and
the command line's plumbing beside them (:class:`autotune._options.Plumbing`). The end of
a run (the finished check, the contenders, the winner, the result) is ``_finish``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

from autotune import _paths
from autotune._errors import StudyError
from autotune._interrupt import InterruptLatch
from autotune._options import SAMPLERS, SEARCHES, Plumbing, TuneOptions, split_keywords
from autotune.measuring import _host
from autotune.measuring._outcome import counted
from autotune.measuring._runner import InProcessRunner, Outcome
from autotune.measuring._wall import Wall, part
from autotune.program import _keys
from autotune.program._call import Call
from autotune.program._space import unrewritable
from autotune.program._staged import StagedSpace
from autotune.select._objective import DEFAULT, Objective, compilation_cache_on
from autotune.study import _seeded
from autotune.study._confirm import confirm
from autotune.study._finish import (
    Run,
    confirmed_as_is,
    incumbent,
    keep_or_replace,
    nothing_to_measure,
    result,
    serving,
    top_with,
)
from autotune.study._ladder import is_ladder
from autotune.study._load_costs import measure_loads
from autotune.study._optuna import Study
from autotune.study._optuna import storage as open_storage
from autotune.study._progress import Progress, wanted
from autotune.study._result import TuneResult
from autotune.study._search import Search, Watch, record_of
from autotune.study._slowdown import measure_slowdown
from autotune.study._xla_search import settled, xla_proposer, xla_space

DEFAULT_TRIALS = 32
# at.tune's own keywords besides the options (for the nearest-name hint of an unknown one)
_TUNE_KEYWORDS = (
    "kwargs",
    "expected_calls",
    "compile_weight",
    "runtime_weight",
    "processes",
    "compilation_cache",
    "function_key",
    "jit_kwargs",
    "runner",
)


def plan(sampler: str, search: str, space_size: int, n_trials: int | None, ladder: bool = False) -> tuple[str, int]:
    """(sampler kind, trial budget): ``auto`` is the exhaustive grid when the whole space fits
    the budget, else the ladder where the (loop) space is one scan site's (``ladder``,
    :func:`autotune.study._ladder.is_ladder`), else TPE (NSGA-II for a Pareto search). The options
    are valid (`TuneOptions`); ``"ladder"`` asked for where there is none raises StudyError."""
    budget = n_trials if n_trials is not None else DEFAULT_TRIALS
    if sampler == "ladder" and (not ladder or search != "cost"):
        other = "study searches the Pareto front" if ladder else "program's space is not one scan site's"
        raise StudyError(
            f"sampler='ladder' walks one scan site's unroll factors for the weighted cost, and this {other}: "
            "use sampler='auto' (autotune tune --sampler auto)."
        )
    if sampler != "auto":
        kind = sampler
    elif space_size <= budget:
        kind = "grid"
    elif search == "pareto":
        kind = "nsga2"
    else:
        kind = "ladder" if ladder else "tpe"
    if kind == "grid" and n_trials is None:
        budget = space_size
    return kind, min(budget, space_size)


def default_runner(call: Call, options: TuneOptions, location: Any = None):
    """The runner that measures ``call``: a worker process unless ``options.isolate`` is False."""
    if options.isolate is False:
        if options.trial_timeout is not None or options.trial_memory_gb is not None:
            raise StudyError("trial_timeout and trial_memory_gb need a worker process; drop isolate=False.")
        return InProcessRunner(call, options.sampling)
    from autotune.measuring.process._protocol import Location
    from autotune.measuring.process._worker_runner import WorkerRunner

    if location is None:  # a module-level function: a worker can import it if jax.export cannot carry it
        location = Location.of(call.function)
    return WorkerRunner.from_options(call, options, location=location)


def runner_device(runner: Any) -> dict[str, Any]:
    """The device the runner's trials run on: a worker's own report where this process only
    traces (``autotune.measuring._host``), else this process's."""
    info = getattr(runner, "device_info", None)
    return info() if callable(info) else _host.target_device()


def open_study(name: str, url: str, search: str, device: dict, attrs: dict[str, Any], rdb: Any = None) -> Study:
    """Create or resume the study (in ``rdb``, ``url``'s storage where it is open already),
    refusing one measured on another device."""
    study = Study(name, url, 2 if search == "pareto" else 1, rdb)
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
    expected_calls: float = DEFAULT.expected_calls,
    compile_weight: float = DEFAULT.compile_weight,
    runtime_weight: float = DEFAULT.runtime_weight,
    processes: int = DEFAULT.processes,
    compilation_cache: bool | None = None,
    function_key: str | None = None,
    jit_kwargs: dict[str, Any] | None = None,
    runner: Any = None,
    **options: Any,
) -> TuneResult:
    """Search the loop configs of ``fn`` on ``args`` and return the winner.

    Trial 0 is the default config, measured three times. Every later trial measures a
    config no trial has measured yet (``n_trials`` counts distinct measurements): the whole
    space in order when it fits the budget (``sampler="auto"``), else TPE. Trials whose
    compile alone cannot beat the best cost are pruned (or skipped when their compile
    time is predicted over budget); configs that lower to an already measured program
    share its measurement. The contenders are then re-timed side by side and the winner
    named by :func:`autotune.select.winner`; against the study's winner from an earlier
    confirmation, a new pick must also win the paired rounds (``_finish.keep_or_replace``).

    A study that already holds its trials (``n_trials`` counted, or every config taken) and a
    confirmation of exactly those trials is *finished*: nothing is measured, the stored
    confirmation is the result (``TuneResult.finished``), in about the time it takes to trace
    ``fn`` and open the study. ``reconfirm=True`` re-times its contenders anyway.

    Arguments:
        fn, args, kwargs: the function and example inputs (a keyword that is a parameter of
            ``fn`` and no option goes to ``fn`` too).
        expected_calls, compile_weight, runtime_weight, processes: the :class:`Objective`.
        compilation_cache: whether JAX's persistent compilation cache is on where the
            ``processes`` run (None: detected in this process, see ``Objective``).
        function_key: the study's function key (default ``module:qualname``).
        jit_kwargs: ``jax.jit`` keyword arguments (``static_argnums``...).
        runner: a :class:`autotune.Runner` (default: a worker process, see ``isolate``).
        **options: the fields of :class:`autotune.TuneOptions` (``n_trials``, ``timeout``,
            ``sampler``, ``storage``, ``study_name``, ``search``, ``seed``, ``confirm_top``,
            ``confirm_rounds``, ``reconfirm``, ``rtol``, ``atol``, ``timing``,
            ``trial_timeout``, ``trial_memory_gb``, ``isolate``, ``progress``). Any other
            keyword is a :class:`StudyError` naming the nearest option.

    Returns:
        A :class:`TuneResult`.

    Example::

        >>> import jax.numpy as jnp, autotune as at
        >>> f = lambda x: at.loop(lambda c, _: (0.5 * c, None), x, length=8, name="l")[0]
        >>> r = at.tune(f, jnp.ones(4), n_trials=2, isolate=False, progress=False)  # doctest: +SKIP
    """
    chosen, more = split_keywords("at.tune", fn, options, extra=_TUNE_KEYWORDS)
    return run(
        fn,
        args,
        {**(kwargs or {}), **more},
        Objective(expected_calls, compile_weight, runtime_weight, processes, compilation_cache_on(compilation_cache)),
        TuneOptions(**chosen),
        function_key=function_key,
        jit_kwargs=jit_kwargs,
        runner=runner,
    )


def run(
    fn: Callable,
    args: tuple,
    kwargs: dict[str, Any],
    goal: Objective,
    options: TuneOptions,
    *,
    function_key: str | None = None,
    jit_kwargs: dict[str, Any] | None = None,
    runner: Any = None,
    plumbing: Plumbing | None = None,
    storage_default: str | None = None,
) -> TuneResult | None:
    """The run behind :func:`tune` and ``fn.tune``: ``options`` as given, ``plumbing`` from the
    command line (``join``: measure trials only and return None; ``on_ready``,
    ``before_finish``: start and wait for helpers; ``retune``: stored in the study;
    ``location``: where a worker imports ``fn`` from); ``storage_default``: the storage when
    ``options.storage`` is None (``fn.tune``: beside its cache; else the user's default)."""
    with Wall() as wall:  # where the run's seconds go, by part and stage (`autotune.measuring._wall`)
        out = _run(fn, args, kwargs, goal, options, function_key, jit_kwargs, runner, plumbing, storage_default)
    if out is not None:
        out.wall = wall.report()
    return out


def _run(
    fn: Callable,
    args: tuple,
    kwargs: dict[str, Any],
    goal: Objective,
    options: TuneOptions,
    function_key: str | None,
    jit_kwargs: dict[str, Any] | None,
    runner: Any,
    plumbing: Plumbing | None,
    storage_default: str | None,
) -> TuneResult | None:
    started = time.perf_counter()
    plumbing = plumbing or Plumbing()
    goal = options.goal(goal)  # tier_up=True: the tiered cost decides
    call = Call(fn, args, kwargs, jit_kwargs)
    args, kwargs, jit_kwargs = call.args, call.kwargs, call.jit_kwargs
    if runner is None:  # started first: the worker imports JAX while this process traces and opens the study
        runner = default_runner(call, options, plumbing.location)
        runner.start()
    try:
        program, signature = _keys.program_key(fn, args, kwargs, jit_kwargs)
        storage = options.storage or storage_default
        url = _paths.storage_url(storage) if storage else _paths.default_storage_url()
        rdb = open_storage(url)  # opened while the worker still starts (Optuna's storage imports for a second or two)
        device = runner_device(runner)
        goal = goal.on_device(device.get("bytes_limit"))  # a fraction of the device's memory, in bytes
        device = _keys.under_budget(device, goal.budget_bytes)  # the budget keys the study and the entry
        fkey = function_key or _keys.function_key(fn)
        name = options.study_name or _keys.study_name(
            fkey, program.fingerprint, signature, device, goal, options.search, options.timing_mode
        )
        study = open_study(
            name,
            url,
            options.search,
            device,
            dict(
                function_key=fkey,
                fingerprint=program.fingerprint,
                objective=goal.to_dict(),
                search=options.search,
                sites=[s.to_dict() for s in program.sites],
                **({"retune": plumbing.retune} if plumbing.retune else {}),
            ),
            rdb,
        )
        try:
            space = xla_space(options, device, study, program.sites)
            loops = space.loops() if isinstance(space, StagedSpace) else space
            kind, budget = plan(options.sampler, options.search, len(space), options.n_trials, is_ladder(loops))
            study.set_attrs(default_config=space.default().to_dict(), space_size=len(space), sampler=kind)
        except BaseException:
            study.close()
            raise
    except BaseException:
        runner.close()
        raise
    state = Run(study, space, program, signature, device, goal, options.search, kind, url, started)
    try:
        return _search_and_confirm(state, call, runner, options, plumbing, fkey, budget)
    finally:
        study.close()


def _search_and_confirm(
    state: Run,
    call: Call,
    runner,
    options: TuneOptions,
    plumbing: Plumbing,
    fkey: str,
    budget: int,
) -> TuneResult | None:
    study, space, goal = state.study, state.space, state.objective
    views = study.trials(space)
    held = [record_of(v, goal) for v in views]
    before = counted(views)
    seeding = _seeded.planned(state, options, plumbing, budget, views)  # neighbours' configs first
    proposer = xla_proposer(state, options.seed, budget)
    done = getattr(proposer, "done", None)  # a search that ends by itself (the ladder's walk) has ended
    walked = done is not None and (seeding is None or seeding.verdict is not None) and done(views)
    idle = nothing_to_measure(views, len(space), budget) or _seeded.stopped(seeding) or walked
    title = f"tuning {fkey}"
    if idle and (plumbing.join or (not options.reconfirm and confirmed_as_is(study, held))):
        runner.close()  # a finished study: no trial, no confirmation, no helper
        if plumbing.join:
            return None
        finished = result(state, held, None)
        finished.seeding = seeding
        with Progress(wanted(options.progress), budget, title, completed=min(budget, before)) as bar:
            bar.update(status="finished: nothing new to measure")
        return finished
    if plumbing.on_ready is not None:
        plumbing.on_ready(state.url, study.name)
    load_notes: list[str] = []
    with (
        InterruptLatch() as latch,
        Progress(wanted(options.progress), budget, title, completed=min(budget, before)) as bar,
    ):  # a resumed study's trials
        try:
            search = Search(
                study,
                space,
                runner,
                goal,
                proposer,
                _keys.device_key(state.device),
                options=options,
                watch=Watch(bar, latch),
                unrewritable=lambda c: unrewritable(call.function, call.args, call.kwargs, call.jit_kwargs, space, c),
            )
            if not idle:  # an idle search would only measure the default again, for the guard
                with part("search"):
                    deadline = None if options.timeout is None else time.monotonic() + options.timeout
                    seeding = _seeded.search(search, seeding, budget, deadline)
                state = settled(state)  # "auto" may have declined the XLA stage: the loop space
            if plumbing.before_finish is not None:
                plumbing.before_finish()
            if plumbing.join:
                return None
            bar.update(status="confirming the contenders side by side")
            records = search.records()
            points = search.points(records)
            default = space.default()
            serve = serving(state, records)  # the pick alone where configs were left unmeasured
            top = top_with(points, incumbent(study.attrs, goal), default, goal, options.confirm_top, serve)
            with part("confirmation"):
                confirmed = confirm(
                    runner,
                    points,
                    default,
                    goal,
                    top=top,
                    rounds=options.confirm_rounds,
                    check=latch.check,
                    serve=serve,
                    platform=state.device["platform"],
                )
            if goal.tier_up:
                bar.update(status="timing the default's calls beside a compile (tier-up)")
                with part("tier-up"):
                    confirmed, slowdown_notes = measure_slowdown(runner, confirmed, default, goal, latch.check)
                for note in slowdown_notes:
                    warnings.warn(f"autotune: {note}", RuntimeWarning, stacklevel=2)
            if goal.shared:
                from autotune.measuring.process._load_probe import loader

                runner.close()  # the loads run in fresh processes, which need the device this worker holds
                bar.update(status="measuring the load of the contenders from a persistent compilation cache")
                load = loader(runner, call)
                with part("loads"):
                    confirmed, load_notes = measure_loads(confirmed, default, goal, load, latch.check)
        finally:
            with part("finish"):
                runner.close()
        out = result(state, records, confirmed, new_trials=counted(records) - counted(held))
        out.load_notes = load_notes
        out.seeding = seeding
        summary = getattr(runner, "compile_summary", None)  # where the compiles ran (builders or the worker)
        out.compiled_in = summary() if callable(summary) else None
        bar.update(best="", status=f"winner {out.best_config.label(state.program.sites)} at {out.best_cost:.4g} s")
    return out


__all__ = [
    "SAMPLERS",
    "SEARCHES",
    "Outcome",
    "TuneOptions",
    "keep_or_replace",
    "nothing_to_measure",
    "plan",
    "run",
    "tune",
]
