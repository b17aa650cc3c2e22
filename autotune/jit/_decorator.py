"""`@at.autotuned`, a drop-in for ``jax.jit`` that applies the cached best config: the
:class:`Autotuned` object behind it and its whole call path.

A first call per signature costs what ``jax.jit``'s does, plus a hash and one read: the function
is traced once (`_sites.trace_program`), which gives the fingerprint and the sites, and the jit's
program is that trace replayed (`_rewrite.evaluate`) under the config found in the cache (read by
its one read path, `autotune.cache._fastread.Reader`). What hangs off the object (`_lookup`,
`_routes`, `_tier`, `_fn_tune`, `_record`, `_bound`) takes a `Target` and callables, never the object.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax

from autotune._errors import AutotuneError, ConfigError
from autotune.jit._bound import AutotunedMethod, BoundAutotuned, defined_in_class
from autotune.jit._lookup import Lookup, Lookups, failed_lookup, prefetch
from autotune.jit._routes import XlaRoutes
from autotune.jit._target import OBJECTIVE_KEYWORDS, Target, merged_objective
from autotune.program import _keys
from autotune.program._config import Config
from autotune.program._xla import XlaChoice
from autotune.select._objective import DEFAULT, Objective, compilation_cache_on

__all__ = ["Autotuned", "Lookup", "autotuned", "controller", "run_tune"]

if TYPE_CHECKING:
    from autotune._options import Plumbing, TuneOptions
    from autotune.study import TuneResult

_ENV_RECORD = "AUTOTUNE_RECORD"  # _record.ENV_RECORD: read here so that _record loads only when recording


def controller(fn: Any) -> Autotuned | None:
    """The :class:`Autotuned` behind an ``@at.autotuned`` function, or None."""
    if isinstance(fn, Autotuned):
        return fn
    ctl = getattr(fn, "autotune", None)
    return ctl if isinstance(ctl, Autotuned) else None


def run_tune(fn: Any, call: tuple[tuple, dict], options: TuneOptions, plumbing: Plumbing) -> TuneResult | None:
    """``autotune tune``'s entry (and ``tune --recorded``'s): tune the ``@at.autotuned`` function ``fn``
    on ``call`` (``(args, kwargs)``) with ``options`` and ``plumbing`` built by the command."""
    ctl = controller(fn)
    if ctl is None:
        raise AutotuneError(f"{fn!r} is not an @at.autotuned function: decorate it with @at.autotuned.")
    return ctl._tune(call, options, plumbing)


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
        if not isinstance(tier_up, bool):
            raise ConfigError(f"at.autotuned(tier_up={tier_up!r}): pass True or False.")
        if not isinstance(objective, Objective):
            raise ConfigError(f"Autotuned(objective={objective!r}): pass an autotune.Objective.")
        functools.update_wrapper(self, fun)
        self.target = Target(fun, key, jit_kwargs, cache, on_miss)
        # The objective, built once at the public boundary (`autotuned`'s keywords); with ``detect_cache``
        # its compilation_cache is detected when used (`objective`), not now.
        self._objective, self._detect_cache = objective, bool(detect_cache)
        self._record_arg, self.record_mode = record, None
        if record not in (False, None) or os.environ.get(_ENV_RECORD, "").strip():
            from autotune.jit import _record

            self.record_mode = _record.mode(record)
        self.lookups = Lookups(self.target, lambda: self.objective)
        # the call being traced (values mode: its values are recorded), whether on_miss="tune" is due, the last lookup
        self._current, self._pending, self._last_lookup = None, False, None
        traced = functools.wraps(fun)(lambda *args, **kwargs: self._traced_under(XlaChoice(), args, kwargs))
        self._jitted = jax.jit(traced, **jit_kwargs)
        # a cached config's XLA options: a jit per choice, each tracing through this object
        choice_of = lambda a, k: self.lookups.config_for(a, k).config.xla  # noqa: E731
        self._xla = XlaRoutes(self.target, self._jitted, self._traced_under, choice_of)
        self.tier_up = tier_up  # serve the default while the winner compiles (`_tier`)
        self._tier = None
        if tier_up:
            from autotune.jit._tier import Tier

            self._tier = Tier(
                self.target, lambda: self.objective, self._usual_call, self.lookups.lookup, self._xla.jit_for
            )
        prefetch()

    # -- what the decorator was told -----------------------------------------------------
    fun = property(lambda self: self.target.fun, doc="The function as written (not jitted).")
    key = property(lambda self: self.target.key, doc="The stable function key the cache files it under.")
    jit_kwargs = property(lambda self: self.target.jit_options(), doc="A copy of ``jax.jit``'s keyword arguments.")
    on_miss = property(lambda self: self.target.on_miss, doc="What a signature without an entry does.")
    cache_arg = property(lambda self: self.target.cache, doc="What ``cache=`` said (None: the default cache).")

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

    expected_calls = property(lambda self: self._objective.expected_calls, doc="The objective's call count.")
    compile_weight = property(lambda self: self._objective.compile_weight, doc="The objective's compile weight.")
    runtime_weight = property(lambda self: self._objective.runtime_weight, doc="The objective's runtime weight.")
    processes = property(lambda self: self._objective.processes, doc="How many processes run the function.")

    compilation_cache = property(
        lambda self: None if self._detect_cache else self._objective.compilation_cache,
        doc="``compilation_cache`` as the decorator was told it; None: detected when used.",
    )
    jitted = property(lambda self: self._jitted, doc="The plain ``jax.jit`` object (no XLA options).")
    last_lookup = property(lambda self: self._last_lookup, doc="The `Lookup` of the signature traced last.")
    tier = property(lambda self: self._tier, doc="Tier-up's state (`autotune.jit._tier.Tier`); None without it.")

    def function(self) -> Any:
        """What ``@at.autotuned`` hands out: the ``jax.jit`` object itself (calls cost exactly a jit
        dispatch), carrying this object's methods; for a function defined in a class body, a
        descriptor that binds them to the instance too (`AutotunedMethod`); this object when the
        cache holds a config of this function with XLA options (compile options are a jit
        object's, so its calls are routed to a jit per XLA choice: `XlaRoutes`)."""
        if defined_in_class(self.fun):
            return AutotunedMethod(self)
        try:
            self._xla.active = self.reader.has_xla(self.key)
        except Exception:  # noqa: BLE001 - no routing: the plain jit, as before
            self._xla.active = False
        if self._xla.active:
            return self
        jitted = self._jitted
        for name in ("tune", "sites", "config_for", "with_options", "function"):  # every one `Autotuned` has too
            setattr(jitted, name, getattr(self, name))
        jitted.key, jitted.expected_calls, jitted.autotune = self.key, self.expected_calls, self
        return jitted

    # -- the hot path: plain jit dispatch ---------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.record_mode == "values":  # values are concrete only here, not inside jit's trace
            self._current = (args, kwargs)
        try:
            out = self._call(args, kwargs)
        finally:
            self._current = None
        if self._pending:  # on_miss="tune", after the first call of a signature without an entry
            from autotune.jit._fn_tune import tune_after_miss

            self._pending = False
            tune_after_miss(self.target, lambda options: self._tune((args, kwargs), options))
        return out

    def _call(self, args: tuple, kwargs: dict) -> Any:
        """A call: tier-up's (the default serves while the winner compiles), else the usual one."""
        if self._tier is not None:
            return self._tier.call(args, kwargs)
        return self._usual_call(args, kwargs)

    def _usual_call(self, args: tuple, kwargs: dict) -> Any:
        """A call without tier-up: the plain jit, or the jit of the cached config's XLA options."""
        return self._xla.call(args, kwargs) if self._xla.active else self._jitted(*args, **kwargs)

    def _traced_under(self, under: XlaChoice, args: tuple, kwargs: dict) -> Any:
        """Runs once per abstract signature, inside the trace of the jit compiled with the XLA
        options ``under``: one trace of the function gives the key and, replayed under the config
        found, the jit's program.

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
            lookup = failed_lookup(self.key, "key its call signature", exc)
        else:
            lookup = self.lookups.lookup(program, signature)
        # tier-up: a first call whose winner compiles slowly emits the default config; the winner
        # compiles from this same trace on a thread (`_tier.Tier.decides`)
        tiered = self._tier is not None and self._tier.decides(lookup, program, under)
        if not tiered:
            lookup = self._xla.checked(lookup, under)
        self._last_lookup = lookup
        if self.record_mode is not None and lookup.source != "default (error)":
            from autotune.jit import _record

            rec = _record.Recording((args, kwargs), self._current, lookup, self.objective)
            _record.record_call(self.target, self.record_mode, lambda: self.cache, rec)
        if lookup.source != "cache" and self.on_miss == "tune" and lookup.error is None:
            self._pending = True
        try:
            from autotune.program._rewrite import Plan, evaluate, under_policies

            leaves, _, dynamic = split_args(args, kwargs)
            config = Config() if tiered else lookup.config  # the default's sites, under this jit's options
            p = under_policies(program, self.fun, args, kwargs, config)  # re-traced where a config sets a policy
            out = evaluate(p.jaxpr, [leaves[i] for i in dynamic], Plan(p.sites, config))
            return jax.tree_util.tree_unflatten(p.out_tree, out)
        except Exception as exc:
            return self._fallback(args, kwargs, f"emit its config {lookup.config}", exc)

    def _fallback(self, args: tuple, kwargs: dict, what: str, exc: Exception) -> Any:
        """The function traced as ``jax.jit`` traces it (its default config); then one warning
        (none when the function itself raises: that error is the user's, as under ``jax.jit``)."""
        out = self.fun(*args, **kwargs)
        self._last_lookup = failed_lookup(self.key, what, exc)
        return out

    # -- lookups ------------------------------------------------------------------------
    reader = property(lambda self: self.lookups.reader, doc="This function's cache, through its one read path.")
    cache = property(lambda self: self.lookups.reader.cache, doc="The `at.Cache` (opened on first use).")

    def config_for(self, *args: Any, **kwargs: Any) -> Lookup:
        """The config a call with these arguments gets, and where it came from."""
        return self.lookups.config_for(args, kwargs)

    def sites(self, *args: Any, **kwargs: Any):
        """The loop sites of this function traced on these arguments (exactly a call's arguments)."""
        return _keys.program_key(self.fun, args, kwargs, self.jit_kwargs)[0].sites

    autotune = property(lambda self: self, doc="This object, as ``fn.autotune`` names it on the jit handed out.")

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
        self._xla.clear()

    def with_options(self, **overrides: Any) -> Autotuned:
        """A copy with some options replaced (None keeps the current value): the decorator's
        keywords, the objective's figures among them (merged here into one :class:`Objective`)."""
        said = {k: overrides.pop(k, None) for k in OBJECTIVE_KEYWORDS}
        objective, detect = merged_objective(self._objective, self._detect_cache, said)
        opts = dict(cache=self.cache_arg, on_miss=self.on_miss, key=self.key, record=self._record_arg)
        opts.update(tier_up=self.tier_up, **self.jit_kwargs)
        opts.update({k: v for k, v in overrides.items() if v is not None})
        return Autotuned(self.fun, objective=objective, detect_cache=detect, **opts)

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
        from autotune.jit._fn_tune import options_of

        named = dict(n_trials=n_trials, timeout=timeout, sampler=sampler, storage=storage, study_name=study_name)
        opts, kwargs = options_of(self.fun, f"{self.__name__}.tune", {**named, **options})
        return self._tune((args, kwargs), opts)

    def _tune(self, call: tuple[tuple, dict], options: TuneOptions, plumbing: Plumbing | None = None) -> Any:
        from autotune.jit._fn_tune import tune_with

        result = tune_with(self.target, self.objective, lambda: self.cache, call, options, plumbing)
        if result is not None and result.stored == "written":
            self.clear_cache()
        return result

    def __repr__(self) -> str:
        return f"<autotuned {self.key} expected_calls={self.expected_calls}>"

    def __get__(self, obj, objtype=None):
        return self if obj is None else BoundAutotuned(self, obj)


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
    max_memory: int | float | str | None = None,
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
        key: the function's stable key; default ``module:qualname`` (a script's ``__main__`` counts as its module).
        record: ``True`` writes a pending row at the first call per signature, for
            ``autotune tune --recorded`` to tune later; ``"values"`` also keeps the argument
            values (``AUTOTUNE_RECORD=1`` / ``values`` turns it on for every function).
        tier_up: ``True`` never waits for the tuned compile: a signature whose cached winner
            compiles much slower than the default runs the default at once while the winner
            compiles on a background thread, and the winner from the first call after it is built
            (`autotune.jit._tier`; docs/how-to/tier-up.md). Hands out the :class:`Autotuned` object.
        max_memory: a memory budget, ``"12GiB"`` or a fraction such as ``0.5``: docs/how-to/memory-budget.md.
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
    said = {k: v for k, v in locals().items() if k in OBJECTIVE_KEYWORDS}  # the objective's keywords, as said
    objective, _ = merged_objective(DEFAULT, True, said)  # the one Objective, built at the boundary
    detect = compilation_cache is None

    def wrap(f: Callable):
        ctl = Autotuned(
            f, objective=objective, detect_cache=detect, cache=cache, on_miss=on_miss, key=key, record=record,
            tier_up=tier_up, **jit_kwargs,
        )  # fmt: skip
        return ctl if on_miss == "tune" or ctl.record_mode == "values" or ctl.tier_up else ctl.function()

    return wrap if fun is None else wrap(fun)
