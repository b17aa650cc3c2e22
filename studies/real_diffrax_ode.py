"""A batch of Lotka-Volterra solves with diffrax: Tsit5, an adaptive PID step size, the default adjoint.

Where the pattern comes from: diffrax's getting-started example and the parameter-fitting
loops built on it. ``diffrax.diffeqsolve`` with its default adjoint
(``RecursiveCheckpointAdjoint``) integrates in Equinox's checkpointed ``lax.while_loop``
(``equinox/internal/_loop/checkpointed.py``): every step of the adaptive solver is one
iteration, and the step count is known only when it runs. ``SaveAt(ts=...)`` adds the
inner loops that write each requested time that a step passed. ``vmap`` over initial
conditions makes the predicates batched: the loop runs until the slowest solve finishes.
On an accelerator each iteration costs a device-to-host copy of the predicate, which a
guarded unroll (``while×k``) amortises; on a CPU it mostly adds masked work.

Needs the ``examples`` extra (``pip install 'jax-autotune[examples]'``: diffrax, equinox).

Sites: the solver's while loop and the two while loops nested in it (all written in Equinox).
"""

import jax
import jax.numpy as jnp

try:
    import diffrax
except ImportError as exc:  # say which extra brings it
    raise ImportError(
        f"{__name__} needs diffrax ({exc}), from the examples extra: pip install 'jax-autotune[examples]'"
    ) from exc

import autotune as at

BATCH, N_SAVE, T1 = 8, 16, 10.0
# One solve per step of an optimiser that fits the four rates.
EXPECTED_CALLS = 1_000


def vector_field(t, y, rates):
    a, b, c, d = rates
    prey, predator = y[0], y[1]
    return jnp.stack([a * prey - b * prey * predator, d * prey * predator - c * predator])


def solve_one(y0, rates):
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        diffrax.Tsit5(),
        t0=0.0,
        t1=T1,
        dt0=0.1,
        y0=y0,
        args=rates,
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, T1, N_SAVE)),
        stepsize_controller=diffrax.PIDController(rtol=1e-5, atol=1e-7),
        max_steps=512,
    )
    return sol.ys


@at.autotuned(expected_calls=EXPECTED_CALLS)
def trajectories(y0s, rates):
    return jax.vmap(solve_one, in_axes=(0, None))(y0s, rates)


def init(seed: int = 0):
    offsets = jax.random.uniform(jax.random.PRNGKey(seed), (BATCH, 2), minval=-0.3, maxval=0.3)
    y0s = jnp.array([1.0, 1.0]) + offsets
    rates = jnp.array([1.5, 1.0, 3.0, 1.0])
    return y0s, rates


def examples():
    return [(trajectories, init())]
