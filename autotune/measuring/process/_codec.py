"""Values as JSON for the worker protocol: arrays as base64 ``.npy`` (``allow_pickle=False``),
argument trees as tagged JSON. Nothing is ever pickled.

dtypes NumPy cannot describe in an ``.npy`` header (``bfloat16``, ``float8_*``, ``int4``...)
travel as unsigned integers of the same width plus their name, and are viewed back through
``ml_dtypes`` (which jaxlib depends on) on the other side.
"""

from __future__ import annotations

import base64
import hashlib
import io
from typing import Any

import numpy as np

from autotune.measuring.process._shardings import NotPortable, encode_sharding, place


def encode_array(x: Any) -> dict[str, Any]:
    """One array as JSON: its dtype name and base64 ``.npy`` bytes (no pickle).

    Example::

        >>> decode_array(encode_array(np.arange(3))).tolist()
        [0, 1, 2]
    """
    a = np.asarray(x)
    if a.dtype.kind == "O":
        raise TypeError("object arrays cannot be sent to the worker")
    raw = a
    try:
        native = np.dtype(a.dtype.str) == a.dtype
    except TypeError:
        native = False
    if not native:
        raw = a.view(f"u{a.dtype.itemsize}")
    buf = io.BytesIO()
    np.save(buf, raw, allow_pickle=False)  # np.ascontiguousarray would turn a 0-d array into 1-d
    return {"dtype": a.dtype.name, "npy": base64.b64encode(buf.getvalue()).decode("ascii")}


def _resolve_dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def decode_array(d: dict[str, Any]) -> np.ndarray:
    """The array :func:`encode_array` wrote."""
    a = np.load(io.BytesIO(base64.b64decode(d["npy"])), allow_pickle=False)
    want = _resolve_dtype(d["dtype"])
    return a if a.dtype == want else a.view(want)


def digest(leaves: list[Any]) -> str:
    """A short hash of arrays' dtypes, shapes and bytes: the same inputs on both sides."""
    h = hashlib.sha256()
    for a in leaves:
        a = np.asarray(a)
        h.update(f"{a.dtype.name}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _is_array(x: Any) -> bool:
    import jax

    return isinstance(x, (jax.Array, np.ndarray, np.generic))


def encode_tree(value: Any, where: str = "the arguments") -> Any:
    """A call's arguments as tagged JSON: arrays as ``.npy`` (noting which were JAX arrays),
    Python scalars, strings and None as themselves, tuples, lists and dicts with string keys
    as containers. Anything else (a custom pytree node, an object) raises :class:`NotPortable`.
    """
    import jax

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and type(value) in (int, float):
        return value
    if _is_array(value):
        if isinstance(value, jax.Array) and getattr(getattr(value, "aval", None), "weak_type", False):
            if value.ndim != 0:
                raise NotPortable(
                    f"{where} hold a weakly typed array of shape {value.shape}, which "
                    "cannot be rebuilt exactly in another process"
                )
            return _placed({"weak": value.item()}, value, where)
        node = _placed({"jax": isinstance(value, jax.Array)}, value, where)  # first: it refuses what cannot cross
        return {"array": encode_array(value), **node}
    if isinstance(value, tuple) and type(value) is tuple:
        return {"tuple": [encode_tree(v, where) for v in value]}
    if isinstance(value, list) and type(value) is list:
        return {"list": [encode_tree(v, where) for v in value]}
    if isinstance(value, dict) and type(value) is dict:
        if not all(isinstance(k, str) for k in value):
            raise NotPortable(f"{where} hold a dict with non-string keys")
        return {"dict": {k: encode_tree(v, where) for k, v in value.items()}}
    raise NotPortable(
        f"{where} hold a {type(value).__module__}.{type(value).__qualname__}, which cannot be "
        "sent to another process as JSON (only arrays, Python scalars, strings, None, tuples, "
        "lists and dicts can)"
    )


def _placed(node: dict[str, Any], value: Any, where: str) -> dict[str, Any]:
    """``node`` with the array's sharding when it is committed (see ``_shardings``)."""
    sharding = encode_sharding(value, where)
    return node if sharding is None else {**node, "sharding": sharding}


def decode_tree(value: Any, meshes: dict | None = None) -> Any:
    """The arguments :func:`encode_tree` wrote: JAX arrays back where they were committed
    (the same mesh, sharding or device), uncommitted ones on the default device. Raises
    ``NotPortable`` when this process lacks a device they were on."""
    meshes = {} if meshes is None else meshes
    if not isinstance(value, dict):
        return value
    if "array" in value:
        a = decode_array(value["array"])
        return place(a, value.get("sharding"), meshes) if value.get("jax") else a
    if "weak" in value:
        return place(value["weak"], value.get("sharding"), meshes)
    if "tuple" in value:
        return tuple(decode_tree(v, meshes) for v in value["tuple"])
    if "list" in value:
        return [decode_tree(v, meshes) for v in value["list"]]
    return {k: decode_tree(v, meshes) for k, v in value["dict"].items()}


def jax_leaves(tree: Any) -> list[Any]:
    """The array leaves of a call's arguments as they are (for ``_shardings.placement``)."""
    import jax

    return [x for x in jax.tree_util.tree_leaves(tree) if _is_array(x)]


def array_leaves(tree: Any) -> list[np.ndarray]:
    """The array leaves of a call's arguments, as NumPy, for :func:`digest`."""
    import jax

    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree) if _is_array(x)]
