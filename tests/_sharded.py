"""Scenarios on 8 host CPU devices for test_sharded.py, each run in a process of its own
(``XLA_FLAGS=--xla_force_host_platform_device_count=8`` must be set before JAX starts).

Run as ``python -c "import _sharded; _sharded.main()" CASE`` from ``tests/`` (so the model is
importable as ``_sharded``, not ``__main__``, and import mode can find it); prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import autotune as at

H, T, BATCH, D = 64, 32, 64, 16
TIMING = {"target_s": 0.3, "min_reps": 10, "warmup": 3}


def loss(params, xs, ys):
    def cell(h, x):
        h = jnp.tanh(x @ params["wx"] + h @ params["wh"])
        return h, h

    _, hs = at.loop(cell, jnp.zeros((xs.shape[1], H), xs.dtype), xs, name="rnn")
    return jnp.mean((hs @ params["wo"] - ys) ** 2)


@at.autotuned
def step(params, xs, ys):
    """An RNN training step; the batch (axis 1) is sharded over the mesh's 'data' axis."""
    value, grads = jax.value_and_grad(loss)(params, xs, ys)
    return value, jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)


def step_with_callback(params, xs, ys):
    """The same step with a host callback: jax.export refuses it, so the worker imports it."""
    value, new = step.autotune.fun(params, xs, ys)
    jax.debug.callback(lambda v: None, value)
    return value, new


def mesh(shape=(8,), axes=("data",)) -> Mesh:
    return Mesh(np.array(jax.devices()[: int(np.prod(shape))]).reshape(shape), axes)


def inputs(m: Mesh, axis: str = "data"):
    k = jax.random.split(jax.random.key(0), 5)
    params = {
        "wx": jax.random.normal(k[0], (D, H)) * 0.1,
        "wh": jax.random.normal(k[1], (H, H)) * 0.1,
        "wo": jax.random.normal(k[2], (H, 1)) * 0.1,
    }
    xs, ys = jax.random.normal(k[3], (T, BATCH, D)), jax.random.normal(k[4], (T, BATCH, 1))
    batch = NamedSharding(m, P(None, axis))
    return jax.device_put(params, NamedSharding(m, P())), jax.device_put(xs, batch), jax.device_put(ys, batch)


def _tune(args, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = step.tune(*args, n_trials=1, timing=TIMING, confirm_top=1, progress=False, **options)
    trial = result.trials[0]
    rounds = [r[1] for r in trial.measurement.get("rounds") or []] + [trial.measurement["run_s"]]
    return {
        "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)],
        "state": trial.state,
        "memory": trial.measurement["memory"],
        "run_s": min(rounds),
        "signature": result.signature,
    }


def case_tune(rounds: int = 7) -> dict:
    """The user's sharded step tuned with the default isolation; then the default runner's
    worker re-timed in turn with the user's program and the one-device program in this
    process (interleaved, so a change in the machine's load falls on all three). Each figure
    is the least of its rounds: on a loaded machine a round is only ever slowed down, so the
    least is the one nearest the program's own runtime."""
    from autotune.measuring._sampling import Sampling
    from autotune.measuring._stages import measure_executable
    from autotune.measuring.process._protocol import Location
    from autotune.measuring.process._shardings import placement
    from autotune.measuring.process._worker_runner import WorkerRunner

    args = inputs(mesh())
    fn = step.autotune.fun
    out = {
        "devices": jax.device_count(),
        "placement": placement(jax.tree_util.tree_leaves(args)),
        "whole_bytes": sum(x.nbytes for x in jax.tree_util.tree_leaves(args)),
        "trial": _tune(args),
    }
    sampling = Sampling.of(TIMING)
    sharded, exe_sharded = measure_executable(at.Call(fn, args), None, sampling=sampling)
    one, exe_one = measure_executable(at.Call(fn, jax.tree_util.tree_map(np.asarray, args)), None, sampling=sampling)
    out["sharded_memory"], out["one_device_memory"] = sharded.memory, one.memory
    times: dict[str, list[float]] = {"worker": [], "sharded": [], "one_device": []}
    modes = {}
    for name, f in (("export", fn), ("import", step_with_callback)):
        with WorkerRunner(at.Call(f, args), TIMING, trial_timeout=300, location=Location.of(f)) as runner:
            m = runner.measure({})
            modes[name] = {
                "mode": runner.mode,
                "isolated": runner.isolated,
                "memory": m.memory,
                "loss": float(np.asarray(jax.tree_util.tree_leaves(m.outputs)[0])),
            }
            for _ in range(rounds if name == "export" else 0):
                times["worker"].append(runner.retime({}).run_s)
                times["sharded"].append(exe_sharded.retime(sampling).run_s)
                times["one_device"].append(exe_one.retime(sampling).run_s)
    out["modes"], out["times"] = modes, times
    out["least"] = {k: min(v) for k, v in times.items()}
    out["loss"] = float(step(*args)[0])
    return out


def case_fallback() -> dict:
    """A worker that cannot see the call's 8 devices: the study measures in-process, warning once."""
    args = inputs(mesh())
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"  # what a new worker inherits
    from autotune.measuring.process._shardings import placement

    return {"placement": placement(jax.tree_util.tree_leaves(args)), "trial": _tune(args)}


def case_config_devices() -> dict:
    """Devices set with jax.config, not XLA_FLAGS: the worker is started with the same count."""
    jax.config.update("jax_num_cpu_devices", 4)
    from autotune.measuring.process._worker_runner import WorkerRunner

    m = mesh((4,), ("data",))
    x = jax.device_put(jnp.ones((64, 16)), NamedSharding(m, P("data")))
    f = lambda x: at.loop(lambda c, _: (jnp.tanh(c) * 0.5, None), x, length=4, name="l")[0]  # noqa: E731
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with WorkerRunner(at.Call(f, (x,)), TIMING, trial_timeout=300) as runner:
            memory = runner.measure({}).memory
            seen = runner.worker_info.get("device_ids")
    return {
        "devices": jax.device_count(),
        "worker_devices": seen,
        "isolated": runner.isolated,
        "memory": memory,
        "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)],
    }


def case_keys() -> dict:
    """The signatures of the same step on several meshes, from the tuner's and the decorator's side."""
    from autotune.program import _keys

    out = {}
    for name, shape, axes in (
        ("2x4", (2, 4), ("data", "model")),
        ("8x1", (8, 1), ("data", "model")),
        ("renamed", (2, 4), ("batch", "model")),
        ("2x4 again", (2, 4), ("data", "model")),
    ):
        args = inputs(mesh(shape, axes), axes[0])
        _, tuned = _keys.program_key(step.autotune.fun, args, {}, {})
        before = step.autotune.last_lookup
        step(*args)  # the decorator looks up when jit traces: once per mesh, not again for the same one
        lookup = step.autotune.last_lookup
        out[name] = {"tuned": tuned, "called": None if lookup is before else lookup.signature}
    single = tuple(jax.tree_util.tree_map(np.asarray, inputs(mesh())))
    out["single"] = {"tuned": _keys.program_key(step.autotune.fun, single, {}, {})[1]}
    return out


def case_codec() -> dict:
    """Shardings as JSON: each comes back equal here; the test decodes them with fewer devices."""
    from jax.sharding import AxisType, make_single_device_sharding

    from autotune.measuring.process._codec import decode_tree, encode_tree

    m = mesh((2, 4), ("a", "b"))
    explicit = Mesh(m.devices, ("a", "b"), axis_types=(AxisType.Explicit, AxisType.Auto))
    x = jnp.arange(64.0).reshape(8, 8)
    tree = {
        "rows": jax.device_put(x, NamedSharding(m, P("a", None))),
        "both": jax.device_put(x, NamedSharding(m, P(("a", "b")))),
        "explicit": jax.device_put(x, NamedSharding(explicit, P(None, "a"))),
        "device3": jax.device_put(x, make_single_device_sharding(jax.devices()[3])),
        "loose": jnp.ones(3),
        "host": np.ones(2),
    }
    wire = json.loads(json.dumps(encode_tree(tree)))
    back = decode_tree(wire)
    same = {
        k: (v.sharding == tree[k].sharding and v.committed == tree[k].committed and bool(np.array_equal(v, tree[k])))
        if isinstance(v, jax.Array)
        else isinstance(v, np.ndarray)
        for k, v in back.items()
    }
    return {"same": same, "wire": wire}


def case_decode() -> dict:
    """Decode the codec case's JSON (read from stdin) in a process with fewer devices."""
    from autotune.measuring.process._codec import NotPortable, decode_tree

    wire = json.loads(sys.stdin.read())
    try:
        decode_tree(wire)
    except NotPortable as exc:
        return {"error": str(exc)}
    return {"error": None}


def main(argv: list[str] | None = None) -> None:
    case = (argv or sys.argv[1:])[0]
    print(json.dumps(globals()[f"case_{case}"]()), flush=True)
