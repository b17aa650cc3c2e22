"""A fixed-step RK4 integrator as a 2,000-step ``lax.fori_loop``: a chain of coupled damped pendulums.

Where the pattern comes from: the hand-written fixed-step integrators of
scientific JAX code (classic RK4 with its four stages written out, over one
state array, stepped by a ``lax.fori_loop`` because only the final state is
kept), here for a ring of 32 damped pendulums coupled to their neighbours by
springs (the discrete sine-Gordon or Frenkel-Kontorova chain), ``q'' = -sin q +
kappa (q_{i+1} - 2 q_i + q_{i-1}) - gamma q'``: a 64-dimensional nonlinear ODE.
Each stage reads the state the stage before it wrote, so unrolling the time
loop gives XLA one long chain of small dependent elementwise stages: nothing
runs in parallel that did not before, and the compile time grows much faster
than the number of copies: unrolling wins nothing at run time and costs compile.
The tuner must keep the default (the rolled loop, unroll 1) on an accelerator,
and full unroll (2,000 steps) is predicted far over the compile budget
(measured on a TPU v5e: docs/results/design-figures.md#the-accelerator-studies-expected-picks).

Why a damped chain and not Lorenz-96 (``ode_rk4.py``): Lorenz-96 is chaotic, so
over 20 time units a last-bit difference between two loop structures grows by
a factor of about e^34 and the correctness guard would reject every unroll for
changing the result, keeping the default for the wrong reason. The damped chain
loses energy: a 1e-7 change of the initial state is still 1e-7 after 2,000
steps, and an unrolled config's result matches the default's.

Site: the ``fori_loop`` over time (2,000 steps of dt = 0.01 at the full size, 8 small).

Size: ``AUTOTUNE_STUDY_SIZE=full`` (32 pendulums, 2,000 steps) for an
accelerator; ``small`` (the default: 8 pendulums, 8 steps, since even on the
CPU a fully unrolled RK4 loop of a few dozen steps compiles for many seconds) so
that a CPU compiles and runs each config in well under a second.
"""

import os

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

SIZE = os.environ.get("AUTOTUNE_STUDY_SIZE") or "small"
if SIZE not in ("small", "full"):
    raise ValueError(f"AUTOTUNE_STUDY_SIZE is {SIZE!r}; set it to 'small' (the default, CPU-sized) or 'full'.")
N_PENDULUMS, STEPS = (32, 2000) if SIZE == "full" else (8, 8)
DT, GAMMA = 0.01, 0.1  # step, damping
# One integration per spring constant of a parameter sweep.
EXPECTED_CALLS = 1_000


def chain(y, kappa):
    """d/dt of the state ``y = [q, p]`` (angles and angular velocities, shape (2, N))."""
    q, p = y[0], y[1]
    laplacian = jnp.roll(q, 1) - 2.0 * q + jnp.roll(q, -1)
    return jnp.stack([p, -jnp.sin(q) + kappa * laplacian - GAMMA * p])


def rk4_step(y, kappa):
    k1 = chain(y, kappa)
    k2 = chain(y + 0.5 * DT * k1, kappa)
    k3 = chain(y + 0.5 * DT * k2, kappa)
    k4 = chain(y + DT * k3, kappa)
    return y + DT / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


@at.autotuned(expected_calls=EXPECTED_CALLS)
def integrate(y0, kappa):
    y = lax.fori_loop(0, STEPS, lambda _, y: rk4_step(y, kappa), y0)
    energy = jnp.sum(0.5 * y[1] ** 2 + 1.0 - jnp.cos(y[0]))  # kinetic + gravity; what a sweep plots
    return y, energy


def init(seed: int = 0):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    q0 = jax.random.uniform(k1, (N_PENDULUMS,), minval=-2.0, maxval=2.0)
    p0 = jax.random.normal(k2, (N_PENDULUMS,))
    return jnp.stack([q0, p0]), jnp.float32(4.0)


def examples():
    return [(integrate, init())]
