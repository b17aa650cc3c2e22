"""A large body, unrolled by Python, called a few times: compile dominates, and XLA's options move it.

Where the pattern comes from: a network whose layers each have their own weights
and are written as a Python ``for`` over the layers (Flax/Equinox modules listed
layer by layer, a hand-unrolled multi-stage integrator), run a few times by a
short job: an evaluation script, a test, a notebook cell, a CLI tool. Every
layer is traced into the program, so the compiler works through hundreds of
operations, and at ten calls the compile is nearly all of the cost. The loop
around it (a few refinement steps) only chooses how often that large body is
copied; XLA's own options (``xla_backend_optimization_level``,
``xla_llvm_disable_expensive_passes``) trade the compile itself against the code
it emits, which is the trade this function needs.

Site: the ``steps`` loop (an ``at.loop``), 3 steps of 24 layers (6 operations
each) on a 64×64 state.
"""

import jax
import jax.numpy as jnp

import autotune as at

LAYERS, DIM, STEPS = 24, 64, 3
# A short job: the function runs a handful of times per process.
EXPECTED_CALLS = 10


def layer(x, w, i):
    y = jnp.tanh(x @ w + 0.01 * i)
    return x + 0.1 * y * jnp.sin(x)


def refine(x, ws):
    for i in range(LAYERS):  # each layer its own weights: traced one by one
        x = layer(x, ws[i], i)
    return x


@at.autotuned(expected_calls=EXPECTED_CALLS)
def evaluate(x, ws):
    return at.loop(lambda c, _: (refine(c, ws), None), x, length=STEPS, name="steps")[0]


def init(seed: int = 0):
    kx, kw = jax.random.split(jax.random.PRNGKey(seed))
    ws = jax.random.normal(kw, (LAYERS, DIM, DIM)) / DIM**0.5
    return jax.random.normal(kx, (DIM, DIM)), ws


def examples():
    return [(evaluate, init())]
