"""Where arguments live, as JSON: meshes, shardings and committed devices, so the worker
places every argument exactly where the user's call has it and compiles the same program,
with the same per-device bytes and collectives.

A ``NamedSharding`` crosses as its mesh (device ids, shape, axis names and types) and its
``PartitionSpec``; a ``SingleDeviceSharding`` as its device id. Any other sharding raises
:class:`NotPortable`, and the runner measures in-process with a
warning rather than measure another program. Uncommitted arrays carry no sharding: jit
places them as it places the user's.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class NotPortable(TypeError):
    """A value that cannot cross to the worker process as JSON; the message says which and why."""


def _not_portable(message: str) -> Exception:
    return NotPortable(message)


def _axis_name(name: Any, where: str) -> str:
    if not isinstance(name, str):
        raise _not_portable(
            f"{where} is placed on a mesh with the axis name {name!r}; only string axis "
            "names can be sent to another process"
        )
    return name


def _spec_entry(entry: Any, where: str) -> Any:
    from jax.sharding import PartitionSpec

    if entry is None:
        return None
    if entry is PartitionSpec.UNCONSTRAINED:
        return {"unconstrained": True}
    if isinstance(entry, (tuple, list)):
        return [_axis_name(e, where) for e in entry]
    return _axis_name(entry, where)


def _mesh(mesh: Any, where: str) -> dict[str, Any]:
    devices = np.asarray(mesh.devices)
    types = getattr(mesh, "axis_types", None)
    return {
        "devices": [int(d.id) for d in devices.flat],
        "shape": [int(n) for n in devices.shape],
        "axes": [_axis_name(a, where) for a in mesh.axis_names],
        "axis_types": None if types is None else [t.name for t in types],
        "platform": devices.flat[0].platform,
    }


def encode_sharding(x: Any, where: str = "an argument") -> dict[str, Any] | None:
    """The placement of array ``x`` as JSON: None for a NumPy array or an uncommitted JAX array
    (jit places it), else its sharding. Raises ``NotPortable`` for a sharding that cannot be
    rebuilt from JSON.

    Example::

        >>> import jax, jax.numpy as jnp
        >>> encode_sharding(jax.device_put(jnp.ones(2), jax.devices()[0]))["kind"]
        'single'
    """
    import jax
    from jax.sharding import NamedSharding

    from autotune.program import _compat

    if not isinstance(x, jax.Array) or not getattr(x, "committed", False):
        return None
    if not getattr(x, "is_fully_addressable", True):
        raise _not_portable(f"{where} spans devices of several processes, which one worker process cannot hold")
    s = x.sharding
    if _compat.is_single_device_sharding(s):
        (device,) = s.device_set
        out = {"kind": "single", "device": int(device.id), "platform": device.platform, "memory_kind": s.memory_kind}
    elif isinstance(s, NamedSharding):
        spec = s.spec
        out = {
            "kind": "named",
            "mesh": _mesh(s.mesh, where),
            "spec": [_spec_entry(e, where) for e in spec],
            "memory_kind": s.memory_kind,
        }
        for extra in ("unreduced", "reduced"):  # newer PartitionSpecs only
            names = getattr(spec, extra, None)
            if names:
                out[extra] = sorted(_axis_name(a, where) for a in names)
    else:
        raise _not_portable(
            f"{where} has a {type(s).__name__}, which cannot be sent to another process (a "
            "NamedSharding over a Mesh or a single device can)"
        )
    # Whatever this JSON does not hold (a newer spec field, a mesh option) must not be lost quietly.
    if decode_sharding(out) != s:
        raise _not_portable(f"{where} has the sharding {s!r}, which does not come back the same from JSON")
    return out


def _devices(platform: str, ids: list[int]) -> list[Any]:
    import jax

    try:
        seen = {d.id: d for d in jax.devices(platform)}
    except RuntimeError:
        seen = {}
    missing = [i for i in ids if i not in seen]
    if missing:
        raise _not_portable(
            f"the arguments are placed on {platform} device ids {sorted(set(ids))}, but this "
            f"process sees {len(seen)} {platform} device(s) {sorted(seen)}"
        )
    return [seen[i] for i in ids]


def decode_sharding(d: dict[str, Any], meshes: dict | None = None) -> Any:
    """The sharding :func:`encode_sharding` wrote, on this process's devices with the same ids
    (``meshes`` caches rebuilt meshes by their JSON). Raises ``NotPortable`` when a device is missing."""
    import json

    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from autotune.program import _compat

    if d["kind"] == "single":
        (device,) = _devices(d["platform"], [int(d["device"])])
        return _compat.single_device_sharding(device, memory_kind=d.get("memory_kind"))
    m = d["mesh"]
    key = json.dumps(m, sort_keys=True)
    mesh = (meshes or {}).get(key)
    if mesh is None:
        devices = np.empty(len(m["devices"]), dtype=object)
        devices[:] = _devices(m["platform"], [int(i) for i in m["devices"]])
        options = {}
        if m.get("axis_types") is not None:
            from jax.sharding import AxisType

            options["axis_types"] = tuple(AxisType[t] for t in m["axis_types"])
        mesh = Mesh(devices.reshape(m["shape"]), tuple(m["axes"]), **options)
        if meshes is not None:
            meshes[key] = mesh
    entries = [
        PartitionSpec.UNCONSTRAINED if isinstance(e, dict) else tuple(e) if isinstance(e, list) else e
        for e in d["spec"]
    ]
    extra = {k: frozenset(d[k]) for k in ("unreduced", "reduced") if d.get(k)}
    return NamedSharding(mesh, PartitionSpec(*entries, **extra), memory_kind=d.get("memory_kind"))


def place(a: np.ndarray, sharding: dict[str, Any] | None, meshes: dict | None = None) -> Any:
    """NumPy array ``a`` as a JAX array placed as ``sharding`` says (uncommitted when None)."""
    import jax
    import jax.numpy as jnp

    if sharding is None:
        return jnp.asarray(a)
    return jax.device_put(a, decode_sharding(sharding, meshes))


def placement(leaves: list[Any]) -> dict[str, Any]:
    """Where a call's array leaves live: the ids of the devices committed arrays are on, the
    most bytes any one device holds of them, and the bytes of arrays jit will place itself
    (NumPy and uncommitted). The parent and the worker compare theirs.

    Example::

        >>> import jax, jax.numpy as jnp
        >>> placement([jax.device_put(jnp.ones(4), jax.devices()[0]), np.ones(2)])["bytes_per_device"]
        16
    """
    import jax

    per_device: dict[int, int] = {}
    loose = 0
    for x in leaves:
        if isinstance(x, jax.Array) and getattr(x, "committed", False):
            s = x.sharding
            try:
                itemsize = np.dtype(x.dtype).itemsize
            except TypeError:  # typed PRNG keys
                itemsize = int(getattr(x.dtype, "itemsize", 0) or 0)
            shard_bytes = int(np.prod(s.shard_shape(x.shape), dtype=np.int64)) * itemsize
            for device in s.device_set:
                per_device[device.id] = per_device.get(device.id, 0) + shard_bytes
        elif isinstance(x, (jax.Array, np.ndarray, np.generic)):
            loose += int(getattr(x, "nbytes", 0) or 0)
    return {
        "devices": sorted(per_device),
        "bytes_per_device": max(per_device.values(), default=0),
        "loose_bytes": loose,
    }


def differs(mine: dict[str, Any], theirs: dict[str, Any] | None) -> str | None:
    """Why the worker's placement of the committed arguments is not this process's, or None
    (what jit places itself may differ in form: a Python float crosses as an array)."""
    if theirs is None:
        return "the worker process did not report where it placed the arguments"
    if all(theirs.get(k) == mine[k] for k in ("devices", "bytes_per_device")):
        return None
    return (
        f"the worker process placed the arguments on devices {theirs.get('devices')} with "
        f"{theirs.get('bytes_per_device')} bytes per device, the call has them on {mine['devices']} with "
        f"{mine['bytes_per_device']} bytes per device"
    )
