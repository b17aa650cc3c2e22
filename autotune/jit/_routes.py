"""`XlaRoutes`: a decorated function's calls sent to the jit of their cached config's XLA options,
and `call_key`, the cheap key of a call's signature that routes (and tier-up) index by.

Compile options belong to a ``jax.jit`` object, not to a signature, so a function whose cached
configs set XLA options has one jit per XLA choice, and per signature the choice its calls go to.
The routes take the decorator's facts as a `Target` and its behaviour as callables (how a call is
traced under a choice, which choice a signature's config has): never the decorator itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

from autotune._errors import error_text, warn_user_once
from autotune.jit._lookup import Lookup
from autotune.jit._target import Target
from autotune.program import _keys
from autotune.program._config import Config
from autotune.program._xla import XlaChoice, jit_options


class XlaRoutes:
    """The XLA options of an ``Autotuned``'s cached configs: compile options belong to a jit object,
    not to a signature, so there is one jit per XLA choice, and per signature the choice its calls
    go to. ``active`` is False until a cached config sets XLA options; until then every call is the
    plain jit's. Options that fail to compile: the default config and one warning."""

    def __init__(
        self,
        target: Target,
        plain: Any,
        traced_under: Callable[[XlaChoice, tuple, dict], Any],
        choice_of: Callable[[tuple, dict], XlaChoice],
    ):
        """``plain``: the jit without XLA options; ``traced_under(choice, args, kwargs)``: the
        program a jit compiled with ``choice`` traces; ``choice_of(args, kwargs)``: the XLA choice
        of the config a call's signature gets."""
        self.target, self.plain = target, plain
        self._traced_under, self._choice_of = traced_under, choice_of
        self.jits: dict[XlaChoice, Any] = {XlaChoice(): plain}
        self.routes: dict[str, XlaChoice] = {}
        self.failed: set[str] = set()  # signatures whose XLA options failed: the default config
        self.by_call: dict[Any, Any] = {}  # a call's cheap key -> its jit (`call_key`)
        self.active = False

    def jit_for(self, choice: XlaChoice) -> Any:
        """The jit object whose compile options carry ``choice`` (the plain jit for none)."""
        jitted = self.jits.get(choice)
        if jitted is None:
            under = self._traced_under
            traced = functools.wraps(self.target.fun)(lambda *a, **k: under(choice, a, k))
            jitted = self.jits[choice] = jax.jit(traced, **jit_options(choice, self.target.jit_options()))
        return jitted

    def clear(self) -> None:
        """Forget every compiled version and route: a signature's next call looks its config up again."""
        for jitted in self.jits.values():
            jitted.clear_cache()
        self.routes.clear()
        self.by_call.clear()

    def staged(self, args: tuple, kwargs: dict) -> Any:
        """The jit a call with these arguments compiles through: its config's XLA choice's (``.lower``)."""
        try:
            signature = _keys.signature(args, kwargs)
            if signature in self.failed:
                return self.plain
            choice = self.routes.get(signature)
            if choice is None:
                choice = self.routes[signature] = self._choice_of(args, kwargs)
            return self.jit_for(choice)
        except Exception:  # noqa: BLE001 - routing is ours: the plain jit decides and reports
            return self.plain

    def call(self, args: tuple, kwargs: dict) -> Any:
        """A call through the jit of its signature's XLA choice (looked up on its first call)."""
        plain = self.plain
        if not self.active:
            return plain(*args, **kwargs)
        key = call_key(args, kwargs)
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
            ("xla-failed", self.target.key, str(choice)),
            f"autotune: {self.target.key}'s cached config sets XLA options {choice}, which failed here "
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
                ("xla-unrouted", self.target.key),
                f"autotune: {self.target.key}'s cached config sets XLA options ({wanted}), which a jax.jit "
                "object applies to all its signatures or none; this call compiles without them. Decorate "
                "it after the cache holds the entry (then calls are routed per signature).",
            )
        return lookup


def call_key(args: tuple, kwargs: dict) -> Any:
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
