"""`@at.autotuned`: a drop-in for ``jax.jit`` that applies the cached best config.

The first call per signature costs what ``jax.jit``'s does, plus a hash and one read:
the function is traced once (`_sites.trace_program`), that trace gives the fingerprint
and the sites, and the jit emits it by replaying it (`_rewrite.evaluate`) under the
config found, the default's or a cached one. A SQLite cache is read with the standard
library (`cache._fastread`); SQLAlchemy loads only for other databases, for writes and
when a file is not plainly readable. The tuner (Optuna) loads only when a function is tuned.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax

from autotune._errors import AutotuneError, ConfigError, warn_user_once
from autotune.jit._lookup import Lookup, after_prefetch, failed_lookup, open_cache, prefetch, read_config
from autotune.jit._methods import BoundAutotuned, XlaRoutes, handed_out
from autotune.program import _keys
from autotune.program._config import Config
from autotune.program._xla import XlaChoice
from autotune.select._objective import DEFAULT, Objective, compilation_cache_on

__all__ = ["Autotuned", "Lookup", "autotuned", "controller", "open_cache"]

if TYPE_CHECKING:
    from autotune.study import TuneResult

ON_MISS = ("default", "warn", "tune")
_ENV_RECORD = "AUTOTUNE_RECORD"  # _record.ENV_RECORD: read here so that _record loads only when recording


_OBJECTIVE_KEYWORDS = ("expected_calls", "compile_weight", "runtime_weight", "processes", "compilation_cache")


def merged_objective(base: Objective, detect_cache: bool, said: dict[str, Any]) -> tuple[Objective, bool]:
    """(``base`` with the objective keywords ``said`` replaced (None keeps one), whether its
    compilation cache is still to be detected): the one place the decorator's objective keywords
    become an :class:`Objective` (a bad figure fails here, by name).

    Example::

        >>> goal, detect = merged_objective(DEFAULT, True, {"expected_calls": 10, "compilation_cache": False})
        >>> goal.expected_calls, goal.compilation_cache, detect
        (10, False, False)
    """
    cache = said.get("compilation_cache")
    if cache is not None:
        compilation_cache_on(cache)  # not a bool: fails by name
    changes = {k: v for k, v in said.items() if v is not None}
    return dataclasses.replace(base, **changes), detect_cache and cache is None


def controller(fn: Any) -> Autotuned | None:
    """The :class:`Autotuned` behind an ``@at.autotuned`` function, or None."""
    if isinstance(fn, Autotuned):
        return fn
    ctl = getattr(fn, "autotune", None)
    return ctl if isinstance(ctl, Autotuned) else None


class Autotuned:
    """A function compiled like ``jax.jit(fun, **jit_kwargs)``, with each loop site
    emitted as the tuning cache says for this program, input signature and device.

    The config is looked up when JAX traces (the first call per abstract
    signature); later calls go straight through ``jax.jit``'s dispatch. Any
    problem of autotune's (the cache, the fingerprint, the replay) means the default
    config and one warning, never an exception.
    """

    def __init__(
        self,
        fun: Callable,
        *,
        objective: Objective = DEFAULT,
        detect_cache: bool = True,
        cache: Any = None,
        on_miss: str = "default",
        key: str | None = None,
        record: bool | str = False,
        tier_up: bool = False,
        **jit_kwargs: Any,
    ):
        if not callable(fun):
            raise AutotuneError(f"at.autotuned needs a function, got {type(fun).__name__}.")
        if on_miss not in ON_MISS:
            raise ConfigError(f"at.autotuned(on_miss={on_miss!r}): choose one of {list(ON_MISS)}.")
        functools.update_wrapper(self, fun)
        self.fun = fun
        if not isinstance(objective, Objective):
            raise ConfigError(f"Autotuned(objective={objective!r}): pass an autotune.Objective.")
        # The objective, built once at the public boundary (`autotuned`'s keywords); with ``detect_cache``
        # its compilation_cache is detected when used (`objective`), not now.
        self._objective, self._detect_cache = objective, bool(detect_cache)
        self.on_miss = on_miss
        self.key = key or _keys.function_key(fun)
        if key is None and _keys.unstable_key_reason(self.key):
            warn_user_once(
                ("unstable-key", self.key),
                f"autotune: {self.key} has no stable function key ({_keys.unstable_key_reason(self.key)}), so "
                "a config tuned in one process is not found in another. Pass a stable name: "
                "@at.autotuned(key='mymodule:myfn').",
            )
        self.jit_kwargs = jit_kwargs
        self._record_arg, self.record_mode = record, None
        if record not in (False, None) or os.environ.get(_ENV_RECORD, "").strip():
            from autotune.jit import _record

            self.record_mode = _record.mode(record)
        self._current = None  # values mode: the call being traced, so its values can be recorded
        self.cache_arg = cache
        self._reader = None
        self._pending = False
        self._last_lookup: Lookup | None = None
        traced = functools.wraps(fun)(lambda *args, **kwargs: self._traced(*args, **kwargs))
        self._jitted = jax.jit(traced, **jit_kwargs)
        self._xla = XlaRoutes(self)  # a cached config's XLA options: a jit per choice
        self.tier_up = bool(tier_up)  # serve the default while the winner compiles (`_tier`)
        if self.tier_up:
            from autotune.jit._tier import Tier

            self._tier = Tier(self)
        else:
            self._tier = None
        prefetch()

    # -- the objective ------------------------------------------------------------------
    @property
    def objective(self) -> Objective:
        """The objective this function tunes and looks up for, whole: its figures, its ``processes``
        and its ``compilation_cache`` (detected now where the decorator was not told, see
        :func:`autotune.select._objective.compilation_cache_on`); with ``tier_up=True`` its
        ``tier_up`` too, so the winner it tunes and re-picks is charged the tiered cost."""
        goal = self._objective.overridden(tier_up=True) if self.tier_up else self._objective
        if self._detect_cache:
            return dataclasses.replace(goal, compilation_cache=compilation_cache_on(None))
        return goal

    @property
    def expected_calls(self) -> float:
        return self._objective.expected_calls

    @property
    def compile_weight(self) -> float:
        return self._objective.compile_weight

    @property
    def runtime_weight(self) -> float:
        return self._objective.runtime_weight

    @property
    def processes(self) -> int:
        return self._objective.processes

    @property
    def compilation_cache(self) -> bool | None:
        """``compilation_cache`` as the decorator was told it; None: detected when used."""
        return None if self._detect_cache else self._objective.compilation_cache

    @property
    def jitted(self) -> Any:
        """The plain ``jax.jit`` object of this function (no XLA options): what calls go through."""
        return self._jitted

    @property
    def xla(self) -> XlaRoutes:
        """The routes of cached configs' XLA options (`autotune.jit._methods.XlaRoutes`)."""
        return self._xla

    def traced_under(self, under: XlaChoice, args: tuple, kwargs: dict) -> Any:
        """The traced program of a call compiled with the XLA options ``under`` (`_traced_under`)."""
        return self._traced_under(under, args, kwargs)

    def function(self) -> Callable:
        """What ``@at.autotuned`` hands out (`autotune.jit._methods.handed_out`): the ``jax.jit``
        object itself, carrying this object's methods; a descriptor for a method; this object
        when the cache holds a config of this function with XLA options."""
        return handed_out(self)

    # -- the hot path: plain jit dispatch ---------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.record_mode == "values":  # values are concrete only here, not inside jit's trace
            self._current = (args, kwargs)
            try:
                out = self._call(args, kwargs)
            finally:
                self._current = None
        else:
            out = self._call(args, kwargs)
        if self._pending:
            self._tune_after_miss(args, kwargs)
        return out

    def _call(self, args: tuple, kwargs: dict) -> Any:
        """A call: the plain jit, or the jit of its cached config's XLA options (`XlaRoutes`)."""
        if self._tier is not None:  # tier-up: the default serves while the winner compiles
            return self._tier.call(args, kwargs)
        return self._usual_call(args, kwargs)

    def _usual_call(self, args: tuple, kwargs: dict) -> Any:
        """A call without tier-up: the plain jit, or the jit of the cached config's XLA options."""
        return self._xla.call(args, kwargs) if self._xla.active else self._jitted(*args, **kwargs)

    def _traced(self, *args: Any, **kwargs: Any) -> Any:
        return self._traced_under(XlaChoice(), args, kwargs)

    def _traced_under(self, under: XlaChoice, args: tuple, kwargs: dict) -> Any:
        """Runs once per abstract signature, inside jit's trace: one trace of the function
        gives the key and, replayed under the config found, the jit's program.

        Nothing here raises where ``jax.jit`` would not: when autotune fails (the trace on
        abstract values, the fingerprint, the key, the lookup, the replay), the function is
        traced as ``jax.jit`` traces it, with its default config, and one warning says why.
        An error of the function itself comes out of that trace, as under ``jax.jit``.
        """
        from autotune.program._sites import split_args, trace_program

        try:
            program = trace_program(self.fun, args, kwargs)
        except Exception as exc:
            return self._fallback(args, kwargs, "trace it on abstract values", exc)
        try:
            signature = _keys.signature(args, kwargs)
        except Exception as exc:
            lookup = self._failed("key its call signature", exc)
        else:
            lookup = self._lookup(program, signature)
        # tier-up: a first call whose winner compiles slowly emits the default; the winner compiles
        # from this same trace on a thread (`_tier.Tier.decides`)
        tiered = self._tier is not None and self._tier.decides(lookup, program, under)
        if not tiered:
            lookup = self._xla.checked(lookup, under)
        self._last_lookup = lookup
        if self.record_mode is not None and lookup.source != "default (error)":
            from autotune.jit import _record

            _record.record_call(self, args, kwargs, lookup)
        if lookup.source != "cache" and self.on_miss == "tune" and lookup.error is None:
            self._pending = True
        try:
            from autotune.program._rewrite import Plan, evaluate

            leaves, _, dynamic = split_args(args, kwargs)
            config = Config() if tiered else lookup.config  # the default's sites, under this jit's options
            out = evaluate(program.jaxpr, [leaves[i] for i in dynamic], Plan(program.sites, config))
            return jax.tree_util.tree_unflatten(program.out_tree, out)
        except Exception as exc:
            return self._fallback(args, kwargs, f"emit its config {lookup.config}", exc)

    def _fallback(self, args: tuple, kwargs: dict, what: str, exc: Exception) -> Any:
        """The function traced as ``jax.jit`` traces it (its default config); then one warning
        (none when the function itself raises: that error is the user's, as under ``jax.jit``)."""
        out = self.fun(*args, **kwargs)
        self._last_lookup = self._failed(what, exc)
        return out

    def _failed(self, what: str, exc: Exception, signature: str = "?") -> Lookup:
        return failed_lookup(self.key, what, exc, signature)

    # -- lookups ------------------------------------------------------------------------
    @property
    def reader(self):
        """Reads this function's cache: a SQLite file with the standard library, else `Cache`."""
        if self._reader is None:
            after_prefetch()
            from autotune.cache._fastread import Reader

            self._reader = Reader(self.cache_arg, open_cache)
        return self._reader

    @property
    def cache(self):
        """The `at.Cache` of this function (opened on first use; it loads SQLAlchemy)."""
        return self.reader.cache

    def _lookup(self, program, signature: str) -> Lookup:
        """The config for this program and signature; every failure of ours is the default
        config and a warning (a cache problem names the cache, anything else the function)."""
        try:
            return read_config(self, program, signature)
        except Exception as exc:
            return self._failed("fingerprint it and look its config up", exc, signature)

    def config_for(self, *args: Any, **kwargs: Any) -> Lookup:
        """The config a call with these arguments gets, and where it came from."""
        program, signature = _keys.program_key(self.fun, args, kwargs, self.jit_kwargs)
        return self._lookup(program, signature)

    def sites(self, *args: Any, **kwargs: Any):
        """The loop sites of this function traced on these arguments (exactly a call's arguments)."""
        return _keys.program_key(self.fun, args, kwargs, self.jit_kwargs)[0].sites

    @property
    def autotune(self) -> Autotuned:
        """This object, as ``fn.autotune`` names it on the plain jit object ``function()`` hands out."""
        return self

    # -- jit passthroughs -----------------------------------------------------------------
    def lower(self, *args: Any, **kwargs: Any):
        """Like ``jax.jit(fun).lower``, with the chosen config applied (its XLA options too:
        ``.compile()`` builds the executable with them)."""
        return self._xla.staged(args, kwargs).lower(*args, **kwargs)

    def trace(self, *args: Any, **kwargs: Any):
        return self._xla.staged(args, kwargs).trace(*args, **kwargs)

    def eval_shape(self, *args: Any, **kwargs: Any):
        return self._jitted.eval_shape(*args, **kwargs)

    def clear_cache(self) -> None:
        """Forget compiled versions, so the next call looks the cache up again."""
        for jitted in self._xla.jits.values():
            jitted.clear_cache()
        self._xla.routes.clear()
        self._xla.by_call.clear()

    def with_options(self, **overrides: Any) -> Autotuned:
        """A copy with some options replaced (None keeps the current value): the decorator's
        keywords, the objective's figures among them (merged here into one :class:`Objective`)."""
        said = {k: overrides.pop(k, None) for k in _OBJECTIVE_KEYWORDS}
        objective, detect = merged_objective(self._objective, self._detect_cache, said)
        opts = dict(
            objective=objective,
            detect_cache=detect,
            cache=self.cache_arg,
            on_miss=self.on_miss,
            key=self.key,
            record=self._record_arg,
            tier_up=self.tier_up,
            **self.jit_kwargs,
        )
        opts.update({k: v for k, v in overrides.items() if v is not None})
        return Autotuned(self.fun, **opts)

    # -- tuning ---------------------------------------------------------------------------
    def tune(
        self,
        *args: Any,
        n_trials: int | None = None,
        timeout: float | None = None,
        sampler: str = "auto",
        storage: str | None = None,
        study_name: str | None = None,
        **options: Any,
    ) -> TuneResult:
        """Tune this function on these example arguments (exactly a call's arguments) and
        store the winner in the cache (unless the cache's entry from the same study stands:
        :func:`autotune.cache._store.entry_stands`).

        Running it again resumes the study; a study with nothing new to measure is finished
        and returns at once (``result.finished``), unless ``reconfirm=True`` re-times its
        contenders. ``**options`` are the other fields of :class:`autotune.TuneOptions`
        (``search``, ``timing``, ``trial_timeout``, ...) and the function's own keyword
        arguments; any other keyword is an error naming the nearest option.

        Returns:
            The :class:`at.TuneResult`; later calls with the same signature use its config.
        """
        from autotune.jit._fn_tune import options_of, tune_with

        named = dict(n_trials=n_trials, timeout=timeout, sampler=sampler, storage=storage, study_name=study_name)
        opts, kwargs = options_of(self, f"{self.__name__}.tune", {**named, **options})
        return tune_with(self, args, kwargs, opts)

    def _tune(self, args: tuple, kwargs: dict[str, Any], options: Any, plumbing: Any = None) -> TuneResult | None:
        """The command line's entry: ``options`` (:class:`TuneOptions`) built by the caller,
        ``plumbing`` (:class:`autotune._options.Plumbing`) for helpers, ``--join-study``, the
        stored re-tune command and the worker's import location."""
        from autotune.jit._fn_tune import tune_with

        return tune_with(self, tuple(args), dict(kwargs), options, plumbing)

    def _tune_after_miss(self, args, kwargs) -> None:
        from autotune.jit._fn_tune import tune_after_miss

        self._pending = False
        tune_after_miss(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<autotuned {self.key} expected_calls={self.expected_calls}>"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return BoundAutotuned(self, obj)


def autotuned(
    fun: Callable | None = None,
    *,
    expected_calls: float = DEFAULT.expected_calls,
    compile_weight: float = DEFAULT.compile_weight,
    runtime_weight: float = DEFAULT.runtime_weight,
    processes: int = DEFAULT.processes,
    compilation_cache: bool | None = None,
    cache: Any = None,
    on_miss: str = "default",
    key: str | None = None,
    record: bool | str = False,
    tier_up: bool = False,
    **jit_kwargs: Any,
):
    """Decorate a function like ``jax.jit``; its loops follow the tuned config in the cache.

    Arguments:
        fun: the function (or omit it and use ``@at.autotuned(...)``).
        expected_calls, compile_weight, runtime_weight: the objective to tune for and to
            pick from a cached set of confirmed configs with.
        processes: how many processes will run the function, each calling it ``expected_calls``
            times (:class:`at.Objective`); every process after the first compiles it again, or
            only loads it when JAX's persistent compilation cache is on.
        compilation_cache: whether that cache is on where it runs; None (default) detects it
            when tuning or looking up (``jax_compilation_cache_dir`` / ``JAX_COMPILATION_CACHE_DIR``).
        cache: a SQLAlchemy URL, a file path or an :class:`at.Cache`; None means
            ``$AUTOTUNE_CACHE`` or the user cache dir.
        on_miss: ``"default"`` runs the default config when nothing is cached,
            ``"warn"`` also warns once, ``"tune"`` tunes briefly after the first call.
        key: the function's stable key; default ``module:qualname`` (a script's
            ``__main__`` counts as its module name).
        record: ``True`` writes a pending row at the first call per signature, for
            ``autotune tune --recorded`` to tune later; ``"values"`` also keeps the argument
            values (``AUTOTUNE_RECORD=1`` / ``values`` turns it on for every function).
        tier_up: never wait for the tuned compile: a signature whose cached winner compiles much
            slower than the default runs the default at once while the winner compiles on a
            background thread, and the winner from the first call after it is built
            (`autotune.jit._tier`; docs/how-to/tier-up.md). Hands out the :class:`Autotuned` object.
        **jit_kwargs: passed to ``jax.jit`` (``static_argnums``, ``donate_argnums``, ...).

    Returns:
        The ``jax.jit``-compiled function, with ``.tune``, ``.sites``, ``.config_for``,
        ``.lower`` (and ``.autotune``, the :class:`Autotuned` behind it); they all take
        exactly a call's arguments. On a method, ``instance.method.tune(x)`` binds the
        instance like a call does. With ``on_miss="tune"``, the :class:`Autotuned` object
        itself, which checks after each call whether a tuning run is due; when recording
        values, the :class:`Autotuned` object too, whose call keeps a new signature's values; and
        when the cache holds a config of the function with XLA options (``xla:O1``), that object
        too, which routes each call to the jit of its signature's options.

    Example::

        >>> import jax.numpy as jnp, autotune as at
        >>> @at.autotuned(expected_calls=10_000)
        ... def smooth(x):
        ...     return at.loop(lambda c, _: (0.5 * c + 1.0, None), x, length=64, name="smooth")[0]
        >>> smooth(jnp.zeros(4)).shape
        (4,)
    """

    said = dict(
        expected_calls=expected_calls,
        compile_weight=compile_weight,
        runtime_weight=runtime_weight,
        processes=processes,
        compilation_cache=compilation_cache,
    )
    objective, _ = merged_objective(DEFAULT, True, said)  # the one Objective, built at the boundary

    def wrap(f: Callable):
        ctl = Autotuned(
            f,
            objective=objective,
            detect_cache=compilation_cache is None,
            cache=cache,
            on_miss=on_miss,
            key=key,
            record=record,
            tier_up=tier_up,
            **jit_kwargs,
        )
        return ctl if on_miss == "tune" or ctl.record_mode == "values" or tier_up else ctl.function()

    return wrap if fun is None else wrap(fun)
