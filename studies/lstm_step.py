"""An LSTM's training step: a scan over time whose cell is checkpointed, ``jax.grad`` inside.

Where the pattern comes from: sequence models written as ``lax.scan`` over a recurrent cell
(Flax ``nn.RNN(nn.OptimizedLSTMCell)``, Haiku ``dynamic_unroll``, Equinox ``eqx.nn.LSTMCell``
under ``lax.scan``) keep, for the backward pass, every step's gates unless the cell is
``jax.checkpoint``-ed; long sequences then trade recomputation for memory. The cell here is
checkpointed with JAX's default policy (nothing saved but its inputs): the policy and the
unroll factor set the step time and the memory together. The step is ``jax.value_and_grad``
of a regression loss on the hidden states, then SGD.

Sites: the forward scan over time and the backward (derived) scan ``jax.grad`` makes of it;
the backward one holds the checkpointed cell, so it is the one tuned over policies.

Size: ``AUTOTUNE_STUDY_SIZE=full`` (512 steps, batch 128, input 512, hidden 1024: by estimate
the step keeps about 0.5 GiB of carries saving nothing and 5 GiB of gates saving everything)
for a TPU v5e's 16 GiB; ``small`` (the default:
8 steps, batch 4, input 8, hidden 16) so that a CPU compiles and runs each config in well under
a second.
"""

import os

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

SIZE = os.environ.get("AUTOTUNE_STUDY_SIZE") or "small"
if SIZE not in ("small", "full"):
    raise ValueError(f"AUTOTUNE_STUDY_SIZE is {SIZE!r}; set it to 'small' (the default, CPU-sized) or 'full'.")
T, BATCH, D_IN, HIDDEN = (512, 128, 512, 1024) if SIZE == "full" else (8, 4, 8, 16)
LR = 1e-2
# A training run: many steps of one compiled shape.
EXPECTED_CALLS = 10_000


def init(seed: int = 0):
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(seed), 4)
    params = {
        "wx": jax.random.normal(k1, (D_IN, 4 * HIDDEN)) / jnp.sqrt(D_IN),
        "wh": jax.random.normal(k2, (HIDDEN, 4 * HIDDEN)) / jnp.sqrt(HIDDEN),
        "b": jnp.zeros(4 * HIDDEN),
    }
    xs = jax.random.normal(k3, (T, BATCH, D_IN))
    ys = jax.random.normal(k4, (T, BATCH, HIDDEN))
    return params, xs, ys


def cell(params, carry, x_t):
    """One LSTM step: input, forget, cell and output gates from ``x_t`` and the hidden state."""
    h, c = carry
    i, f, g, o = jnp.split(x_t @ params["wx"] + h @ params["wh"] + params["b"], 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return (h, c), h


def loss(params, xs, ys):
    zeros = jnp.zeros((xs.shape[1], HIDDEN), xs.dtype)
    step = jax.checkpoint(lambda carry, x_t: cell(params, carry, x_t))
    _, hs = lax.scan(step, (zeros, zeros), xs)
    return jnp.mean((hs - ys) ** 2)


@at.autotuned(expected_calls=EXPECTED_CALLS)
def train_step(params, xs, ys):
    value, grads = jax.value_and_grad(loss)(params, xs, ys)
    return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads), value


def examples():
    return [(train_step, init())]
