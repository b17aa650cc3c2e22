"""``@at.autotuned`` on methods: the instance is bound into calls and into
``.tune``, ``.sites``, ``.config_for`` and ``.lower`` alike; and :class:`XlaRoutes`, which sends
a call to the jit of its cached config's XLA options."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax

from autotune._errors import error_text, warn_user_once
from autotune.jit._lookup import Lookup, cache_has_xla
from autotune.program import _keys
from autotune.program._config import Config
from autotune.program._xla import XlaChoice, jit_options

if TYPE_CHECKING:
    from autotune.jit._decorator import Autotuned


def defined_in_class(fun: Callable) -> bool:
    """Whether ``fun`` was defined in a class body (its qualname is ``...Class.name``)."""
    parts = getattr(fun, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


class BoundAutotuned:
    """``instance.method`` of an ``@at.autotuned`` method: the instance is the first argument
    of calls and of ``.tune``, ``.sites``, ``.config_for``, ``.lower`` alike (static when the
    decorator says ``static_argnums=0``, a traced pytree otherwise, e.g. an ``eqx.Module``)."""

    __slots__ = ("autotune", "__self__")

    def __init__(self, ctl: Autotuned, obj: Any):
        self.autotune, self.__self__ = ctl, obj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.autotune(self.__self__, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.autotune, name)
        if name in ("tune", "sites", "config_for", "lower", "trace", "eval_shape"):
            return functools.partial(attr, self.__self__)
        return attr


class AutotunedMethod:
    """What ``@at.autotuned`` hands out for a function defined in a class body: a descriptor
    whose ``instance.method`` is a :class:`BoundAutotuned`; called on the class it is the
    ``jax.jit`` function itself."""

    def __init__(self, ctl: Autotuned):
        self.autotune = ctl
        functools.update_wrapper(self, ctl.fun)
        self.key, self.expected_calls = ctl.key, ctl.expected_calls

    def __get__(self, obj, objtype=None):
        return self if obj is None else BoundAutotuned(self.autotune, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.autotune._call(args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.autotune, name)


def handed_out(ctl: Autotuned) -> Any:
    """What ``@at.autotuned`` hands out for the `Autotuned` ``ctl``: the ``jax.jit`` object itself
    (so calls cost exactly a jit dispatch), carrying ``ctl``'s methods as attributes; for a method
    defined in a class body, a descriptor that binds them to the instance too. When the cache
    holds a config of this function with XLA options, ``ctl`` itself: compile options are a jit
    object's, so its calls are routed to a jit per XLA choice (`XlaRoutes`)."""
    if defined_in_class(ctl.fun):
        return AutotunedMethod(ctl)
    try:
        ctl.xla.active = cache_has_xla(ctl)
    except Exception:  # noqa: BLE001 - no routing: the plain jit, as before
        ctl.xla.active = False
    if ctl.xla.active:  # a cached config sets XLA options: ctl routes calls per signature
        return ctl
    jitted = ctl.jitted
    for name in ("tune", "sites", "config_for", "with_options", "function"):  # every one `Autotuned` has too
        setattr(jitted, name, getattr(ctl, name))
    jitted.key = ctl.key
    jitted.expected_calls = ctl.expected_calls
    jitted.autotune = ctl
    return jitted


class XlaRoutes:
    """The XLA options of an ``Autotuned``'s cached configs: compile options belong to a jit object,
    not to a signature, so there is one jit per XLA choice, and per signature the choice its calls
    go to. ``active`` is False until a cached config sets XLA options; until then every call is the
    plain jit's. Options that fail to compile: the default config and one warning."""

    def __init__(self, ctl: Autotuned):
        self.ctl = ctl
        self.jits: dict[XlaChoice, Any] = {XlaChoice(): ctl.jitted}
        self.routes: dict[str, XlaChoice] = {}
        self.failed: set[str] = set()  # signatures whose XLA options failed: the default config
        self.by_call: dict[Any, Any] = {}  # a call's cheap key -> its jit (`_call_key`)
        self.active = False

    def jit_for(self, choice: XlaChoice) -> Any:
        """The jit object whose compile options carry ``choice`` (the plain jit for none)."""
        jitted = self.jits.get(choice)
        if jitted is None:
            traced = functools.wraps(self.ctl.fun)(lambda *a, **k: self.ctl.traced_under(choice, a, k))
            jitted = self.jits[choice] = jax.jit(traced, **jit_options(choice, self.ctl.jit_kwargs))
        return jitted

    def staged(self, args: tuple, kwargs: dict) -> Any:
        """The jit a call with these arguments compiles through: its config's XLA choice's (``.lower``)."""
        try:
            signature = _keys.signature(args, kwargs)
            if signature in self.failed:
                return self.ctl.jitted
            choice = self.routes.get(signature)
            if choice is None:
                choice = self.routes[signature] = self.ctl.config_for(*args, **kwargs).config.xla
            return self.jit_for(choice)
        except Exception:  # noqa: BLE001 - routing is ours: the plain jit decides and reports
            return self.ctl.jitted

    def call(self, args: tuple, kwargs: dict) -> Any:
        """A call through the jit of its signature's XLA choice (looked up on its first call)."""
        plain = self.ctl.jitted
        if not self.active:
            return plain(*args, **kwargs)
        key = _call_key(args, kwargs)
        jitted = self.by_call.get(key) if key is not None else None
        if jitted is None:
            jitted = self.staged(args, kwargs)
            if key is not None:
                if len(self.by_call) >= 1024:  # Python scalars key by value: keep it bounded
                    self.by_call.clear()
                self.by_call[key] = jitted
        if jitted is plain:
            return plain(*args, **kwargs)
        try:
            return jitted(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the plain jit below tells ours from the user's errors
            error = exc
        signature = _keys.signature(args, kwargs)
        self.failed.add(signature)  # the plain jit's trace emits the default config for it
        try:
            out = plain(*args, **kwargs)
        except Exception:
            self.failed.discard(signature)  # it fails without the options too: the user's error
            raise
        choice, self.routes[signature] = self.routes.get(signature), XlaChoice()
        self.by_call = {k: j for k, j in self.by_call.items() if j is not jitted}
        warn_user_once(
            ("xla-failed", self.ctl.key, str(choice)),
            f"autotune: {self.ctl.key}'s cached config sets XLA options {choice}, which failed here "
            f"({error_text(error)}); it runs its default config. Re-tune it on this machine.",
        )
        return out

    def checked(self, lookup: Lookup, under: XlaChoice) -> Lookup:
        """``lookup`` as a jit compiled with the XLA options ``under`` can apply it: a signature whose
        options failed runs the default config; a config whose options this jit lacks has its sites
        applied, its calls are routed to its own jit from now on, and one warning says so when the
        bare jit was handed out (it cannot route)."""
        wanted = lookup.config.xla
        if lookup.signature in self.failed:
            return Lookup(
                Config(), "default (error)", None, lookup.fingerprint, lookup.signature, lookup.device_key,
                "XLA options failed",
            )  # fmt: skip
        if wanted == under:
            return lookup
        self.routes[lookup.signature] = wanted
        if not self.active:
            self.active = True  # the Autotuned object's own calls route from now on
            warn_user_once(
                ("xla-unrouted", self.ctl.key),
                f"autotune: {self.ctl.key}'s cached config sets XLA options ({wanted}), which a jax.jit "
                "object applies to all its signatures or none; this call compiles without them. Decorate "
                "it after the cache holds the entry (then calls are routed per signature).",
            )
        return lookup


def _call_key(args: tuple, kwargs: dict) -> Any:
    """A cheap key of a call's signature, at least as fine as `_keys.signature` (the tree, and per
    leaf its shape, dtype, weak type and sharding, or its value), or None when a leaf cannot key."""
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    parts = []
    for x in leaves:
        if isinstance(x, jax.Array):
            parts.append((x.shape, x.dtype, x.weak_type, x.sharding))
        elif hasattr(x, "shape") and hasattr(x, "dtype"):  # numpy: jit reads its shape and dtype only
            parts.append((type(x), x.shape, x.dtype))
        else:
            parts.append((type(x), x))
    try:
        key = (tree, tuple(parts))
        hash(key)
    except TypeError:
        return None
    return key
