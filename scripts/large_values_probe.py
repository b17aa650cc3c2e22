"""Probe (an experiment, not a lasting benchmark): how long `autotune tune` takes on a function
whose arguments and outputs are large, as a model's parameters are.

    BL=16 python -m autotune tune scripts/large_values_probe.py --trials 2 --xla off   # 0.4 GB of bf16

``BL`` layers of a (1024, 4096) bf16 matrix go through a trivial scan, and the step returns
them scaled, so the worker sends 0.4 GB back with each measured trial's outputs (the guard
compares them with the default's). Figures (2-core CPU, 2 trials, the whole command): over
300 s before the parent read the worker's events in linear time, 58 s after, 34 s with the
guard's fast paths, 17 s with large arrays crossing as files (docs/results/tpu.md).
"""

import os

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

L, W, M = int(os.environ.get("BL", 16)), 1024, 4096


def layer(x, p):
    return jnp.tanh(x @ p["up"][:, :W] + p["ln"]).astype(x.dtype), None


@at.autotuned(expected_calls=10_000)
def step(params, x):
    y, _ = lax.scan(layer, x, params)
    return jax.tree_util.tree_map(lambda p: p * 0.999, params), y.sum()


def examples():
    params = {"up": jnp.ones((L, W, M), jnp.bfloat16), "ln": jnp.ones((L, W), jnp.float32)}
    return [(step, (params, jnp.ones((4, W), jnp.bfloat16)))]
