"""What a tuning result is keyed by: function key, input signature, device, study name.

Nothing else in autotune computes these. The rules (also in the README's cache section):

* function key: ``module:qualname``. A function defined in the script Python runs
  (``python app.py``, module ``__main__``) is keyed by the script's module name
  (``app:fn``, or ``pkg.app:fn`` under ``python -m pkg.app``), so the key is the same when
  the file is imported (``import app``) and when it is tuned as a study file. A lambda or
  a function defined inside another function (``<locals>``) has no stable key: the
  decorator warns once and asks for ``key=``.
* signature: pytree structure, then per leaf dtype (``~`` = weak type), shape, the mesh
  it is on (axis names and sizes, non-Auto axis types, an explicit spec), or the value of
  a static leaf.
* device: platform, device kind and count, jax and jaxlib versions; and the memory budget in
  bytes where one was set (``|max_memory=N``: a config tuned under a budget is the answer for
  a device with that much memory to give, and stands in for no other budget).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jaxlib
import numpy as np

from autotune.program import _compat

_ADDRESS_RE = re.compile(r" at 0x[0-9a-fA-F]+")
MAX_SIGNATURE_CHARS = 2000


def main_module_name() -> str:
    """The importable name of the running script: ``app`` for ``python app.py``, the
    module name for ``python -m pkg.app``, ``__main__`` when there is no script."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None) and spec.name != "__main__":
        return spec.name[: -len(".__main__")] if spec.name.endswith(".__main__") else spec.name
    path = getattr(main, "__file__", None)
    if path:
        return os.path.splitext(os.path.basename(path))[0]
    return "__main__"


def function_key(fn: Callable) -> str:
    """``module:qualname`` of ``fn`` (unwrapping ``functools.wraps`` layers), with a
    script's ``__main__`` replaced by its module name."""
    fn = getattr(fn, "__wrapped__", fn)
    module = getattr(fn, "__module__", None) or "?"
    if module == "__main__":
        module = main_module_name()
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return f"{module}:{name}"


def unstable_key_reason(key: str) -> str | None:
    """Why a derived function key would not be the same in another process, or None."""
    module, _, name = key.partition(":")
    if "<lambda>" in name:
        return "it is a lambda"
    if "<locals>" in name:
        return "it is defined inside another function"
    if module == "__main__":
        return "it is defined in an interactive session, not a file"
    return None


def _mesh_text(aval: Any) -> str:
    """``@mesh(data=8)`` for a leaf on a mesh, with the axis types when not all ``Auto`` and the
    spec when the type carries one (explicit axes); ``""`` for a single-device leaf.

    Read from the abstract value (``jax.typeof``), which is the same for a concrete array,
    a ``ShapeDtypeStruct`` and the tracer jit traces with, so the decorator's lookup and the
    tuner compute the same text. jit traces again for another mesh, so a config tuned on a
    2x4 mesh is never applied on 8x1 or on other axis names.
    """
    sharding = getattr(aval, "sharding", None)
    mesh = getattr(sharding, "mesh", None)
    names = tuple(getattr(mesh, "axis_names", ()) or ())
    if not names:
        return ""
    sizes = tuple(getattr(mesh, "axis_sizes", None) or dict(mesh.shape).values())
    text = ",".join(f"{n}={k}" for n, k in zip(names, sizes))
    types = [getattr(t, "name", str(t)) for t in (getattr(mesh, "axis_types", None) or ())]
    if any(t != "Auto" for t in types):
        text += ";" + ",".join(types)
    spec = tuple(getattr(sharding, "spec", ()) or ())
    used = "".join("" if e is None else repr(e) for e in spec)
    return f"@mesh({text})" + (f"P{spec!r}" if used else "")


def _aval(x: Any) -> Any:
    try:
        return jax.typeof(x) if hasattr(jax, "typeof") else x
    except TypeError:
        return x


def mesh_text(x: Any) -> str:
    """``@mesh(data=8)`` for an array, abstract array or tracer on a mesh, else ``""``."""
    return _mesh_text(_aval(x))


def _leaf_text(x: Any) -> str:
    if isinstance(x, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)):
        aval = _aval(x)
        weak = "~" if getattr(aval, "weak_type", False) else ""
        shape = ",".join(str(d) for d in np.shape(x))
        return f"{_dtype_name(x.dtype)}{weak}[{shape}]{_mesh_text(aval)}"
    return "static:" + " ".join(_ADDRESS_RE.sub("", repr(x)).split())


def _dtype_name(dtype: Any) -> str:
    """``float32``, ``bfloat16``...; for dtypes NumPy does not know (typed PRNG keys:
    ``key<fry>``) the dtype's own name."""
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)


def signature(args: Sequence[Any], kwargs: dict[str, Any] | None = None) -> str:
    """Canonical text of the abstract signature: tree structure, then per leaf dtype (``~`` =
    weak type), shape, mesh (``@mesh(data=8)``, see :func:`_mesh_text`), or the value of a
    static leaf.

    Example::

        >>> signature((np.ones((2, 3), np.float32), 4))
        'PyTreeDef(((*, *), {}))|float32[2,3];static:4'
    """
    leaves, treedef = jax.tree_util.tree_flatten((tuple(args), dict(kwargs or {})))
    text = " ".join(f"{treedef}|".split()) + ";".join(_leaf_text(x) for x in leaves)
    if len(text) > MAX_SIGNATURE_CHARS:  # huge pytrees: keep a readable head, key by the hash of all
        text = f"{text[: MAX_SIGNATURE_CHARS - 80]}...sha256:{hashlib.sha256(text.encode()).hexdigest()}"
    return text


def signature_leaves(text: str) -> tuple[str, tuple[str, ...]]:
    """A signature text (:func:`signature`) read back: its tree structure and its leaves' texts,
    in order (a signature cut for length keeps the leaves before the cut, the last one cut).

    Example::

        >>> signature_leaves(signature((np.ones((2, 3), np.float32), 4)))
        ('PyTreeDef(((*, *), {}))', ('float32[2,3]', 'static:4'))
    """
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "|" and depth == 0:
            rest = text[i + 1 :]
            return text[:i], tuple(rest.split(";")) if rest else ()
    return text, ()


def short_hash(text: str, n: int = 10) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def device_info(backend: str | None = None) -> dict[str, Any]:
    """Platform, device kind and count, jax and jaxlib versions of the default backend, and the
    first device's memory in bytes (``bytes_limit``) where it reports one (the CPU does not)."""
    devices = jax.devices(backend) if backend else jax.devices()
    first = devices[0]
    info = {
        "platform": first.platform,
        "device_kind": str(getattr(first, "device_kind", first.platform)),
        "device_count": len(devices),
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", "?"),
    }
    limit = _compat.device_bytes_limit(first)
    return info if limit is None else {**info, "bytes_limit": limit}


def device_key(info: dict[str, Any]) -> str:
    """``"platform|device_kind|device_count|jax=V|jaxlib=V"``, then ``"|max_memory=N"`` where the
    device dict carries a memory budget (:func:`under_budget`): only those fields count."""
    budget = info.get("max_memory")
    return (
        f"{info.get('platform')}|{info.get('device_kind')}|{info.get('device_count')}|"
        f"jax={info.get('jax')}|jaxlib={info.get('jaxlib')}" + ("" if budget is None else f"|max_memory={budget}")
    )


def under_budget(info: dict[str, Any], max_memory: int | None) -> dict[str, Any]:
    """The device dict a result tuned under the memory budget ``max_memory`` (bytes; None: no
    budget) is keyed by: ``info`` with ``max_memory`` set, or without it."""
    rest = {k: v for k, v in info.items() if k != "max_memory"}
    return rest if max_memory is None else {**rest, "max_memory": int(max_memory)}


def study_name(
    function_key: str,
    fingerprint: str,
    signature: str,
    device: dict,
    objective: Any,
    search: str = "cost",
    timing: str = "steady",
) -> str:
    """The default study name: function, program, signature, device, how a call is timed and the
    objective (its processes and compilation cache only where several processes run it).

    The timing mode is in the name because its runtimes are another quantity (on an accelerator a
    blocked call costs several times a call in the steady state): a study never ranks both.
    A ``search="pareto"`` study does not depend on the objective (it minimises compile and
    run seconds separately), so its name ends in ``/pareto`` and every call count re-uses it.
    An objective with ``tier_up`` (another cost: a slow compile is charged what it costs the calls
    served beside it) ends in ``,tier``; one with a memory budget in ``,mem<=BYTES``.
    """
    head = (
        f"{function_key}@{fingerprint[:10]}/{short_hash(signature, 8)}/{device['platform']}:{device['device_kind']}/"
        f"{timing}/"
    )
    if search == "pareto":
        return head + "pareto"
    processes = getattr(objective, "processes", 1)  # several processes: their own study (another cost)
    shared = "" if processes == 1 else f",p={processes}" + (",cc" if objective.compilation_cache else "")
    tier = ",tier" if getattr(objective, "tier_up", False) else ""
    budget = getattr(objective, "max_memory", None)  # another budget: other configs may win
    memory = "" if budget is None else f",mem<={budget}"
    return head + (
        f"calls={objective.expected_calls:g},cw={objective.compile_weight:g},rw={objective.runtime_weight:g}"
        f"{shared}{tier}{memory}"
    )


def program_key(fn: Callable, args: Sequence[Any], kwargs: dict[str, Any], jit_kwargs: dict[str, Any]):
    """The traced program and abstract signature exactly as ``jax.jit(fn, **jit_kwargs)`` sees them.

    Tracing under a throw-away jit makes Python scalars weak-typed tracers and static
    arguments concrete, just as at the decorator's trace time, so the fingerprint and
    signature computed here match the ones looked up there.

    Returns:
        ``(Program, signature text)``.
    """
    import jax

    from autotune.program._sites import trace_program

    found: dict[str, Any] = {}
    probe_kwargs = {k: v for k, v in jit_kwargs.items() if k in ("static_argnums", "static_argnames")}

    def probe(*a, **k):
        found["signature"] = signature(a, k)
        found["program"] = trace_program(fn, a, k)

    jax.jit(probe, **probe_kwargs).trace(*args, **kwargs)
    return found["program"], found["signature"]
