"""One call of a function as autotune measures it: the function, its example arguments and
the ``jax.jit`` options, travelling as one value.

A runner measures every config of the same call, so the four belong together: the function
(undecorated), the positional and keyword arguments (static ones as ``jit_kwargs`` declares)
and the keyword arguments of ``jax.jit`` (``static_argnums``, ``donate_argnums``...). Passing
them one by one through the measuring layer let a caller hand over a mismatched set; a
:class:`Call` is built once and read everywhere.

Example::

    >>> import jax.numpy as jnp
    >>> call = Call(lambda x, n: x * n, (jnp.ones(3), 2), jit_kwargs={"static_argnums": 1})
    >>> call.args[1], call.kwargs, call.donating
    (2, {}, False)
    >>> [x.shape for x in call.dynamic()[0]]
    [(3,)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from autotune.program._jitargs import donates, dynamic_args


@dataclass(frozen=True, eq=False)
class Call:
    """A function with its example arguments and ``jax.jit`` options.

    Arguments:
        function: the function as the user wrote it (not ``jax.jit``-wrapped).
        args: its positional example arguments (any sequence; kept as a tuple).
        kwargs: its keyword example arguments (copied into a new dict).
        jit_kwargs: keyword arguments for ``jax.jit`` (copied into a new dict).

    Compared by identity: arrays have no single truth value, so two calls are never equal
    by their contents.
    """

    function: Callable
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    jit_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(self.function):
            raise TypeError(f"Call(function={self.function!r}): pass the function to measure, a callable.")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "kwargs", dict(self.kwargs or {}))
        object.__setattr__(self, "jit_kwargs", dict(self.jit_kwargs or {}))

    @property
    def donating(self) -> bool:
        """True when ``jit_kwargs`` donates an argument (each run then needs fresh inputs)."""
        return donates(self.jit_kwargs)

    def dynamic(self) -> tuple[tuple, dict]:
        """The (positional, keyword) arguments the compiled executable takes: the static ones
        that ``jit_kwargs`` names removed."""
        return dynamic_args(self.function, self.args, self.kwargs, self.jit_kwargs)
