"""Which of a call's arguments a compiled executable takes, under ``jax.jit``'s options."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def jit_option_set(jit_kwargs: dict[str, Any], name: str) -> set:
    """A ``jax.jit`` option that takes one or several argument numbers or names, as a set
    (``static_argnums=0`` is argument 0, not "none")."""
    value = jit_kwargs.get(name)
    return set() if value is None else {value} if isinstance(value, (int, str)) else set(value)


def dynamic_args(fn: Callable, args: tuple, kwargs: dict, jit_kwargs: dict) -> tuple[tuple, dict]:
    """The arguments a compiled executable takes: the static ones removed.

    Like ``jax.jit``, a static argument declared by number may be passed by
    keyword and one declared by name may be passed by position.
    """
    nums, names = jit_option_set(jit_kwargs, "static_argnums"), jit_option_set(jit_kwargs, "static_argnames")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nums = {n % len(positional) if positional and n < 0 else n for n in nums}
    for i, name in enumerate(positional):
        if name in names:
            nums.add(i)
        if i in nums:
            names.add(name)
    if args and not positional:
        nums = {n % len(args) for n in nums}
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in names}
    return tuple(a for i, a in enumerate(args) if i not in nums), dyn_kwargs


def donates(jit_kwargs: dict[str, Any]) -> bool:
    return bool(jit_option_set(jit_kwargs, "donate_argnums") or jit_option_set(jit_kwargs, "donate_argnames"))
