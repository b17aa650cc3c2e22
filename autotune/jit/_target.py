"""`Target`: what ``@at.autotuned`` was told about one function, as one frozen value.

The decorator (`autotune.jit._decorator.Autotuned`) hands this value, never itself, to what hangs
off it: the lookup (`_lookup`), the XLA routes (`_routes`), tier-up (`_tier`), ``fn.tune``
(`_fn_tune`) and recording (`_record`). Each takes the facts it reads as values and the
decorator's behaviour it needs as callables, so none of them can reach into the decorator's state.

Example::

    >>> def smooth(x):
    ...     return x
    >>> t = Target(smooth, "mymodule:smooth", {"static_argnums": 1})
    >>> t.name, t.key, t.jit_kwargs["static_argnums"], t.donating
    ('smooth', 'mymodule:smooth', 1, False)
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune._errors import ConfigError, warn_user_once
from autotune.program import _keys
from autotune.program._jitargs import donates, jit_option_set
from autotune.select._objective import Objective, compilation_cache_on

ON_MISS = ("default", "warn", "tune")
"""What ``on_miss=`` may say: run the default, warn once and run it, or tune after the first call."""

OBJECTIVE_KEYWORDS = (
    "expected_calls",
    "compile_weight",
    "runtime_weight",
    "processes",
    "compilation_cache",
    "max_memory",
)
"""The decorator's keywords that make its :class:`Objective` (`merged_objective`)."""


@dataclass(frozen=True, eq=False)
class Target:
    """One decorated function as the decorator was told it.

    Attributes:
        fun: the function as written (not jitted).
        key: its stable function key: ``key=`` as given, else derived (`function_key`).
        jit_kwargs: the keyword arguments of ``jax.jit`` (read-only).
        cache: what ``cache=`` said: None (``$AUTOTUNE_CACHE`` or the user cache), a path, a URL,
            or an ``at.Cache``.
        on_miss: ``"default"``, ``"warn"`` or ``"tune"`` (`ON_MISS`).

    Compared by identity, like the function it holds.
    """

    fun: Callable
    key: str | None
    jit_kwargs: Mapping[str, Any] = field(default_factory=dict)
    cache: Any = None
    on_miss: str = "default"

    def __post_init__(self) -> None:
        if self.on_miss not in ON_MISS:
            raise ConfigError(f"at.autotuned(on_miss={self.on_miss!r}): choose one of {list(ON_MISS)}.")
        object.__setattr__(self, "key", function_key(self.fun, self.key))
        object.__setattr__(self, "jit_kwargs", types.MappingProxyType(dict(self.jit_kwargs)))

    @property
    def name(self) -> str:
        """The function's ``__name__``, as messages name it (``smooth.tune(*args)``)."""
        return getattr(self.fun, "__name__", self.key.rpartition(":")[2] or self.key)

    @property
    def donating(self) -> bool:
        """Whether ``jax.jit`` donates an argument (a run then consumes its inputs)."""
        return donates(dict(self.jit_kwargs))

    @property
    def has_statics(self) -> bool:
        """Whether ``jax.jit`` treats an argument as static (its executable takes fewer arguments)."""
        return bool(jit_option_set(dict(self.jit_kwargs), "static_argnums")) or bool(
            jit_option_set(dict(self.jit_kwargs), "static_argnames")
        )

    def jit_options(self) -> dict[str, Any]:
        """A fresh dict of ``jax.jit``'s keyword arguments."""
        return dict(self.jit_kwargs)


def merged_objective(base: Objective, detect_cache: bool, said: dict[str, Any]) -> tuple[Objective, bool]:
    """(``base`` with the objective keywords ``said`` replaced (None keeps one), whether its
    compilation cache is still to be detected): the one place the decorator's objective keywords
    become an :class:`Objective` (a bad figure fails here, by name).

    Example::

        >>> goal, detect = merged_objective(Objective(), True, {"expected_calls": 10, "compilation_cache": False})
        >>> goal.expected_calls, goal.compilation_cache, detect
        (10, False, False)
    """
    cache = said.get("compilation_cache")
    if cache is not None:
        compilation_cache_on(cache)  # not a bool: fails by name
    changes = {k: v for k, v in said.items() if v is not None}
    return dataclasses.replace(base, **changes), detect_cache and cache is None


def function_key(fun: Callable, key: str | None) -> str:
    """The key the cache files ``fun`` under: ``key`` when given, else its ``module:qualname``
    (`autotune.program._keys.function_key`), with one warning when that would not be the same in
    another process (a lambda, a function defined inside another)."""
    if key is not None:
        return key
    derived = _keys.function_key(fun)
    why = _keys.unstable_key_reason(derived)
    if why:
        warn_user_once(
            ("unstable-key", derived),
            f"autotune: {derived} has no stable function key ({why}), so a config tuned in one process "
            "is not found in another. Pass a stable name: @at.autotuned(key='mymodule:myfn').",
        )
    return derived
