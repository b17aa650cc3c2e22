"""Find the loop sites of a traced program and fingerprint the program."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import jax
import numpy as np

from autotune._errors import TraceError
from autotune.program import _compat, _fingerprint
from autotune.program._config import SiteChoice
from autotune.program._loop import LoopTag

_REWRITE_ONLY = ("num_carry", "num_xs", "reverse", "effects", "path", "remat_keys", "remat_in_jit")
"""A site's fields that say how the rewrite re-emits it, not what the site is: left out of its JSON."""


@dataclass(frozen=True)
class LoopSite:
    """One loop of a traced program that a config can re-emit.

    Attributes:
        id: stable, readable id: an ``at.loop``'s name, or for any other loop its
            parent's id, ``/``, then ``<form>@<where>``: ``scan@file.py:line``,
            ``fori@...`` for a fori_loop, ``while@...`` for a while_loop. ``<where>`` is
            the user's line that wrote the loop: the nearest frame outside installed
            packages (site-packages, the standard library, JAX, autotune), following the
            call through the ``jit`` or loop bodies it was traced in; so a flax
            ``nn.scan`` is named where the user applies it, not in flax. With no user
            frame at all, the nearest library frame, else the traced body's definition
            line or name, never ``?``. ``#2``, ``#3``... tell apart loops that would
            otherwise share an id.
        kind: how the site is tuned: ``"loop"`` for ``at.loop``, ``"while"`` for a
            ``lax.while_loop`` (and a ``fori_loop`` with a traced trip count), ``"scan"``
            for everything else (``lax.scan``, a static ``fori_loop``, derived loops).
        length: the trip count; None for a while site, whose trip count is only known
            when it runs.
        depth: how many sites enclose this one (0 = outermost).
        parent: the id of the innermost enclosing site, or None.
        source: ``"file:line"`` of the code that wrote the loop (a library's line when
            the user's is not in the traceback), or None when no frame is known.
        library_source: ``"path:line"`` of the library code that built the loop, when that
            is not ``source``: ``flax/core/axes_scan.py:200``, the path relative to the
            installed folder (site-packages) it lies in; None for a loop the user wrote.
        name: the ``at.loop`` name, else None.
        has_ys: whether the loop stacks per-iteration outputs (then ``"fori"`` is invalid).
        num_carry: how many carry values the loop threads.
        default: the choice the program makes when no config names this site.
        form: what the user wrote: ``"scan"``, ``"fori"``, ``"loop"`` (``at.loop``) or
            ``"while"``.
        derived: True for a loop JAX derived from the user's (the backward loop of
            ``jax.grad``, a rematerialised copy under ``jax.checkpoint``); it is tuned
            as an ordinary scan.
        policy: for a loop whose body makes checkpointed calls (``jax.checkpoint``, flax's
            ``nn.remat``), the rematerialisation policy they have: a name of
            :data:`~autotune.program._config.POLICIES`, or ``"custom"``; None for any other
            loop. Under a ``jax.grad`` taken inside the program the calls appear in the
            backward loop, so that is the site that has it.
        remat_keys: the functions those calls checkpoint (where each is defined), by which a
            re-trace gives them another policy.
        remat_in_jit: whether one of those calls lies inside a ``jax.jit`` of its own, whose
            trace JAX caches (a re-trace must clear that cache to bind the call again).
    """

    id: str
    kind: str
    length: int | None
    depth: int
    parent: str | None
    source: str | None
    name: str | None = None
    has_ys: bool = False
    num_carry: int = 0
    num_xs: int = field(default=0, compare=False, repr=False)
    reverse: bool = field(default=False, compare=False, repr=False)
    default: SiteChoice = SiteChoice()
    form: str = "scan"
    derived: bool = False
    effects: bool = field(default=False, compare=False, repr=False)
    path: tuple = field(default=(), compare=False, repr=False)
    library_source: str | None = field(default=None, compare=False, repr=False)
    policy: str | None = None
    remat_keys: tuple[str, ...] = field(default=(), compare=False, repr=False)
    remat_in_jit: bool = field(default=False, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The site as its JSON describes it: every field but how the rewrite re-emits it."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _REWRITE_ONLY}
        return {**out, "default": self.default.to_dict()}


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


def _user_frame(eqn, outer: tuple) -> _compat.Frame | None:
    """The innermost frame outside installed packages. JAX cuts a traceback where it starts
    tracing a body, so the search goes on through the equations that enclose ``eqn``
    (``outer``, outermost first): a loop in optimistix's jitted ``root_find`` is named by
    the user's call to ``root_find``. Code without a file (``<string>``: ``python -c``, but
    also the methods ``dataclasses`` generates) counts only when no file of the user's does."""
    fileless = None
    for e in (eqn, *reversed(outer)):
        for frame in _compat.frames(e):
            if _compat.installed_path(frame.file) is None:
                if not frame.file.startswith("<"):
                    return frame
                fileless = fileless or frame
    return fileless


def _library_where(eqn, body) -> tuple[str, str | None, int | None]:
    """(name, file, line) that names a loop with no user frame, as before user frames were
    searched past installed packages: JAX's user frame (a library's), else the innermost
    frame JAX does not own, else the traced body's definition, else the outermost frame."""
    frame = _compat.user_frame(eqn) or _compat.library_frame(eqn)
    if frame is not None:
        return "", frame.file, frame.line
    name, file, line = _compat.traced_function(body)
    if file is not None and line is not None:  # built inside JAX: where its body is defined
        return name, file, line
    frame = _compat.outermost_frame(eqn)
    return (name, frame.file, frame.line) if frame is not None else (name, None, None)


def _where(eqn, body, outer: tuple) -> tuple[str, str | None, str | None]:
    """(readable place for the id, ``file:line`` source or None, the library's line when the
    user's names the loop): never ``?``. Ids name files by base name, so no folder counts."""
    name, file, line = _library_where(eqn, body)
    frame = _user_frame(eqn, outer)
    if frame is None:
        if file is None:
            return (name or "anonymous"), None, None
        return f"{os.path.basename(file)}:{line}", f"{file}:{line}", None
    lib = _compat.library_frame(eqn)  # the innermost library frame, even one JAX skips
    if lib is not None:
        file, line = lib.file, lib.line
    library = None
    if file is not None and (file, line) != (frame.file, frame.line):
        library = f"{_compat.installed_path(file) or file}:{line}"
    return f"{os.path.basename(frame.file)}:{frame.line}", f"{frame.file}:{frame.line}", library


def _make_site(
    eqn,
    path: tuple,
    parent: str | None,
    depth: int,
    taken: set[str],
    tag: LoopTag | None,
    transposed: bool,
    outer: tuple,
) -> LoopSite:
    reverse = bool(eqn.params.get("reverse", False))
    if eqn.primitive.name == "while":
        (_, cond), (_, body) = _compat.while_jaxprs(eqn)
        form = "fori" if _compat.traced_for(body) == "fori_loop" else "while"
        kind, name, length, num_carry, num_xs = "while", None, None, len(eqn.outvars), 0
        default, derived = SiteChoice("while", 1), transposed
        effects = _compat.has_effects(body) or _compat.has_effects(cond)
    else:
        body = _body_of(eqn)
        effects = _compat.has_effects(body)
        length = int(eqn.params["length"])
        num_carry = _carry_count(eqn, body)  # JAX may turn invariant carries into consts
        num_xs = _xs_count(eqn, body)  # JVP adds tangent xs, so count from the equation
        # A loop JAX derived from the user's (the transpose under grad, a remat copy) is
        # not the user's loop: it is tuned as an ordinary scan.
        derived = transposed or (tag is not None and tag.reverse != reverse)
        if tag is not None and not derived:
            kind, form, name, default = "loop", "loop", tag.name, tag.default
        else:
            kind, name = "scan", None
            form = "loop" if tag is not None else ("fori" if _compat.traced_for(body) == "fori_loop" else "scan")
            unroll = int(eqn.params.get("unroll", 1)) or length
            default = SiteChoice("for") if length > 1 and unroll >= length else SiteChoice("scan", max(1, unroll))
    where, source, library = _where(eqn, body, outer)
    if kind == "loop":
        base = name
    else:
        local = f"{'fori' if form == 'fori' else 'while' if kind == 'while' else 'scan'}@{where}"
        base = f"{parent}/{local}" if parent else local
    site_id, k = base, 1
    while site_id in taken:
        k += 1
        site_id = f"{base}#{k}"
    taken.add(site_id)
    # the site's fields, grouped: where it is, its loop's shape, what it offers
    # fmt: off
    return LoopSite(
        id=site_id, kind=kind, depth=depth, parent=parent, source=source, name=name, path=path,
        library_source=library, length=length, has_ys=len(eqn.outvars) > num_carry, num_carry=num_carry,
        num_xs=num_xs, reverse=reverse, default=default, form=form, derived=derived, effects=effects,
    )
    # fmt: on


LOOP_PRIMITIVES = ("scan", "while")


def discover(jaxpr: Any) -> list[LoopSite]:
    """Every scan, while loop and ``at.loop`` in ``jaxpr`` and all its sub-jaxprs, outermost first.

    An ``at.loop`` is recognised by the scope it opens around its scan. JAX sometimes
    moves that scope onto a call wrapping the scan (``jax.checkpoint`` under ``grad``),
    so a tag on a container that is not a loop passes down to the loops inside it.
    A loop under a ``transpose`` transform anywhere above it is derived. A checkpointed call
    belongs to the innermost loop around it, and to the first such loop only.
    """
    sites: list[LoopSite] = []
    taken: set[str] = set()
    remat: dict[str, dict[str, str]] = {}  # site id -> {checkpoint key: policy name}
    claimed: set[str] = set()
    in_jit: set[str] = set()  # the sites with a checkpointed call inside a jit of its own

    def visit(jx, path, parent, depth, pending: LoopTag | None, transposed: bool, outer: tuple):
        inner, _ = _compat.unpack(jx)
        for i, eqn in enumerate(inner.eqns):
            here = path + (i,)
            scopes = _compat.name_scopes(eqn)
            tag = LoopTag.from_scopes(scopes) or pending
            under = transposed or any(k == "transform" and n == "transpose" for k, n in scopes)
            site = None
            if parent is not None and _compat.is_checkpoint(eqn):
                key = _compat.checkpoint_key(eqn)
                if key not in claimed or key in remat.get(parent, {}):
                    claimed.add(key)
                    remat.setdefault(parent, {}).setdefault(key, _compat.eqn_policy(eqn))
                    if any(_compat.is_jit(e) for e in outer):
                        in_jit.add(parent)
            if eqn.primitive.name in LOOP_PRIMITIVES:
                site = _make_site(eqn, here, parent, depth, taken, tag, under, outer)
                sites.append(site)
            for addr, sub in _compat.sub_jaxprs(eqn.params):
                if site is None:
                    visit(sub, here + addr, parent, depth, tag, under, outer + (eqn,))
                else:
                    visit(sub, here + addr, site.id, depth + 1, None, under, outer + (eqn,))

    visit(jaxpr, (), None, 0, None, False, ())
    return [_with_remat(s, remat[s.id], s.id in in_jit) if s.id in remat else s for s in sites]


def _with_remat(site: LoopSite, policies: dict[str, str], in_jit: bool) -> LoopSite:
    names = set(policies.values())
    policy = names.pop() if len(names) == 1 else _compat.CUSTOM
    return replace(site, policy=policy, remat_keys=tuple(sorted(policies)), remat_in_jit=in_jit)


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

    @functools.cached_property
    def fingerprint(self) -> str:
        """See :func:`autotune.program._fingerprint.fingerprint`: the program, not its printout."""
        return _fingerprint.fingerprint(self.jaxpr, self.sites)


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


fingerprint = _fingerprint.fingerprint


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
