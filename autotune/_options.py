"""`TuneOptions`: how a tuning run searches, built once and handed down unchanged.

``fn.tune(...)``, ``at.tune(...)`` and ``autotune tune`` build one :class:`TuneOptions`; the
study (``study/_tune``) and the runner (``study/_tune.default_runner``, ``WorkerRunner``)
read it under the same names, so a name means one thing all the way down. What the command
line adds (helper processes, the stored re-tune command, where a worker imports the
function from) travels beside it in the private :class:`Plumbing`, never in a public
signature. Only the standard library and autotune's light modules (no JAX) are imported here.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from autotune._errors import StudyError, warn_user_once
from autotune.measuring._sampling import NAMES as SAMPLING_NAMES
from autotune.measuring._sampling import TIMING_MODES, Sampling, timing_mode_error
from autotune.select._budget import parse as parse_budget

SAMPLERS = ("auto", "tpe", "grid", "random", "nsga2", "ladder")
SEARCHES = ("cost", "pareto")


def _positive(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@dataclass(frozen=True)
class TuneOptions:
    """How a tuning run searches: every option of ``fn.tune`` / ``at.tune`` in one frozen value.

    Attributes:
        n_trials: distinct configs to measure (default None: 32, or the whole space when
            the grid fits).
        timeout: seconds for the search (None: no limit); the confirmation comes after it.
        sampler: ``"auto"`` (the grid when it fits the budget, else the ladder for one scan
            site, else TPE; NSGA-II for a Pareto search), ``"tpe"``, ``"grid"``, ``"random"``,
            ``"nsga2"`` or ``"ladder"`` (one scan site's unroll factors walked from the
            default until the cost stops falling, `autotune.study._ladder`).
        storage: the Optuna storage URL or file path (None: ``studies.db`` beside the cache).
        study_name: the study's name (None: derived from the function, program, signature,
            device and objective); running again with the same name resumes it.
        search: ``"cost"`` searches the weighted cost; ``"pareto"`` the (compile, run)
            trade-off with NSGA-II, then picks the front's winner for ``expected_calls``.
        seed: the sampler's seed (default 0; None draws one).
        confirm_top: how many of the cheapest configs to re-time side by side with the default (default 3;
            at least one besides the default, so a default that won the search meets its runner-up).
        confirm_rounds: in how many rounds (default 3).
        reconfirm: re-time the contenders of a finished study (default False).
        rtol, atol: override the correctness guard's tolerances (default None: per dtype).
        timing: how runtime is timed: a dict of ``mode`` (``"steady"``: calls dispatched back to
            back, the default; ``"blocking"``: each call waited for on its own, for a program that
            serves one request at a time; ``"device"``: the device's own time from JAX's profiler,
            the steady state where the platform gives none) and the sampling options of
            :func:`autotune.measure` (``warmup``, ``min_reps``, ``max_reps``, ``target_s``);
            a mode alone as a string (``timing="blocking"``), or an
            :class:`autotune.measuring.Sampling`; default None: the defaults. The options hold
            it as one frozen :class:`~autotune.measuring.Sampling` (None stays None).
        trial_timeout: seconds one trial may take in the worker process (default None).
        trial_memory_gb: the worker process's memory cap in GiB (default None).
        isolate: ``"auto"`` (default) measures in a worker process (in-process, with one
            warning, for a program that cannot be isolated), ``True`` raises instead,
            ``False`` measures in this process.
        progress: show progress on stderr (default None: when stderr is a terminal).
        xla: search XLA compile options per function too (``xla:O1``...), on the best loop configs
            once the loop configs are searched: ``True``, ``False`` or ``"auto"`` (default:
            :func:`autotune.study._xla_search.searched` decides, on those best configs' measurements).
        builders: processes that compile configs on this machine's cores while the worker
            process measures others (it then only loads their executables): a number, 0 (compile
            in the worker), or ``"auto"`` (default: min(4, cores - 1) where this process only
            traces and the worker owns a TPU chip they compile for, e.g. ``autotune tune`` on a
            single-chip TPU v5e; else 0).
        tier_up: pick the winner for a function that runs with ``@at.autotuned(tier_up=True)``
            (default False): a config whose compile qualifies against the default's
            (`autotune.select._tiered.qualifies`) is charged the tiered cost, the default serving
            while it compiles beside it, instead of its compile as a stall (the tuned objective's
            ``tier_up``; a decorator with ``tier_up=True`` turns it on too). It is part of the study
            name, so a tiered pick never resumes a plain study.
        max_memory: a memory budget (default None): a config whose device memory is over it never
            wins. Bytes (``"12GiB"``, ``"512MB"``, an int) or a fraction of the device's memory
            (``0.5``; refused where the device reports none, the CPU). It is the tuned objective's
            ``max_memory`` (a decorator's ``max_memory`` sets it too), part of the study name and of
            the cache entry's key: docs/how-to/memory-budget.md.
        neighbours: start a new study from what the cache holds for the same function on the same
            device at other input signatures (default True; ``fn.tune`` and ``autotune tune``, which
            have a cache): the default, then the nearest neighbours' best configs that fit are
            measured first, and the search stops there when the nearest one's ranking holds
            (``TuneResult.seeding`` says which seeded it and why it stopped or went on;
            docs/explanation/neighbours.md). False searches as if the cache held none, and a
            study that stopped after its seeds searches on.

    ``str(options)`` names the options that differ from their defaults, in this order.

    Example::

        >>> import autotune as at
        >>> opts = at.TuneOptions(n_trials=8, search="pareto")
        >>> str(opts)
        "TuneOptions(n_trials=8, search='pareto')"
        >>> opts.replace(n_trials=16).n_trials
        16
    """

    n_trials: int | None = None
    timeout: float | None = None
    sampler: str = "auto"
    storage: str | None = None
    study_name: str | None = None
    search: str = "cost"
    seed: int | None = 0
    confirm_top: int = 3
    confirm_rounds: int = 3
    reconfirm: bool = False
    rtol: float | None = None
    atol: float | None = None
    timing: Sampling | Mapping[str, Any] | str | None = None  # held as a Sampling (a mode alone: its mode)
    trial_timeout: float | None = None
    trial_memory_gb: float | None = None
    isolate: bool | str = "auto"
    progress: bool | None = None
    xla: bool | str = "auto"
    builders: int | str = "auto"
    tier_up: bool = False
    neighbours: bool = True
    max_memory: int | float | str | None = None

    def __post_init__(self):
        n = self.n_trials
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise StudyError(f"n_trials={n!r} must be a positive integer.")
        if self.sampler not in SAMPLERS:
            raise StudyError(f"sampler={self.sampler!r} is not one of {list(SAMPLERS)}.")
        if self.search not in SEARCHES:
            raise StudyError(f"search={self.search!r} is not one of {list(SEARCHES)}.")
        if not (isinstance(self.isolate, bool) or self.isolate == "auto"):
            raise StudyError(f"isolate={self.isolate!r} must be 'auto', True or False.")
        if not (isinstance(self.xla, bool) or self.xla == "auto"):
            raise StudyError(f"xla={self.xla!r} must be 'auto', True or False.")
        b = self.builders
        if b != "auto" and (isinstance(b, bool) or not isinstance(b, int) or b < 0):
            raise StudyError(f"builders={b!r} must be 'auto' or a number of processes >= 0 (0 compiles in the worker).")
        if not isinstance(self.tier_up, bool):
            raise StudyError(
                f"tier_up={self.tier_up!r} must be True or False (True: charge a slow compile what it costs "
                "the calls the default serves beside it, as @at.autotuned(tier_up=True) runs it)."
            )
        object.__setattr__(self, "max_memory", parse_budget(self.max_memory))
        if not isinstance(self.neighbours, bool):
            raise StudyError(
                f"neighbours={self.neighbours!r} must be True or False (True: start from the cache's configs of "
                "the same function at other input signatures)."
            )
        for name in ("confirm_top", "confirm_rounds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise StudyError(f"{name}={value!r} must be a positive integer.")
        if self.trial_timeout is not None and not _positive(self.trial_timeout):
            raise StudyError(f"trial_timeout={self.trial_timeout!r} must be a number of seconds > 0, or None.")
        if self.trial_memory_gb is not None and not _positive(self.trial_memory_gb):
            raise StudyError(f"trial_memory_gb={self.trial_memory_gb!r} must be a number of GiB > 0, or None.")
        if self.timing is not None:
            timing = {"mode": self.timing} if isinstance(self.timing, str) else self.timing
            if not isinstance(timing, (Mapping, Sampling)):
                raise StudyError(
                    f"timing={self.timing!r} must be a dict of {list(SAMPLING_NAMES)}, a timing mode alone "
                    f"({', '.join(map(repr, TIMING_MODES))}), or None."
                )
            if isinstance(timing, Mapping) and "mode" in timing and timing["mode"] not in TIMING_MODES:
                raise StudyError(f"timing: {timing_mode_error(timing['mode'])}")
            # built once, here: a frozen value, which no caller's dict changing later can change
            object.__setattr__(self, "timing", Sampling.of(timing))

    def replace(self, **changes: Any) -> TuneOptions:
        """A copy with ``changes`` (validated like the original)."""
        return dataclasses.replace(self, **changes)

    @property
    def sampling(self) -> Any:
        """How a call's runtime is sampled: ``timing``, or the defaults (a :class:`Sampling`)."""
        from autotune.measuring._sampling import Sampling

        return self.timing if self.timing is not None else Sampling()

    def goal(self, objective: Any) -> Any:
        """``objective`` (an :class:`autotune.Objective`) as these options tune it: with ``tier_up``
        turned on when they ask for it, and with their ``max_memory`` where they set one (the one
        place these options reach the objective)."""
        goal = objective.overridden(tier_up=True) if self.tier_up and not objective.tier_up else objective
        return goal if self.max_memory is None else goal.overridden(max_memory=self.max_memory)

    @property
    def timing_mode(self) -> str:
        """The timing mode asked for (``"steady"`` unless ``timing`` names another)."""
        return Sampling.of(self.timing).mode

    def __str__(self) -> str:
        changed = [
            f"{f.name}={_shown(getattr(self, f.name))}"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != f.default
        ]
        return f"TuneOptions({', '.join(changed)})"


def _shown(value: Any) -> str:
    return repr(value.to_dict()) if isinstance(value, Sampling) else repr(value)


OPTION_NAMES = tuple(f.name for f in dataclasses.fields(TuneOptions))


@dataclass(frozen=True)
class Plumbing:
    """What ``autotune tune`` adds to a run; private, passed through ``Autotuned._tune``.

    Attributes:
        join: only run trials on an existing study whose owner confirms the winner (a
            ``--workers`` helper); the run returns None.
        on_ready: called with (storage URL, study name) once the study exists (starts helpers).
        before_finish: called before the confirmation (waits for helpers).
        retune: the command that re-tunes this function, ``{calls}`` standing for the call count.
        location: where a worker process can import the function from (a
            :class:`autotune.measuring.process.Location`), for programs ``jax.export`` cannot carry.
        store: write the winner into the cache (``fn.tune`` does; ``at.tune`` has no cache).
        neighbours_of: ``(fingerprint, signature, device key) -> [Neighbour]``: what the cache holds
            for the function at other keys (`autotune.study._neighbours`), to seed a new study;
            None: nothing (``at.tune``).
    """

    join: bool = False
    on_ready: Callable[[str, str], None] | None = None
    before_finish: Callable[[], None] | None = None
    retune: str | None = None
    location: Any = None
    store: bool = True
    neighbours_of: Callable[[str, str, str], list] | None = None

    def replace(self, **changes: Any) -> Plumbing:
        return dataclasses.replace(self, **changes)


def parameters(fn: Callable) -> tuple[set[str], bool]:
    """(the keyword parameters of ``fn``, whether it takes ``**kwargs``); all names when unknown."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: let the call itself decide
        return set(), True
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return names, any(p.kind is p.VAR_KEYWORD for p in params)


def split_keywords(
    api: str, fn: Callable, keywords: dict[str, Any], extra: tuple[str, ...] = ()
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``keywords`` split into (tune options, the function's keyword arguments).

    A name of :class:`TuneOptions` is an option (it wins over a parameter of ``fn`` of the
    same name); a parameter of ``fn`` goes to ``fn``; anything else is a
    :class:`StudyError` naming the nearest option. ``extra``: more names ``api`` takes.
    """
    options, kwargs = {}, {}
    names, var_keyword = parameters(fn)
    for name, value in keywords.items():
        if name in OPTION_NAMES:
            options[name] = value
        elif name == "objective":  # the search mode's old name: at.Objective is the weights
            warn_user_once(
                ("objective-keyword",),
                f"{api}: objective={value!r} is deprecated; the search mode is now called search "
                f"(search={value!r}), since at.Objective is the weights.",
                FutureWarning,
            )
            if "search" in keywords:
                raise StudyError(f"{api} got both search= and its deprecated name objective=; pass only search=.")
            options["search"] = value
        elif name in names or var_keyword:
            kwargs[name] = value
        else:
            raise StudyError(unknown_keyword(api, fn, name, extra))
    return options, kwargs


def unknown_keyword(api: str, fn: Callable, name: str, extra: tuple[str, ...] = ()) -> str:
    """One sentence for a keyword that is neither a tune option nor a parameter of ``fn``."""
    near = difflib.get_close_matches(name, OPTION_NAMES + extra, n=1)
    hint = f" Did you mean {near[0]}?" if near else ""
    what = getattr(fn, "__name__", "the function")
    return (
        f"{api} got the keyword {name!r}, which is neither a tune option nor a parameter of {what}.{hint} "
        f"The options are: {', '.join(OPTION_NAMES + extra)}."
    )


__all__ = ["OPTION_NAMES", "SAMPLERS", "SEARCHES", "Plumbing", "TuneOptions", "split_keywords"]
