"""`at.loop`: a loop whose representation a config chooses."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
from jax import lax

from ._config import REPRS, SiteChoice
from ._errors import ConfigError

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_TAG_PREFIX = "_autotune_loop__"
_TAG_RE = re.compile(
    r"^_autotune_loop__(?P<name>.+)__(?P<length>\d+)_(?P<reverse>[01])_(?P<ncarry>\d+)_"
    r"(?P<nx>\d+)_(?P<repr>scan|for|fori)_(?P<unroll>\d+)(?: at .*)?$"
)


@dataclass(frozen=True)
class LoopTag:
    """What an ``at.loop`` records about itself in the traced program."""

    name: str
    length: int
    reverse: bool
    num_carry: int
    num_xs: int
    default: SiteChoice

    def encode(self) -> str:
        return (
            f"{_TAG_PREFIX}{self.name}__{self.length}_{int(self.reverse)}_{self.num_carry}_"
            f"{self.num_xs}_{self.default.repr}_{self.default.unroll}"
        )

    @classmethod
    def decode(cls, func_src_info: str) -> LoopTag | None:
        m = _TAG_RE.match(func_src_info or "")
        if m is None:
            return None
        return cls(
            name=m["name"],
            length=int(m["length"]),
            reverse=m["reverse"] == "1",
            num_carry=int(m["ncarry"]),
            num_xs=int(m["nx"]),
            default=SiteChoice(m["repr"], int(m["unroll"])),
        )


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
    if repr not in REPRS:
        raise ConfigError(f"at.loop {name!r}: repr={repr!r} is not one of {list(REPRS)}.")
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
        raise ConfigError(
            f"at.loop {name!r}: xs leading axes {sorted(lengths)} disagree with length={length}."
        )
    tag = LoopTag(
        name=name,
        length=int(length),
        reverse=bool(reverse),
        num_carry=len(jax.tree_util.tree_leaves(init)),
        num_xs=len(xs_leaves),
        default=SiteChoice(repr, unroll),
    )

    def tagged_body(carry, x):
        return body(carry, x)

    tagged_body.__name__ = tagged_body.__qualname__ = tag.encode()
    scan_unroll = max(1, length) if repr == "for" else max(1, min(unroll, max(1, length)))
    carry, ys = lax.scan(tagged_body, init, xs, length=length, reverse=reverse, unroll=scan_unroll)
    if repr == "fori" and jax.tree_util.tree_leaves(ys):
        raise ConfigError(
            f"at.loop {name!r}: repr='fori' needs a body that returns no stacked outputs "
            "(return (carry, None)); use repr='scan' or 'for' instead."
        )
    return carry, ys
