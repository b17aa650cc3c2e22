"""Find the loop sites of a traced program and fingerprint the program."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from . import _compat
from ._config import SiteChoice
from ._errors import TraceError
from ._loop import LoopTag


@dataclass(frozen=True)
class LoopSite:
    """One loop of a traced program that a config can re-emit.

    Attributes:
        id: stable, readable id: an ``at.loop``'s name, or for a ``lax.scan`` /
            ``lax.fori_loop`` its parent's id, ``/``, then ``scan@file.py:line``
            (``fori@...`` for a fori_loop); ``#2``, ``#3``... tell apart loops that
            would otherwise share an id.
        kind: ``"loop"`` for ``at.loop``, ``"scan"`` for everything else.
        length: the trip count.
        depth: how many sites enclose this one (0 = outermost).
        parent: the id of the innermost enclosing site, or None.
        source: ``"file:line"`` of the user code that wrote the loop, or None.
        name: the ``at.loop`` name, else None.
        has_ys: whether the loop stacks per-iteration outputs (then ``"fori"`` is invalid).
        default: the choice the program makes when no config names this site.
    """

    id: str
    kind: str
    length: int
    depth: int
    parent: str | None
    source: str | None
    name: str | None = None
    has_ys: bool = False
    num_carry: int = 0
    num_xs: int = field(default=0, compare=False, repr=False)
    reverse: bool = field(default=False, compare=False, repr=False)
    default: SiteChoice = SiteChoice()
    path: tuple = field(default=(), compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "kind": self.kind, "length": self.length, "depth": self.depth,
            "parent": self.parent, "source": self.source, "name": self.name,
            "has_ys": self.has_ys, "default": self.default.to_dict(),
        }


def _body_of(eqn) -> Any:
    for _, sub in _compat.sub_jaxprs(eqn.params):
        return sub
    raise TraceError("A scan equation without a body jaxpr: this JAX version is not supported.")


def _carry_count(eqn, body) -> int:
    """Carry outputs keep their rank; stacked outputs gain a leading axis."""
    inner, _ = _compat.unpack(body)
    n = 0
    for body_out, out in zip(inner.outvars, eqn.outvars):
        if len(body_out.aval.shape) != len(out.aval.shape):
            break
        n += 1
    return n


def _xs_count(eqn, body) -> int:
    """Scanned operands are the trailing ones, one rank above the body's input."""
    inner, _ = _compat.unpack(body)
    n = 0
    for operand, body_in in zip(reversed(eqn.invars), reversed(inner.invars)):
        if len(operand.aval.shape) != len(body_in.aval.shape) + 1:
            break
        n += 1
    return n


def _make_site(eqn, path: tuple, parent: str | None, depth: int, taken: set[str]) -> LoopSite:
    body = _body_of(eqn)
    info = getattr(_compat.unpack(body)[0], "debug_info", None)
    func_src = getattr(info, "func_src_info", "") or ""
    frame = _compat.user_frame(eqn)
    source = f"{frame[0]}:{frame[1]}" if frame else None
    tag = LoopTag.decode(func_src)
    reverse = bool(eqn.params.get("reverse", False))
    if tag is not None and tag.reverse != reverse:
        # A loop JAX derived from an at.loop (the transpose under grad runs backwards):
        # it is not the user's loop, so it is tuned as an ordinary scan.
        tag = None
    if tag is not None:
        base, kind, name = tag.name, "loop", tag.name
        # JAX may turn loop-invariant carries into consts, so count from the equation.
        num_carry, length, default = _carry_count(eqn, body), tag.length, tag.default
        num_xs = _xs_count(eqn, body)  # JVP adds tangent xs, so count from the equation too
    else:
        fori = getattr(info, "traced_for", "") == "fori_loop"
        where = f"{os.path.basename(frame[0])}:{frame[1]}" if frame else "?"
        local = f"{'fori' if fori else 'scan'}@{where}"
        base = f"{parent}/{local}" if parent else local
        kind, name = "scan", None
        length = int(eqn.params["length"])
        num_carry = _carry_count(eqn, body)
        num_xs = 0
        unroll = int(eqn.params.get("unroll", 1)) or length
        default = SiteChoice("for") if length > 1 and unroll >= length else SiteChoice("scan", max(1, unroll))
    site_id, k = base, 1
    while site_id in taken:
        k += 1
        site_id = f"{base}#{k}"
    taken.add(site_id)
    return LoopSite(
        id=site_id, kind=kind, length=length, depth=depth, parent=parent, source=source,
        name=name, has_ys=len(eqn.outvars) > num_carry, num_carry=num_carry,
        num_xs=num_xs, reverse=reverse, default=default, path=path,
    )


def discover(jaxpr: Any) -> list[LoopSite]:
    """Every scan (automatic or ``at.loop``) in ``jaxpr`` and all its sub-jaxprs, outermost first."""
    sites: list[LoopSite] = []
    taken: set[str] = set()

    def visit(jx, path, parent, depth):
        inner, _ = _compat.unpack(jx)
        for i, eqn in enumerate(inner.eqns):
            here = path + (i,)
            site = None
            if eqn.primitive.name == "scan":
                site = _make_site(eqn, here, parent, depth, taken)
                sites.append(site)
            for addr, sub in _compat.sub_jaxprs(eqn.params):
                if site is None:
                    visit(sub, here + addr, parent, depth)
                else:
                    visit(sub, here + addr, site.id, depth + 1)

    visit(jaxpr, (), None, 0)
    return sites


def _is_dynamic(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct))


def _struct_of(x: Any) -> jax.ShapeDtypeStruct:
    if isinstance(x, jax.ShapeDtypeStruct):
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        return jax.ShapeDtypeStruct(np.shape(x), x.dtype)
    return _compat.to_struct(_compat.aval_of(x))


@dataclass
class Program:
    """A function traced once in canonical form (every ``at.loop`` as a tagged scan)."""

    jaxpr: Any
    out_tree: Any
    sites: list[LoopSite]

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.jaxpr, self.sites)


def split_args(args: tuple, kwargs: dict) -> tuple[list, Any, list[int]]:
    """Flatten (args, kwargs); array leaves are dynamic, every other leaf is static."""
    leaves, treedef = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)))
    return leaves, treedef, [i for i, leaf in enumerate(leaves) if _is_dynamic(leaf)]


def flat_function(fn: Callable, leaves: list, treedef: Any, dynamic: list[int]) -> Callable:
    def flat_fn(*dyn_values):
        filled = list(leaves)
        for i, v in zip(dynamic, dyn_values):
            filled[i] = v
        a, k = jax.tree_util.tree_unflatten(treedef, filled)
        return fn(*a, **k)

    return flat_fn


def trace_program(fn: Callable, args: tuple, kwargs: dict | None = None) -> Program:
    """Trace ``fn`` on the abstract values of its array arguments."""
    leaves, treedef, dynamic = split_args(args, kwargs or {})
    structs = [_struct_of(leaves[i]) for i in dynamic]
    flat_fn = flat_function(fn, leaves, treedef, dynamic)
    jaxpr, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*structs)
    return Program(jaxpr, jax.tree_util.tree_structure(out_shape), discover(jaxpr))


_UNROLL_RE = re.compile(r"unroll=\d+")
_ADDRESS_RE = re.compile(r" at 0x[0-9a-fA-F]+")


def fingerprint(jaxpr: Any, sites: list[LoopSite]) -> str:
    """A hash of the program with every unroll normalised, and of its site ids.

    Editing the function (or moving a loop to another line) changes it, so a
    stale cache entry is never applied; re-choosing unroll factors does not.
    """
    text = _ADDRESS_RE.sub("", _UNROLL_RE.sub("unroll=*", str(jaxpr)))
    ids = json.dumps([(s.id, s.kind, s.length) for s in sites])
    return hashlib.sha256(f"{text}\n{ids}".encode()).hexdigest()[:32]


def sites(fn: Callable, *args: Any, **kwargs: Any) -> list[LoopSite]:
    """Every loop site of ``fn`` traced on ``args``, outermost first.

    Array leaves of the arguments (``jax.Array``, NumPy arrays,
    ``jax.ShapeDtypeStruct``) are traced abstractly; every other leaf (Python
    numbers, strings, ...) is treated as static, as if listed in ``static_argnums``.

    Example::

        >>> import jax, jax.numpy as jnp, autotune as at
        >>> def f(x):
        ...     return jax.lax.scan(lambda c, _: (c + 1.0, None), x, length=4)[0]
        >>> [s.kind for s in at.sites(f, jnp.zeros(2))]
        ['scan']
    """
    return trace_program(fn, args, kwargs).sites
