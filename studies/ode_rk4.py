"""Ensemble integration of the Lorenz-96 system with classic RK4.

Where the pattern comes from: ensemble weather/climate toy models and data
assimilation benchmarks (Lorenz 1996; the EnKF literature) integrate many
perturbed initial conditions over a fixed number of steps. The time loop is a
``lax.fori_loop``; the Runge-Kutta stage loop is written generically over the
Butcher tableau (as in diffrax-style solvers), here an ``at.loop`` so that
unrolling the four stages (the textbook hand-written form) is one of its choices.

Sites: ``rk_stages`` (at.loop, 4 stages) inside the ``fori_loop`` over 32 steps (one 0.32 time-unit forecast window).
"""

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

N_VARS, ENSEMBLE, STEPS, DT, FORCING = 40, 64, 32, 0.01, 8.0
# One forecast per assimilation cycle, thousands of cycles per experiment.
EXPECTED_CALLS = 2_000

# Classic RK4 Butcher tableau.
A = jnp.array([[0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
B = jnp.array([1.0, 2.0, 2.0, 1.0]) / 6.0


def lorenz96(x):
    return (jnp.roll(x, -1, axis=-1) - jnp.roll(x, 2, axis=-1)) * jnp.roll(x, 1, axis=-1) - x + FORCING


def rk4_step(x):
    def stage(ks, row):
        i, a = row
        xi = x + DT * jnp.tensordot(a, ks, axes=1)
        return ks.at[i].set(lorenz96(xi)), None

    ks0 = jnp.zeros((4,) + x.shape, x.dtype)
    ks, _ = at.loop(stage, ks0, (jnp.arange(4), A), name="rk_stages")
    return x + DT * jnp.tensordot(B, ks, axes=1)


@at.autotuned(expected_calls=EXPECTED_CALLS)
def forecast(x0):
    return lax.fori_loop(0, STEPS, lambda _, x: rk4_step(x), x0)


def init(seed: int = 0):
    x = FORCING * jnp.ones((ENSEMBLE, N_VARS))
    return x + 0.01 * jax.random.normal(jax.random.PRNGKey(seed), x.shape)


def examples():
    return [(forecast, (init(),))]
