"""The demo's workload: a sampler loop whose unrolled form compiles slower but runs faster.

Where the pattern comes from: diffusion samplers and schedule-driven integrators
(DDIM, Euler steps over a noise schedule). The schedule is a NumPy array fixed
when the program is written, and every step mixes the state with coefficients
and a sinusoidal time embedding that depend on the step's time only. As a
``lax.scan`` the time is a traced value, so every call recomputes the
coefficients and the embedding at every step. Fully unrolled (``for``), each
copy of the body sees its time as a constant: XLA computes all of that at
compile time (constant folding) and a call is left with a multiply-add per
step. Compiling the unrolled program takes much longer, so the winner depends
on how often the function is called: the scan when it runs a few times, the
unrolled loop when it runs a million times.

Site: the ``steps`` loop (an ``at.loop``), 48 steps over a 1,024-wide state.
"""

import jax
import jax.numpy as jnp
import numpy as np

import autotune as at

STEPS = 48
DIM = 1024
EXPECTED_CALLS = 100_000  # a sampler serving requests calls it all day
# Fixed when the program is written, as samplers do: the times and the embedding's frequencies.
TIMES = np.linspace(1.0, 1.0 / STEPS, STEPS, dtype=np.float32)
FREQS = np.exp(-np.log(10_000.0) * np.arange(DIM // 2, dtype=np.float32) / (DIM // 2)).astype(np.float32)


def sampler_step(x, t):
    alpha = jnp.cos(0.5 * jnp.pi * t) ** 2
    embedding = jnp.concatenate([jnp.sin(1000.0 * t * FREQS), jnp.cos(1000.0 * t * FREQS)])
    return jnp.sqrt(alpha) * x + 0.05 * jnp.sqrt(1.0 - alpha) * embedding, None


@at.autotuned(expected_calls=EXPECTED_CALLS)
def sample(x):
    return at.loop(sampler_step, x, TIMES, name="steps")[0]


def init(seed: int = 0):
    return (jax.random.normal(jax.random.PRNGKey(seed), (DIM,)),)


def examples():
    return [(sample, init())]
