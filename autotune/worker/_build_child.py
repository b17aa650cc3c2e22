"""A builder process (``python -m autotune.worker._build_child``): compiles exported programs for
the worker's device without opening it, and hands back the serialised executables.

The worker compiles one config at a time, and on a TPU a compile takes seconds, so tuning wall
is mostly compile. Builders compile the configs ahead on the host's other cores; the worker only
loads (``load_built``) and measures. A builder always runs on JAX's CPU backend
(``JAX_PLATFORMS=cpu``, set by the parent): for a CPU target it compiles for its own CPU; for a
TPU target it compiles *deviceless*, against a compile-only topology
(``jax.experimental.topologies.get_topology_desc``; libtpu is loaded beside the process that
holds the chip, ``ALLOW_MULTIPLE_LIBTPU_LOAD=1``), which libtpu allows while another process
owns the chip. Only single-device programs are built; :data:`TPU_TOPOLOGIES` names the device
kinds a topology is known for.

Requests are JSON lines on stdin (``build``, ``probe``, ``exit``); every event goes to a private
copy of stdout: ``ready``, then one ``built`` or ``error`` per request. The serialised executable
is ``jax.experimental.serialize_executable.serialize``'s bytes (a pickle inside, between our own
processes only, never stored), with the builder's compile wall and process CPU seconds: what the
objective charges for the config. This module is an entry point, like ``_child``.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any

from autotune._errors import error_text
from autotune.measuring.process._protocol import PROTOCOL, TPU_TOPOLOGIES, Event, Op, error_event
from autotune.worker._child import serving_stdout


class Unavailable(Exception):
    """This builder cannot compile for the target; the message says why."""


class Target:
    """Where executables are compiled for: the device and the one-device sharding every input
    and output gets (a compile-only TPU device, or this process's first CPU device)."""

    def __init__(self, device: dict[str, Any]):
        import jax
        import numpy as np

        platform, kind = device.get("platform"), device.get("device_kind")
        self.deviceless = platform != "cpu"
        if platform == "cpu":
            self.device = jax.devices("cpu")[0]
        elif platform == "tpu":
            name = TPU_TOPOLOGIES.get(str(kind))
            if name is None or int(device.get("device_count", 1)) != 1:
                raise Unavailable(
                    f"no compile-only topology is known for {device.get('device_count', 1)} x {kind!r} "
                    f"(known: one chip of {sorted(TPU_TOPOLOGIES)})"
                )
            try:
                from jax.experimental import topologies

                topology = topologies.get_topology_desc(
                    platform="tpu",
                    topology_name=name,
                    chip_config_name="default",
                    chips_per_host_bounds=(1, 1, 1),
                    num_slices=1,
                    wrap=(False, False, False),
                )
            except Exception as exc:  # noqa: BLE001 - no libtpu, or it refuses: say so
                raise Unavailable(f"the TPU topology {name!r} cannot be built here ({error_text(exc)})") from exc
            self.device = topology.devices[0]
        else:
            raise Unavailable(f"deviceless compiles are supported for the CPU and single-chip TPUs, not {platform!r}")
        mesh = jax.sharding.Mesh(np.array([self.device]), ("x",))
        self.sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())


def compile_for(target: Target, jitted_fun, avals, **options: Any) -> Any:
    """``autotune.measuring._stages.time_stages`` of ``jax.jit(jitted_fun)`` on ``avals`` (shapes and
    dtypes), every input and output on the target's device, cold (caches cleared, the
    persistent cache off): the stages, compiled, with their wall and CPU seconds."""
    import jax

    from autotune.measuring._stages import time_stages
    from autotune.program import _compat

    structs = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals)
    jitted = jax.jit(jitted_fun, in_shardings=target.sharding, out_shardings=target.sharding, **options)
    with _compat.no_persistent_cache():
        _compat.clear_jax_caches()
        return time_stages(jitted, structs)


def build(req: dict[str, Any], target: Target) -> dict[str, Any]:
    """Compile an exported program (the trial request's ``program``, ``donate`` and
    ``compiler_options``) with flat inputs and a flat list of outputs, and serialise it."""
    import jax
    from jax.experimental.serialize_executable import serialize

    exported = jax.export.deserialize(bytearray(base64.b64decode(req["program"])))
    in_tree = exported.in_tree

    def flat_call(*leaves):
        a, k = jax.tree_util.tree_unflatten(in_tree, leaves)
        return jax.tree_util.tree_leaves(exported.call(*a, **k))

    options: dict[str, Any] = {"donate_argnums": tuple(req.get("donate") or ())}
    if req.get("compiler_options"):
        options["compiler_options"] = req["compiler_options"]
    stages = compile_for(target, flat_call, exported.in_avals, **options)
    payload, _, out_tree = serialize(stages.compiled)
    return {
        "payload": base64.b64encode(payload).decode("ascii"),
        "n_in": len(exported.in_avals),
        "n_out": out_tree.num_leaves,
        "compile_s": stages.compile_s,
        "compile_cpu_s": stages.compile_cpu_s,
        "deviceless": target.deviceless,
    }


def probe(target: Target) -> dict[str, Any]:
    """Compile and serialise a tiny scan for the target: whether this builder can build at all."""
    import jax
    import jax.numpy as jnp
    from jax.experimental.serialize_executable import serialize

    def tiny(x):
        return jax.lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x, None, length=4)[0]

    stages = compile_for(target, tiny, [jax.ShapeDtypeStruct((8,), jnp.float32)])
    serialize(stages.compiled)
    return {"compile_s": stages.compile_s, "deviceless": target.deviceless}


class Builder:
    """The server loop: one request at a time; the target's topology is built once, and a tiny
    program compiled for it then, so the first measured compile is no colder than the others
    (a process's first compile also pays the compiler's one-off set-up; measured:
    docs/results/design-figures.md#a-builders-first-compile)."""

    def __init__(self, out, requests):
        self.out, self.requests = out, requests
        self.targets: dict[str, Target | Unavailable] = {}

    def emit(self, **msg: Any) -> None:
        self.out.write(json.dumps(msg) + "\n")
        self.out.flush()

    def target(self, device: dict[str, Any]) -> Target:
        key = json.dumps(device, sort_keys=True)
        if key not in self.targets:
            try:
                self.targets[key] = Target(device)
                probe(self.targets[key])  # warm-up: a process's first compile pays the compiler's start-up
            except Unavailable as exc:
                self.targets[key] = exc
        got = self.targets[key]
        if isinstance(got, Unavailable):
            raise got
        return got

    def serve(self) -> None:
        import jax

        self.emit(event=Event.READY, protocol=PROTOCOL, pid=os.getpid(), platform="cpu", jax=jax.__version__)
        for line in self.requests:
            if not line.strip():
                continue
            req = json.loads(line)
            op = req.get("op")
            if op == Op.EXIT:
                return
            try:
                if op == Op.BUILD:
                    self.emit(event=Event.BUILT, id=req.get("id"), **build(req, self.target(req["target"])))
                elif op == Op.PROBE:
                    self.emit(event=Event.BUILT, id=req.get("id"), **probe(self.target(req["target"])))
                else:
                    self.emit(event=Event.ERROR, id=req.get("id"), type="ProtocolError", message=f"unknown op {op!r}")
            except Exception as exc:  # noqa: BLE001 - everything goes back to the parent
                self.emit(**error_event(exc, req.get("id"), "compile"))


def main(argv: list[str] | None = None) -> int:
    import jax

    jax.config.update("jax_platforms", "cpu")  # a builder never opens the accelerator (the parent sets it too)
    Builder(serving_stdout(list(sys.argv[1:] if argv is None else argv)), sys.stdin.buffer).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
