"""A data-parallel RNN training step on a mesh of 8 devices: the batch sharded with ``NamedSharding``.

Where the pattern comes from: JAX's "distributed arrays and automatic parallelization"
recipe, as most training loops use it: a ``Mesh`` with a ``"data"`` axis, the batch placed
with ``NamedSharding(mesh, P("data"))``, the parameters replicated (``P()``), and one
jitted step (``value_and_grad`` and an SGD update) that XLA partitions: each device runs the
recurrence on its 8 sequences and the gradients are all-reduced. The model is an Elman RNN
(``tanh``, hidden 32) over 17 inputs: the first sets the state, a ``lax.scan`` of 16 steps
reads the rest.

The study needs 8 devices, so it runs in a process of its own: ``HOST_DEVICES = 8`` below
makes ``autotune tune``/``autotune sites`` start JAX with
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (see ``autotune/record/_studyfile.py``).
On a GPU or TPU machine, run it with ``JAX_PLATFORMS=cpu``.

Sites: the forward scan over time and the backward scan ``value_and_grad`` derives from it,
both in the partitioned program.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

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


def rnn_loss(params, xs, ys):
    """Mean squared error of a linear read-out of the last hidden state; ``xs`` is (batch, time, features)."""

    def step(h, x):
        return jnp.tanh(x @ params["wx"] + h @ params["wh"] + params["b"]), None

    xs = jnp.swapaxes(xs, 0, 1)
    # h0 = 0, so the first state is the first input's alone (as in real_shard_map.py).
    h, _ = lax.scan(step, jnp.tanh(xs[0] @ params["wx"] + params["b"]), xs[1:])
    return jnp.mean((h @ params["wo"] - ys) ** 2)


@at.autotuned(expected_calls=EXPECTED_CALLS)
def train_step(params, xs, ys):
    value, grads = jax.value_and_grad(rnn_loss)(params, xs, ys)
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
