"""``@at.autotuned`` on methods: the instance is bound into calls and into
``.tune``, ``.sites``, ``.config_for`` and ``.lower`` alike."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def defined_in_class(fun: Callable) -> bool:
    """Whether ``fun`` was defined in a class body (its qualname is ``...Class.name``)."""
    parts = getattr(fun, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


class BoundAutotuned:
    """``instance.method`` of an ``@at.autotuned`` method: the instance is the first argument
    of calls and of ``.tune``, ``.sites``, ``.config_for``, ``.lower`` alike (static when the
    decorator says ``static_argnums=0``, a traced pytree otherwise, e.g. an ``eqx.Module``)."""

    __slots__ = ("autotune", "__self__")

    def __init__(self, ctl: Any, obj: Any):
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

    def __init__(self, ctl: Any):
        self.autotune = ctl
        functools.update_wrapper(self, ctl.fun)
        self.key, self.expected_calls = ctl.key, ctl.expected_calls

    def __get__(self, obj, objtype=None):
        return self if obj is None else BoundAutotuned(self.autotune, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.autotune._jitted(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.autotune, name)
