"""`at.loop`: a loop whose representation a config chooses."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
from jax import lax

from autotune._errors import ConfigError
from autotune.program._config import LOOP_REPRS, SiteChoice, scan_unroll

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_TAG_PREFIX = "autotune.loop:"
_TAG_RE = re.compile(
    r"^autotune\.loop:(?P<name>[A-Za-z0-9_.\-]+):(?P<reverse>[01]):(?P<repr>scan|for|fori):(?P<unroll>\d+)$"
)


@dataclass(frozen=True)
class LoopTag:
    """What an ``at.loop`` records about itself in the traced program.

    It travels as a ``jax.named_scope`` around the loop's ``lax.scan``: JAX keeps the
    scope on the scan equation's name stack through its trace caches, ``jit``, ``vmap``,
    ``jvp`` and ``grad`` (wrapping it in ``jvp(...)``, ``transpose(...)``), so nothing
    depends on the body function's name. Trip count and carry counts are read from the
    equation itself.
    """

    name: str
    reverse: bool
    default: SiteChoice

    def encode(self) -> str:
        return f"{_TAG_PREFIX}{self.name}:{int(self.reverse)}:{self.default.repr}:{self.default.unroll}"

    @classmethod
    def decode(cls, scope: str) -> LoopTag | None:
        m = _TAG_RE.match(scope or "")
        if m is None:
            return None
        return cls(name=m["name"], reverse=m["reverse"] == "1", default=SiteChoice(m["repr"], int(m["unroll"])))

    @classmethod
    def from_scopes(cls, scopes: Sequence[tuple[str, str]]) -> LoopTag | None:
        """The tag of an equation, from its name stack as ``[(kind, name), ...]``.

        Only the innermost scope counts: at.loop opens its scope right around the scan.
        """
        for kind, name in reversed(scopes):
            if kind == "scope":
                return cls.decode(name)
        return None


def loop(
    body: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | None = None,
    *,
    name: str,
    reverse: bool = False,
    repr: str = "scan",
    unroll: int = 1,
) -> tuple[Any, Any]:
    """A loop with ``lax.scan`` semantics whose representation a config picks.

    In plain Python, with ``xs`` a pytree of arrays and ``length`` the trip count::

        def loop(body, init, xs, length, **_):
            carry, ys = init, []
            for i in (reversed(range(length)) if reverse else range(length)):
                carry, y = body(carry, tree_map(lambda x: x[i], xs))
                ys.append(y)
            return carry, stack(ys if not reverse else ys[::-1])

    Under ``at.with_config`` (and so under ``@at.autotuned``) the loop is emitted as
    the config says: ``"for"`` traces ``body`` once per iteration (a Python ``for``),
    ``"scan"`` is ``lax.scan(..., unroll=k)``, ``"fori"`` is ``lax.fori_loop(...,
    unroll=k)`` (only for bodies that return no stacked outputs). Called outside a
    config it emits a ``lax.scan`` with this call's ``unroll`` (``unroll=length``
    for ``repr="for"``), which lowers to the same loop structure.

    Arguments:
        body: ``(carry, x) -> (carry, y)``.
        init: the initial carry (a pytree of arrays).
        xs: a pytree of arrays scanned along their leading axis, or None.
        length: the trip count; required when ``xs`` is None.
        name: the loop's site id: letters, digits, ``_``, ``.``, ``-``.
        reverse: iterate from the last index to the first.
        repr: default representation when no config names this loop.
        unroll: default unroll factor when no config names this loop.

    Returns:
        ``(carry, ys)`` as ``lax.scan`` would.

    Example::

        >>> import jax.numpy as jnp, autotune as at
        >>> carry, _ = at.loop(lambda c, _: (c * 0.5 + 1.0, None), jnp.zeros(3), length=8, name="smooth")
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(
            f"at.loop(name={name!r}): name must be a non-empty string of letters, digits, "
            "'_', '.' or '-' (it becomes the loop's site id)."
        )
    if not isinstance(repr, str) or repr not in LOOP_REPRS:
        raise ConfigError(f"at.loop {name!r}: repr={repr!r} is not one of {list(LOOP_REPRS)}.")
    if isinstance(unroll, bool) or not isinstance(unroll, int) or unroll < 1:
        raise ConfigError(f"at.loop {name!r}: unroll={unroll!r} must be an integer >= 1.")
    xs_leaves = jax.tree_util.tree_leaves(xs)
    lengths = {int(x.shape[0]) for x in xs_leaves if getattr(x, "ndim", 0) >= 1}
    if any(getattr(x, "ndim", 0) < 1 for x in xs_leaves):
        raise ConfigError(f"at.loop {name!r}: every leaf of xs needs a leading axis to loop over.")
    if length is None:
        if not lengths:
            raise ConfigError(f"at.loop {name!r}: pass length= when xs is None.")
        length = lengths.pop()
    if lengths and lengths != {length}:
        raise ConfigError(f"at.loop {name!r}: xs leading axes {sorted(lengths)} disagree with length={length}.")
    # The default is stored clamped to the trip count, so it is always a valid choice.
    default = (
        SiteChoice("for") if repr == "for" else SiteChoice(repr, scan_unroll(SiteChoice(repr, unroll), int(length)))
    )
    tag = LoopTag(name=name, reverse=bool(reverse), default=default)
    with jax.named_scope(tag.encode()):
        carry, ys = lax.scan(body, init, xs, length=length, reverse=reverse, unroll=scan_unroll(default, int(length)))
    if repr == "fori" and jax.tree_util.tree_leaves(ys):
        raise ConfigError(
            f"at.loop {name!r}: repr='fori' needs a body that returns no stacked outputs "
            "(return (carry, None)); use repr='scan' or 'for' instead."
        )
    return carry, ys
