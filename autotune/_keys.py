"""What a tuning result is keyed by: function key, input signature, device."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jaxlib
import numpy as np

_ADDRESS_RE = re.compile(r" at 0x[0-9a-fA-F]+")
MAX_SIGNATURE_CHARS = 2000


def function_key(fn: Callable) -> str:
    """``module:qualname`` of ``fn`` (unwrapping ``functools.wraps`` layers)."""
    fn = getattr(fn, "__wrapped__", fn)
    module = getattr(fn, "__module__", None) or "?"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return f"{module}:{name}"


def _leaf_text(x: Any) -> str:
    if isinstance(x, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)):
        try:
            aval = jax.typeof(x) if hasattr(jax, "typeof") and not isinstance(x, jax.ShapeDtypeStruct) else x
        except TypeError:
            aval = x
        weak = "~" if getattr(aval, "weak_type", False) else ""
        shape = ",".join(str(d) for d in np.shape(x))
        sharding = getattr(x, "sharding", None)
        shard = ""
        if sharding is not None and len(getattr(sharding, "device_set", ())) > 1:
            shard = f"@{_ADDRESS_RE.sub('', repr(sharding))}"
        return f"{np.dtype(x.dtype).name}{weak}[{shape}]{shard}"
    return "static:" + " ".join(_ADDRESS_RE.sub("", repr(x)).split())


def signature(args: Sequence[Any], kwargs: dict[str, Any] | None = None) -> str:
    """Canonical text of the abstract signature: tree structure, then per leaf
    dtype (``~`` = weak type), shape, sharding when multi-device, or the value of a static leaf."""
    leaves, treedef = jax.tree_util.tree_flatten((tuple(args), dict(kwargs or {})))
    text = " ".join(f"{treedef}|".split()) + ";".join(_leaf_text(x) for x in leaves)
    if len(text) > MAX_SIGNATURE_CHARS:  # huge pytrees: keep a readable head, key by the hash of all
        text = f"{text[:MAX_SIGNATURE_CHARS - 80]}...sha256:{hashlib.sha256(text.encode()).hexdigest()}"
    return text


def short_hash(text: str, n: int = 10) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def device_info(backend: str | None = None) -> dict[str, Any]:
    """Platform, device kind and count, jax and jaxlib versions of the default backend."""
    devices = jax.devices(backend) if backend else jax.devices()
    first = devices[0]
    return {
        "platform": first.platform,
        "device_kind": str(getattr(first, "device_kind", first.platform)),
        "device_count": len(devices),
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", "?"),
    }


def device_key(info: dict[str, Any]) -> str:
    return (
        f"{info['platform']}|{info['device_kind']}|{info['device_count']}|"
        f"jax={info['jax']}|jaxlib={info['jaxlib']}"
    )
