"""An equilibrium layer solved with Optimistix: ``optx.root_find(..., optx.Newton(...))`` under ``vmap``.

Where the pattern comes from: deep equilibrium models and implicit layers, whose output is
the fixed point ``z = tanh(W z + U x + b)`` of a small nonlinear system, found per input by
a root finder (the Optimistix docs' root-finding examples, the DEQ literature). Optimistix
runs Newton's method in an Equinox ``while_loop`` (``lax.while_loop`` underneath); each step
builds the Jacobian with ``jax.jacfwd`` and solves with Lineax (an LU of a 16 × 16 matrix).
``vmap`` over a batch of 64 inputs turns the loop's condition into "any input not yet
converged": every step then does the whole batch's work, which makes the guarded unroll of
the while loop (``while×k``) a real trade-off.

Needs the ``examples`` extra (``pip install 'jax-autotune[examples]'``: optimistix, lineax).

Sites: the Newton ``while`` loop Optimistix runs (trip count unknown: it stops when
converged).
"""

import jax
import jax.numpy as jnp

try:
    import optimistix as optx
except ImportError as exc:  # say which extra brings it
    raise ImportError(
        f"{__name__} needs optimistix ({exc}), from the examples extra: pip install 'jax-autotune[examples]'"
    ) from exc

import autotune as at

STATE, INPUT, BATCH = 16, 8, 64
# An implicit layer is solved at every forward pass of a served model.
EXPECTED_CALLS = 10_000
SOLVER = optx.Newton(rtol=1e-6, atol=1e-6)


def residual(z, args):
    """Zero at the layer's fixed point: ``tanh(W z + U x + b) - z``."""
    params, x = args
    return jnp.tanh(params["w"] @ z + params["u"] @ x + params["b"]) - z


def equilibrium(params, x):
    sol = optx.root_find(residual, SOLVER, jnp.zeros(STATE), args=(params, x), max_steps=64)
    return sol.value


@at.autotuned(expected_calls=EXPECTED_CALLS)
def solve_batch(params, xs):
    return jax.vmap(equilibrium, in_axes=(None, 0))(params, xs)


def init(seed: int = 0):
    kw, ku, kb, kx = jax.random.split(jax.random.PRNGKey(seed), 4)
    # A contraction (spectral norm below one) so the fixed point exists and is unique.
    w = jax.random.normal(kw, (STATE, STATE)) * 0.9 / (2 * jnp.sqrt(STATE))
    params = {
        "w": w,
        "u": jax.random.normal(ku, (STATE, INPUT)) / jnp.sqrt(INPUT),
        "b": 0.1 * jax.random.normal(kb, (STATE,)),
    }
    xs = 2.0 * jax.random.normal(kx, (BATCH, INPUT))
    return params, xs


def examples():
    return [(solve_batch, init())]
