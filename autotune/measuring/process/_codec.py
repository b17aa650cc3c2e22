"""Values as JSON for the worker protocol: arrays as base64 ``.npy`` (``allow_pickle=False``),
argument trees as tagged JSON. Nothing is ever pickled.

An array of :data:`SPILL_BYTES` or more travels as an ``.npy`` file instead, in the folder
:func:`spill_dir` names (the parent's, handed to its workers through :data:`SPILL_ENV`), which
the reader deletes once it has read it: a model's parameters as base64 inside a JSON line cost
seconds a GB to encode, send, parse and decode on each side. The parent removes the folder when
it exits, with any file a killed process left in it.

dtypes NumPy cannot describe in an ``.npy`` header (``bfloat16``, ``float8_*``, ``int4``...)
travel as unsigned integers of the same width plus their name, and are viewed back through
``ml_dtypes`` (which jaxlib depends on) on the other side.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import io
import os
import secrets
import shutil
import tempfile
from typing import Any

import numpy as np

from autotune.measuring.process._shardings import NotPortable, encode_sharding, place

SPILL_BYTES = 1 << 20
"""Arrays this large or larger travel as ``.npy`` files (:func:`spill_dir`), not inside the JSON."""
SPILL_ENV = "AUTOTUNE_SPILL_DIR"
"""The variable that hands a worker its parent's spill folder."""
_own_spill: list[str] = []


def spill_dir() -> str:
    """The folder large arrays travel through: a worker's is its parent's (:data:`SPILL_ENV`); a
    parent names its own on first use and removes it, with whatever is left in it, at exit. It is
    made by the first array that needs it (a parent killed before it exits leaves none behind
    unless an array was spilled)."""
    given = os.environ.get(SPILL_ENV)
    if given:
        return given
    if not _own_spill:
        _own_spill.append(os.path.join(tempfile.gettempdir(), f"autotune-spill-{os.getpid()}-{secrets.token_hex(6)}"))
        atexit.register(shutil.rmtree, _own_spill[0], True)
    return _own_spill[0]


def encode_array(x: Any, keep: bool = False) -> dict[str, Any]:
    """One array as JSON: its dtype name and base64 ``.npy`` bytes (no pickle); from
    :data:`SPILL_BYTES` on, the path of an ``.npy`` file in :func:`spill_dir` instead, which the
    reader deletes unless ``keep`` (a message sent again, as the arguments are to each new
    worker: its writer removes the files, :func:`remove`).

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
    if a.nbytes >= SPILL_BYTES:
        folder = spill_dir()
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, path = tempfile.mkstemp(suffix=".npy", dir=folder)
        with os.fdopen(fd, "wb") as f:
            np.save(f, raw, allow_pickle=False)
        return {"dtype": a.dtype.name, "file": path, **({"keep": True} if keep else {})}
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
    """The array :func:`encode_array` wrote (a spilled one's file is deleted once read)."""
    if "file" in d:
        try:
            a = np.load(d["file"], allow_pickle=False)
        finally:
            if not d.get("keep"):
                remove([d["file"]])
    else:
        a = np.load(io.BytesIO(base64.b64decode(d["npy"])), allow_pickle=False)
    want = _resolve_dtype(d["dtype"])
    return a if a.dtype == want else a.view(want)


def remove(paths: list[str]) -> None:
    """Delete spilled files (those already gone are skipped)."""
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def spilled(message: Any) -> list[str]:
    """The paths of the spilled arrays a message (or a part of it) holds."""
    if isinstance(message, dict):
        own = [message["file"]] if isinstance(message.get("file"), str) and "dtype" in message else []
        return own + [p for v in message.values() for p in spilled(v)]
    if isinstance(message, list):
        return [p for v in message for p in spilled(v)]
    return []


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


def encode_tree(value: Any, where: str = "the arguments", keep: bool = False) -> Any:
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
        return {"array": encode_array(value, keep), **node}
    if isinstance(value, tuple) and type(value) is tuple:
        return {"tuple": [encode_tree(v, where, keep) for v in value]}
    if isinstance(value, list) and type(value) is list:
        return {"list": [encode_tree(v, where, keep) for v in value]}
    if isinstance(value, dict) and type(value) is dict:
        if not all(isinstance(k, str) for k in value):
            raise NotPortable(f"{where} hold a dict with non-string keys")
        return {"dict": {k: encode_tree(v, where, keep) for k, v in value.items()}}
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
