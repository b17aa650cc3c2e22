"""A bidirectional GRU encoder over a batch of sequences (inference).

Where the pattern comes from: sequence encoders for speech, time-series and
tokenised text (e.g. the encoder of Bahdanau-style attention models, or the
recurrent towers in Flax/Haiku examples) run one ``lax.scan`` over time with the
inputs as ``xs`` and a second one over the reversed sequence, then concatenate
the two hidden-state sequences. The per-step body is three small matmuls, so
loop overhead and cross-step fusion matter, which is what unroll trades.

Sites: the forward and the backward ``lax.scan`` over T=32 steps.
"""

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

T, BATCH, D_IN, HIDDEN = 32, 16, 32, 64
# A deployed encoder serves many batches per compiled shape.
EXPECTED_CALLS = 10_000


def init(seed: int = 0):
    keys = jax.random.split(jax.random.PRNGKey(seed), 7)

    def cell(k):
        k1, k2 = jax.random.split(k)
        return {
            "wx": jax.random.normal(k1, (D_IN, 3 * HIDDEN)) / jnp.sqrt(D_IN),
            "wh": jax.random.normal(k2, (HIDDEN, 3 * HIDDEN)) / jnp.sqrt(HIDDEN),
            "b": jnp.zeros(3 * HIDDEN),
        }

    params = {"fwd": cell(keys[0]), "bwd": cell(keys[1])}
    xs = jax.random.normal(keys[2], (T, BATCH, D_IN))
    return params, xs


def gru_step(p, h, x):
    gx = x @ p["wx"] + p["b"]
    gh = h @ p["wh"]
    r = jax.nn.sigmoid(gx[:, :HIDDEN] + gh[:, :HIDDEN])
    z = jax.nn.sigmoid(gx[:, HIDDEN : 2 * HIDDEN] + gh[:, HIDDEN : 2 * HIDDEN])
    n = jnp.tanh(gx[:, 2 * HIDDEN :] + r * gh[:, 2 * HIDDEN :])
    return (1.0 - z) * n + z * h


@at.autotuned(expected_calls=EXPECTED_CALLS)
def encode(params, xs):
    h0 = jnp.zeros((xs.shape[1], HIDDEN), xs.dtype)

    def fwd(h, x):
        h = gru_step(params["fwd"], h, x)
        return h, h

    def bwd(h, x):
        h = gru_step(params["bwd"], h, x)
        return h, h

    _, hs_f = lax.scan(fwd, h0, xs)
    _, hs_b = lax.scan(bwd, h0, xs, reverse=True)
    return jnp.concatenate([hs_f, hs_b], axis=-1)


def examples():
    return [(encode, init())]
