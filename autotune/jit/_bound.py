"""``@at.autotuned`` on methods: the instance bound into calls and into ``.tune``, ``.sites``,
``.config_for`` and ``.lower`` alike.

Both forms forward to the decorator's object (`autotune.jit._decorator.Autotuned`) through its
public methods only: ``instance.method`` is a `BoundAutotuned`, and what the decorator hands out for a
function defined in a class body is an `AutotunedMethod`, the descriptor that makes it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

BOUND = ("tune", "sites", "config_for", "lower", "trace", "eval_shape")
"""The methods that take exactly a call's arguments, so the instance goes first in them too."""


def defined_in_class(fun: Callable) -> bool:
    """Whether ``fun`` was defined in a class body (its qualname is ``...Class.name``)."""
    parts = getattr(fun, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


class BoundAutotuned:
    """``instance.method`` of an ``@at.autotuned`` method: the instance is the first argument
    of calls and of ``.tune``, ``.sites``, ``.config_for``, ``.lower`` alike (static when the
    decorator says ``static_argnums=0``, a traced pytree otherwise, e.g. an ``eqx.Module``)."""

    __slots__ = ("autotune", "__self__")

    def __init__(self, autotuned: Any, obj: Any):
        self.autotune, self.__self__ = autotuned, obj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.autotune(self.__self__, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.autotune, name)
        return functools.partial(attr, self.__self__) if name in BOUND else attr


class AutotunedMethod:
    """What ``@at.autotuned`` hands out for a function defined in a class body: a descriptor
    whose ``instance.method`` is a :class:`BoundAutotuned`; called on the class it is the
    ``jax.jit`` function itself."""

    def __init__(self, autotuned: Any):
        self.autotune = autotuned
        functools.update_wrapper(self, autotuned.fun)
        self.key, self.expected_calls = autotuned.key, autotuned.expected_calls

    def __get__(self, obj, objtype=None):
        return self if obj is None else BoundAutotuned(self.autotune, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.autotune(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.autotune, name)
