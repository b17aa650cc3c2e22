"""A data-parallel RNN training step written with ``jax.shard_map`` on a mesh of 8 devices.

Where the pattern comes from: the ``shard_map`` tutorial's data-parallel network. The
loss is a ``shard_map`` over a ``"data"`` mesh axis: each device runs the recurrence (an
Elman RNN, ``tanh``, hidden 32: the first of 17 inputs sets the state, a ``lax.scan`` of 16
steps reads the rest) on its 8 sequences and the per-device sums meet in a ``lax.psum``
over ``"data"``; ``jax.value_and_grad`` of it transposes the ``shard_map`` (the backward
scan runs per device too) and an SGD update follows. The loop sits inside the ``shard_map``
body, where the axis name ``"data"`` is bound: a rewrite of the loop has to re-trace the
body under the mesh.

The study needs 8 devices, so it runs in a process of its own: ``HOST_DEVICES = 8`` below
makes ``autotune tune``/``autotune sites`` start JAX with
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (see ``autotune/record/_studyfile.py``).
On a GPU or TPU machine, run it with ``JAX_PLATFORMS=cpu``.

Sites: the forward scan over time inside the ``shard_map`` body, and the backward scan
``value_and_grad`` derives from it.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

try:
    from jax import shard_map
except ImportError:  # older jax lines: the experimental spelling (same keyword arguments)
    from jax.experimental.shard_map import shard_map

import autotune as at

# Read by autotune before JAX starts: this study's process gets 8 host CPU devices.
HOST_DEVICES = 8
T, BATCH, D_IN, HIDDEN, LR = 17, 64, 8, 32, 0.1
# A training run takes many steps of one compiled shape.
EXPECTED_CALLS = 10_000


@functools.cache
def mesh() -> Mesh:
    devices = jax.devices()
    if len(devices) < HOST_DEVICES:
        raise RuntimeError(
            f"{__name__} needs {HOST_DEVICES} devices, JAX has {len(devices)} "
            f"{devices[0].platform} device(s); run it with JAX_PLATFORMS=cpu "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={HOST_DEVICES}"
        )
    return Mesh(np.array(devices[:HOST_DEVICES]), ("data",))


def local_loss(params, xs, ys):
    """One device's share: the recurrence over its sequences, the squared errors summed over ``"data"``."""

    def step(h, x):
        return jnp.tanh(x @ params["wx"] + h @ params["wh"] + params["b"]), None

    xs = jnp.swapaxes(xs, 0, 1)
    # The first state comes from the first input (h0 = 0), so the carry varies over the mesh
    # axis from the start as the scan wants.
    h, _ = lax.scan(step, jnp.tanh(xs[0] @ params["wx"] + params["b"]), xs[1:])
    return lax.psum(jnp.sum((h @ params["wo"] - ys) ** 2), "data") / BATCH


def loss(params, xs, ys):
    sharded = shard_map(local_loss, mesh=mesh(), in_specs=(P(), P("data"), P("data")), out_specs=P())
    return sharded(params, xs, ys)


@at.autotuned(expected_calls=EXPECTED_CALLS)
def train_step(params, xs, ys):
    value, grads = jax.value_and_grad(loss)(params, xs, ys)
    return jax.tree.map(lambda p, g: p - LR * g, params, grads), value


def init(seed: int = 0):
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(seed), 4)
    params = {
        "wx": jax.random.normal(k1, (D_IN, HIDDEN)) / np.sqrt(D_IN),
        "wh": jax.random.normal(k2, (HIDDEN, HIDDEN)) * 0.5 / np.sqrt(HIDDEN),
        "b": jnp.zeros(HIDDEN),
        "wo": jax.random.normal(k3, (HIDDEN, 1)) / np.sqrt(HIDDEN),
    }
    xs = jax.random.normal(k4, (BATCH, T, D_IN))
    ys = jnp.sin(xs.sum(axis=(1, 2)))[:, None]
    replicated, batch = NamedSharding(mesh(), P()), NamedSharding(mesh(), P("data"))
    return jax.device_put(params, replicated), jax.device_put(xs, batch), jax.device_put(ys, batch)


def examples():
    return [(train_step, init())]
