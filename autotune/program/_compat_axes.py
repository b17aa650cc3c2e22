"""Axis contexts: what ``shard_map`` and ``pmap`` bind for their bodies, for a re-trace.

A body that calls a collective (``psum`` over ``"data"``) traces only where that axis name
is bound, under the manual mesh, with its inputs typed as varying over the manual axes.
JAX binds all three while it traces the body; :func:`axis_context` binds them again so that
``autotune.program._rewrite`` can re-trace a body in place, and :func:`with_manual_axes` keeps the
inputs' types. Part of the ``_compat`` layer: the JAX internals used here are read by
duck typing, each with a fallback; where one is missing the re-trace fails with JAX's own
error, and a study holds that loop at its default (``autotune.program._rewrite.unrewritable``).

Example::

    with axis_context(shard_map_eqn):
        jaxpr = jax.make_jaxpr(body)(*[with_manual_axes(to_struct(a), a) for a in avals])
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any

import jax


def _sds_params() -> dict[str, bool]:
    try:
        names = inspect.signature(jax.ShapeDtypeStruct.__init__).parameters
    except (TypeError, ValueError):
        return {}
    return {k: k in names for k in ("manual_axis_type", "vma")}


_SDS_TAKES = _sds_params()


def with_manual_axes(struct: jax.ShapeDtypeStruct, aval: Any) -> jax.ShapeDtypeStruct:
    """``struct`` (the shape and dtype of ``aval``) keeping which manual mesh axes ``aval``
    varies over: inside ``shard_map`` a body's inputs are typed ``f32[2]{V:data}``, and a body
    re-traced without that type no longer matches the equation that holds it."""
    kwargs: dict[str, Any] = {}
    mat = getattr(aval, "mat", None)  # jax >= 0.10: varying/unreduced/reduced axes
    if mat is not None and _SDS_TAKES.get("manual_axis_type") and not getattr(mat, "empty", True):
        kwargs["manual_axis_type"] = mat
    vma = getattr(aval, "vma", None)  # jax 0.6 - 0.9 spelled it as a frozenset of axis names
    if vma and _SDS_TAKES.get("vma"):
        kwargs["vma"] = vma
    if not kwargs:
        return struct
    sharding = getattr(aval, "sharding", None)  # the manual mesh the axes belong to
    if sharding is not None and not getattr(getattr(sharding, "mesh", None), "empty", True):
        kwargs["sharding"] = sharding
    try:
        return jax.ShapeDtypeStruct(struct.shape, struct.dtype, weak_type=struct.weak_type, **kwargs)
    except (TypeError, ValueError, AssertionError):  # a layout this jax does not take: plain type
        return struct


# Primitives whose bodies run with axis names bound: a body re-traced outside that binding
# fails ("unbound axis name") or changes type. Each maps an equation's params to the bindings.
def _shard_map_bindings(params: dict[str, Any]) -> tuple[list[tuple[Any, int]], Any, Any]:
    """(axis name/size pairs, manual abstract mesh or None, check_vma or None) of a shard_map."""
    mesh = params["mesh"]
    key = next((k for k in ("newly_manual_axes", "manual_axes", "axis_names") if k in params), None)
    if key is not None:  # jax.shard_map (jax >= 0.6): the axes this shard_map makes manual
        newly = frozenset(params[key])
        manual = newly | frozenset(getattr(mesh, "manual_axes", ()) or ())
    else:  # jax.experimental.shard_map: every mesh axis not left to the compiler (``auto``)
        newly = manual = frozenset(mesh.axis_names) - frozenset(params.get("auto", ()) or ())
    pairs = [(k, v) for k, v in mesh.shape.items() if k in manual]
    inner_mesh = None
    try:
        from jax._src import shard_map as _sm

        inner_mesh = _sm._as_manual_mesh(mesh, newly)
    except Exception:  # older layout: no abstract mesh to set, the axis env is what binds names
        try:
            from jax.sharding import AxisType

            inner_mesh = mesh.abstract_mesh.update_axis_types({n: AxisType.Manual for n in newly})
        except Exception:
            inner_mesh = None
    check = params.get("check_vma", params.get("check_rep"))
    return pairs, inner_mesh, check


def _pmap_bindings(params: dict[str, Any]) -> tuple[list[tuple[Any, int]], Any, Any]:
    size = params.get("global_axis_size", params.get("axis_size"))
    return [(params["axis_name"], int(size))], None, None


_AXIS_BINDERS = {"shard_map": _shard_map_bindings, "xla_pmap": _pmap_bindings}


@contextlib.contextmanager
def axis_context(eqn: Any | None):
    """Inside, the axis names, manual mesh and type checks that ``eqn``'s primitive binds for
    its bodies are bound as when JAX traced them, so a body can be re-traced in place.

    A no-op for an equation that binds no axes (and for ``None``). Nested bodies inherit the
    binding, as they do when JAX traces them.
    """
    binder = _AXIS_BINDERS.get(getattr(getattr(eqn, "primitive", None), "name", None))
    if binder is None:
        yield
        return
    pairs, inner_mesh, check = binder(eqn.params)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_extend_axis_env(pairs))
        if inner_mesh is not None:
            use = getattr(jax.sharding, "use_abstract_mesh", None)
            if use is not None:
                stack.enter_context(use(inner_mesh))
        if check is not None:
            try:
                from jax._src import config as _config

                stack.enter_context(_config._check_vma(bool(check)))
            except (ImportError, AttributeError):  # older jax: checked by the primitive alone
                pass
        yield


def _extend_axis_env(pairs: list[tuple[Any, int]]):
    try:
        from jax._src import core as _core

        return _core.extend_axis_env_nd(pairs)
    except (ImportError, AttributeError):  # private API moved: the re-trace then fails with JAX's
        return contextlib.nullcontext()  # unbound-axis error, and a study holds that site at its default
