"""A recorded call's arguments, rebuilt: the recorded values where they are stored, else synthesized.

Synthesized inputs are drawn from ``numpy.random.default_rng(0)``, one generator per
signature, leaf by leaf in argument order: floating point standard normal (complex: real
and imaginary parts each), integers uniform in [0, 8), bools fair coin flips, PRNG keys
split from ``jax.random.key(0)``. A weakly typed Python-scalar argument is passed as a
Python number again, so the signature matches.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from autotune.cache import PendingRecord
from autotune.program._abstract import decode_value, dtype_named, resolve_ref

MAX_WEAK_ELEMENTS = 4096
"""A weakly typed array argument (rare) is rebuilt element by element, up to this many."""


class Skip(Exception):
    """Why a recorded signature is skipped (one line)."""


def _scalar(a: np.ndarray) -> Any:
    kind = a.dtype.kind
    v = a.item()
    return bool(v) if kind == "b" else int(v) if kind in "iu" else complex(v) if kind == "c" else float(v)


def _weak(a: np.ndarray, where: str) -> Any:
    """A weakly typed leaf: a Python number for a scalar (jit makes it weak again), else a
    stack of weak scalars."""
    if a.ndim == 0:
        return _scalar(a)
    if a.size > MAX_WEAK_ELEMENTS:
        raise Skip(f"{where} is a weakly typed array of {a.size} elements; only {MAX_WEAK_ELEMENTS} can be rebuilt")
    import jax.numpy as jnp

    return jnp.stack([jnp.asarray(_scalar(x)) for x in a.reshape(-1)]).reshape(a.shape)


def _draw(leaf: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    shape = tuple(leaf["shape"])
    dtype = dtype_named(leaf["dtype"])
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 8, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def _make(leaf: dict[str, Any], a: np.ndarray | None, rng: np.random.Generator, where: str) -> Any:
    import jax
    import jax.numpy as jnp

    shape = tuple(leaf["shape"])
    if "key" in leaf:
        if a is None:
            n = math.prod(shape)
            return jax.random.split(jax.random.key(0, impl=leaf["key"]), max(n, 1))[:n].reshape(shape)
        return jax.random.wrap_key_data(jnp.asarray(a), impl=leaf["key"])
    if a is None:
        a = _draw(leaf, rng)
    else:
        want = dtype_named(leaf["dtype"])
        if a.dtype != want:  # stored as unsigned integers of its width (bfloat16...), else cast
            a = a.view(want) if a.dtype.kind == "u" and a.dtype.itemsize == want.itemsize else a.astype(want)
        if a.shape != shape:
            raise Skip(f"the recorded value of {where} has shape {a.shape}, not the recorded {shape}")
    return _weak(a, where) if leaf.get("weak") else jnp.asarray(a)


def build_inputs(rec: PendingRecord, values_dir: str, seed: int = 0) -> tuple[tuple, dict, str]:
    """The call's ``(args, kwargs, "recorded values" | "synthesized")``.

    Raises:
        Skip: a static argument or a container cannot be rebuilt.
    """
    abstract = rec.abstract
    if abstract.get("version") != 1 or abstract.get("omitted"):
        raise Skip("the record holds no argument tree this version can rebuild")
    files = list((rec.values or {}).get("files") or [])
    arrays: list[np.ndarray | None] = []
    for name in files:
        try:
            arrays.append(None if name is None else np.load(os.path.join(values_dir, name), allow_pickle=False))
        except (OSError, ValueError):
            arrays = []  # a missing or unreadable file: synthesize every leaf, not a mix
            break
    rng, count = np.random.default_rng(seed), [0]

    def build(node: Any, where: str) -> Any:
        if "shape" in node:
            i, count[0] = count[0], count[0] + 1
            return _make(node, arrays[i] if i < len(arrays) else None, rng, where)
        try:
            if "static" in node:
                return decode_value(node["static"])
            if "tuple" in node:
                return tuple(build(c, f"{where}[{i}]") for i, c in enumerate(node["tuple"]))
            if "list" in node:
                return [build(c, f"{where}[{i}]") for i, c in enumerate(node["list"])]
            if "dict" in node:
                return {decode_value(k): build(c, f"{where}[{k!r}]") for k, c in node["dict"]}
            if "namedtuple" in node:
                return resolve_ref(node["namedtuple"])(*[build(c, f"{where}.{i}") for i, c in enumerate(node["items"])])
        except Skip:
            raise
        except Exception as e:
            raise Skip(f"{where} cannot be rebuilt ({type(e).__name__}: {e})") from None
        raise Skip(f"{where} cannot be rebuilt (it was recorded as {node.get('unrecordable', node)})")

    args = tuple(build(n, f"argument {i}") for i, n in enumerate(abstract.get("args", [])))
    kwargs = {k: build(abstract["kwargs"][k], f"keyword argument {k!r}") for k in sorted(abstract.get("kwargs", {}))}
    used = arrays and count[0] == len(arrays) and all(a is not None for a in arrays)
    return args, kwargs, "recorded values" if used else "synthesized"
