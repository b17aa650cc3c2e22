"""`@at.autotuned`: a drop-in for ``jax.jit`` that applies the cached best config.

The tuner (Optuna) is imported only when a function is tuned, so ``import autotune`` and
a decorated program that only reads the cache stay light.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax

from . import _keys, _paths, _record, _select
from ._config import Config
from ._methods import AutotunedMethod, BoundAutotuned, defined_in_class
from ._errors import AutotuneError, ConfigError, warn_once
from ._rewrite import with_config

if TYPE_CHECKING:
    from .study import TuneResult

ON_MISS = ("default", "warn", "tune")

@dataclass(frozen=True)
class Lookup:
    """Which config a call signature gets, and why.

    Attributes:
        config: the config applied.
        source: ``"cache"`` (a tuned entry for this program, signature and device),
            ``"default"`` (no entry), or ``"default (cache error)"`` (the cache could not be read).
        entry: the cache entry, or None.
        fingerprint, signature, device_key: the key that was looked up.
        error: the cache problem, when there was one.
    """

    config: Config
    source: str
    entry: Any
    fingerprint: str
    signature: str
    device_key: str
    error: str | None = None


def entry_from_result(result: TuneResult, function_key: str, retune: str | None = None):
    """The cache entry that records ``result``: the winner, and every confirmed point with
    its rounds, so another call count is re-picked by the same rule."""
    from .cache import CacheEntry

    best = result.best
    measurements = {"trace_s": best.trace_s, "lower_s": best.lower_s, "compile_s": best.compile_s,
                    "run_s": best.run_s, "run_iqr_s": best.run_iqr_s, "reps": best.reps}
    measurements.update({f"memory_{k}_bytes": v for k, v in best.memory.items()})
    if best.flops is not None:
        measurements["flops"] = best.flops
    keep = ("config", "compile_s", "run_s", "rounds", "confirmed")
    fields = dict(
        function_key=function_key, fingerprint=result.fingerprint, signature=result.signature,
        device=dict(result.device), config=result.best_config.to_dict(),
        sites={s.id: {"kind": s.kind, "length": s.length, "has_ys": s.has_ys} for s in result.sites},
        measurements=measurements, objective=result.objective.to_dict(), cost=result.best_cost,
        default_cost=result.default_cost, study_name=result.study_name,
        pareto=[{k: p[k] for k in keep if k in p} for p in result.confirmed],
        default_config=result.default_config.to_dict(), complete_range=_select.range_json(result.complete_range),
        retune=retune)
    return CacheEntry(**fields)


def controller(fn: Any) -> Autotuned | None:
    """The :class:`Autotuned` behind an ``@at.autotuned`` function, or None."""
    if isinstance(fn, Autotuned):
        return fn
    ctl = getattr(fn, "autotune", None)
    return ctl if isinstance(ctl, Autotuned) else None


def open_cache(cache: Any):
    from .cache import Cache

    return cache if isinstance(cache, Cache) else Cache(cache)


def _cache_location(cache_arg: Any, cache: Any) -> str:
    """The cache as a warning names it (password redacted)."""
    where = cache if cache is not None else (cache_arg or os.environ.get(_paths.ENV_CACHE))
    return _paths.redact(where) if where else "the default cache"


class Autotuned:
    """A function compiled like ``jax.jit(fun, **jit_kwargs)``, with each loop site
    emitted as the tuning cache says for this program, input signature and device.

    The config is looked up when JAX traces (the first call per abstract
    signature); later calls go straight through ``jax.jit``'s dispatch. Any
    cache problem means the default config and one warning, never an exception.
    """

    def __init__(self, fun: Callable, *, expected_calls: float = 1000, compile_weight: float = 1.0,
                 runtime_weight: float = 1.0, cache: Any = None, on_miss: str = "default",
                 key: str | None = None, record: bool | str = False, **jit_kwargs: Any):
        if not callable(fun):
            raise AutotuneError(f"at.autotuned needs a function, got {type(fun).__name__}.")
        if on_miss not in ON_MISS:
            raise ConfigError(f"at.autotuned(on_miss={on_miss!r}): choose one of {list(ON_MISS)}.")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.expected_calls, self.compile_weight, self.runtime_weight = expected_calls, compile_weight, runtime_weight
        self.on_miss = on_miss
        self.key = key or _keys.function_key(fun)
        if key is None and _keys.unstable_key_reason(self.key):
            warn_once(("unstable-key", self.key),
                      f"autotune: {self.key} has no stable function key ({_keys.unstable_key_reason(self.key)}), so "
                      "a config tuned in one process is not found in another. Pass a stable name: "
                      "@at.autotuned(key='mymodule:myfn').", stacklevel=3)
        self.jit_kwargs = jit_kwargs
        self._record_arg, self.record_mode = record, _record.mode(record)
        self._current = None  # values mode: the call being traced, so its values can be recorded
        self._cache_arg = cache
        self._cache = None
        self._pending = False
        self._last_lookup: Lookup | None = None
        traced = functools.wraps(fun)(lambda *args, **kwargs: self._traced(*args, **kwargs))
        self._jitted = jax.jit(traced, **jit_kwargs)

    def function(self) -> Callable:
        """What ``@at.autotuned`` hands out: the ``jax.jit`` object itself (so calls cost
        exactly a jit dispatch), carrying this object's methods as attributes; for a method
        defined in a class body, a descriptor that binds them to the instance too."""
        if defined_in_class(self.fun):
            return AutotunedMethod(self)
        jitted = self._jitted
        for name in ("tune", "sites", "config_for", "with_options"):
            setattr(jitted, name, getattr(self, name))
        jitted.key = self.key
        jitted.expected_calls = self.expected_calls
        jitted.autotune = self
        return jitted

    # -- the hot path: plain jit dispatch ---------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.record_mode == "values":  # values are concrete only here, not inside jit's trace
            self._current = (args, kwargs)
            try:
                out = self._jitted(*args, **kwargs)
            finally:
                self._current = None
        else:
            out = self._jitted(*args, **kwargs)
        if self._pending:
            self._tune_after_miss(args, kwargs)
        return out

    def _traced(self, *args: Any, **kwargs: Any) -> Any:
        """Runs once per abstract signature, inside jit's trace."""
        from ._sites import trace_program

        lookup = self._lookup(trace_program(self.fun, args, kwargs), _keys.signature(args, kwargs))
        self._last_lookup = lookup
        if self.record_mode is not None:
            _record.record_call(self, args, kwargs, lookup)
        if lookup.source != "cache" and self.on_miss == "tune" and lookup.error is None:
            self._pending = True
        if len(lookup.config) == 0:
            return self.fun(*args, **kwargs)
        return with_config(self.fun, lookup.config)(*args, **kwargs)

    # -- lookups ------------------------------------------------------------------------
    @property
    def cache(self):
        if self._cache is None:
            self._cache = open_cache(self._cache_arg)
        return self._cache

    def _lookup(self, program, signature: str) -> Lookup:
        fingerprint = program.fingerprint
        try:
            device_key = _keys.device_key(_keys.device_info())
        except Exception as exc:  # no backend: jit itself will say so
            return Lookup(Config(), "default (cache error)", None, fingerprint, signature, "?", str(exc))
        try:
            # Tuned for another call count or weights: the lookup re-picks with the one rule.
            entry = self.cache.lookup(self.key, fingerprint, signature, device_key,
                                      expected_calls=self.expected_calls, compile_weight=self.compile_weight,
                                      runtime_weight=self.runtime_weight)
            if entry is None:
                if self.on_miss == "warn":
                    warn_once(("miss", self.key, signature),
                              f"autotune: no tuned config for {self.key} with signature {signature} on "
                              f"{device_key}; running the default config. Tune it with "
                              f"`{self.__name__}.tune(*args)` or `autotune tune FILE`.", stacklevel=3)
                return Lookup(Config(), "default", None, fingerprint, signature, device_key)
            config = Config.from_dict(entry.config)
            # Validate against this program: a foreign or hand-edited entry must not break the call.
            from ._rewrite import Plan

            Plan(program.sites, config)
        except Exception as exc:
            where = _cache_location(self._cache_arg, self._cache)
            warn_once(("cache-error", where, type(exc).__name__),
                      f"autotune: the tuning cache {where} could not be used ({type(exc).__name__}: {exc}); "
                      f"{self.key} runs its default config. Fix or remove the cache, or pass cache= another location.",
                      stacklevel=3)
            return Lookup(Config(), "default (cache error)", None, fingerprint, signature, device_key, str(exc))
        if not entry.covers(self.expected_calls):
            command = entry.retune_command(self.expected_calls)
            warn_once(("range", self.key, signature, self.expected_calls),
                      f"autotune: {self.key} was measured completely only for "
                      f"{_select.range_text(entry.covered_range)} calls, and expected_calls="
                      f"{self.expected_calls:g} lies outside, so configs that were not measured for that many calls "
                      f"could be cheaper; it runs the best measured one ({Config.from_dict(entry.config)}). "
                      f"Re-tune for {self.expected_calls:g} calls: "
                      f"{command or f'{self.__name__}.with_options(expected_calls={self.expected_calls:g}).tune(*args)'}",
                      stacklevel=3)
        return Lookup(config, "cache", entry, fingerprint, signature, device_key)

    def config_for(self, *args: Any, **kwargs: Any) -> Lookup:
        """The config a call with these arguments gets, and where it came from."""
        program, signature = _keys.program_key(self.fun, args, kwargs, self.jit_kwargs)
        return self._lookup(program, signature)

    def sites(self, *args: Any, **kwargs: Any):
        """The loop sites of this function traced on these arguments (exactly a call's arguments)."""
        return _keys.program_key(self.fun, args, kwargs, self.jit_kwargs)[0].sites

    # -- jit passthroughs -----------------------------------------------------------------
    def lower(self, *args: Any, **kwargs: Any):
        """Like ``jax.jit(fun).lower``, with the chosen config applied."""
        return self._jitted.lower(*args, **kwargs)

    def trace(self, *args: Any, **kwargs: Any):
        return self._jitted.trace(*args, **kwargs)

    def eval_shape(self, *args: Any, **kwargs: Any):
        return self._jitted.eval_shape(*args, **kwargs)

    def clear_cache(self) -> None:
        """Forget compiled versions, so the next call looks the cache up again."""
        self._jitted.clear_cache()

    def with_options(self, **overrides: Any) -> Autotuned:
        """A copy with some options replaced (None keeps the current value)."""
        opts = dict(expected_calls=self.expected_calls, compile_weight=self.compile_weight,
                    runtime_weight=self.runtime_weight, cache=self._cache_arg, on_miss=self.on_miss,
                    key=self.key, record=self._record_arg, **self.jit_kwargs)
        opts.update({k: v for k, v in overrides.items() if v is not None})
        return Autotuned(self.fun, **opts)

    # -- tuning ---------------------------------------------------------------------------
    def tune(self, *args: Any, n_trials: int | None = None, timeout: float | None = None,
             sampler: str = "auto", storage: str | None = None, study_name: str | None = None,
             progress: bool | None = None, store: bool = True, join: bool = False,
             on_ready: Callable | None = None, before_finish: Callable | None = None,
             timing: dict[str, Any] | None = None, objective: str = "cost",
             trial_timeout: float | None = None, trial_memory_gb: float | None = None,
             isolate: bool | str = "auto", retune: str | None = None, location: Any = None,
             confirm_top: int = 3, confirm_rounds: int = 3, seed: int | None = 0, rtol: float | None = None,
             atol: float | None = None, **kwargs: Any) -> TuneResult | None:
        """Tune this function on these example arguments (exactly a call's arguments) and
        store the winner in the cache.

        Returns:
            The :class:`at.TuneResult`; later calls with the same signature use its config.
        """
        from .study import tune

        retune = retune or f"{self.__name__}.with_options(expected_calls={{calls}}).tune(*args)"
        result = tune(
            self.fun, *args, kwargs=kwargs, expected_calls=self.expected_calls,
            compile_weight=self.compile_weight, runtime_weight=self.runtime_weight, n_trials=n_trials,
            timeout=timeout, sampler=sampler, storage=storage or _storage_beside(self._cache_arg),
            study_name=study_name, function_key=self.key, jit_kwargs=self.jit_kwargs, progress=progress,
            join=join, on_ready=on_ready, before_finish=before_finish, timing=timing, objective=objective,
            trial_timeout=trial_timeout, trial_memory_gb=trial_memory_gb, isolate=isolate, retune=retune,
            location=location, confirm_top=confirm_top, confirm_rounds=confirm_rounds, seed=seed, rtol=rtol,
            atol=atol)
        if result is not None and store:
            self._store(result, retune)
        return result

    def _store(self, result: TuneResult, retune: str | None = None) -> None:
        """Write the winner, unless the cache already holds a better one from the same study
        (several boxes finishing one shared study write only improvements)."""
        entry = entry_from_result(result, self.key, retune)
        current = self.cache.lookup(entry.function_key, entry.fingerprint, entry.signature, entry.device_key)
        if (current is not None and current.study_name == entry.study_name
                and current.objective == entry.objective and current.cost <= entry.cost):
            return
        self.cache.put(entry)
        self.clear_cache()

    def _tune_after_miss(self, args, kwargs) -> None:
        self._pending = False
        if self.jit_kwargs.get("donate_argnums") or self.jit_kwargs.get("donate_argnames"):
            warn_once(("donate-tune", self.key),
                      f"autotune: on_miss='tune' cannot tune {self.key} on donated arguments; "
                      f"call {self.__name__}.tune(*args) with fresh inputs instead.", stacklevel=3)
            return
        try:
            self.tune(*args, n_trials=8, **kwargs)
        except Exception as exc:
            warn_once(("tune-error", self.key, type(exc).__name__),
                      f"autotune: on_miss='tune' could not tune {self.key} ({type(exc).__name__}: {exc}); "
                      "it keeps running its default config.", stacklevel=3)

    def __repr__(self) -> str:
        return f"<autotuned {self.key} expected_calls={self.expected_calls}>"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return BoundAutotuned(self, obj)


def _storage_beside(cache_arg: Any) -> str | None:
    from ._paths import default_storage_url

    if cache_arg is None:
        return None
    url = getattr(cache_arg, "url", cache_arg)
    return default_storage_url(os.fspath(url))


def autotuned(fun: Callable | None = None, *, expected_calls: float = 1000, compile_weight: float = 1.0,
              runtime_weight: float = 1.0, cache: Any = None, on_miss: str = "default",
              key: str | None = None, record: bool | str = False, **jit_kwargs: Any):
    """Decorate a function like ``jax.jit``; its loops follow the tuned config in the cache.

    Arguments:
        fun: the function (or omit it and use ``@at.autotuned(...)``).
        expected_calls, compile_weight, runtime_weight: the objective to tune for and to
            pick from a cached set of confirmed configs with.
        cache: a SQLAlchemy URL, a file path or an :class:`at.Cache`; None means
            ``$AUTOTUNE_CACHE`` or the user cache dir.
        on_miss: ``"default"`` runs the default config when nothing is cached,
            ``"warn"`` also warns once, ``"tune"`` tunes briefly after the first call.
        key: the function's stable key; default ``module:qualname`` (a script's
            ``__main__`` counts as its module name).
        record: ``True`` writes a pending row at the first call per signature, for
            ``autotune tune --recorded`` to tune later; ``"values"`` also keeps the argument
            values (``AUTOTUNE_RECORD=1`` / ``values`` turns it on for every function).
        **jit_kwargs: passed to ``jax.jit`` (``static_argnums``, ``donate_argnums``, ...).

    Returns:
        The ``jax.jit``-compiled function, with ``.tune``, ``.sites``, ``.config_for``,
        ``.lower`` (and ``.autotune``, the :class:`Autotuned` behind it); they all take
        exactly a call's arguments. On a method, ``instance.method.tune(x)`` binds the
        instance like a call does. With ``on_miss="tune"``, the :class:`Autotuned` object
        itself, which checks after each call whether a tuning run is due; when recording
        values, the :class:`Autotuned` object too, whose call keeps a new signature's values.

    Example::

        >>> import jax.numpy as jnp, autotune as at
        >>> @at.autotuned(expected_calls=10_000)
        ... def smooth(x):
        ...     return at.loop(lambda c, _: (0.5 * c + 1.0, None), x, length=64, name="smooth")[0]
        >>> smooth(jnp.zeros(4)).shape
        (4,)
    """
    def wrap(f: Callable):
        ctl = Autotuned(f, expected_calls=expected_calls, compile_weight=compile_weight,
                        runtime_weight=runtime_weight, cache=cache, on_miss=on_miss, key=key, record=record,
                        **jit_kwargs)
        return ctl if on_miss == "tune" or ctl.record_mode == "values" else ctl.function()

    return wrap if fun is None else wrap(fun)
