"""A bidirectional LSTM encoder written with Flax Linen's ``nn.RNN`` (inference).

Where the pattern comes from: Flax's own recurrent layers. ``nn.RNN(nn.OptimizedLSTMCell(H))``
is Flax's ready-made recurrence over time; it lifts the cell through ``nn.scan``, which
emits one ``lax.scan`` per direction (the loop is written in ``flax/core/axes_scan.py``,
not in this file). A backward direction (``reverse=True, keep_order=True``) and a dense
head make the usual sequence tagger / speech-feature encoder. The step is four small
gate matmuls on a (batch, hidden) carry: latency-bound, so unrolling may pay, while
each unrolled copy of the cell costs compile time.

Needs the ``examples`` extra (``pip install 'jax-autotune[examples]'``: flax).

Sites: the forward and the backward ``lax.scan`` of the two ``nn.RNN`` layers, T=24 steps each.
"""

import jax
import jax.numpy as jnp

try:
    import flax.linen as nn
except ImportError as exc:  # say which extra brings it
    raise ImportError(
        f"{__name__} needs flax ({exc}), from the examples extra: pip install 'jax-autotune[examples]'"
    ) from exc

import autotune as at

T, BATCH, D_IN, HIDDEN, D_OUT = 24, 16, 16, 32, 8
# A deployed encoder serves many batches per compiled shape.
EXPECTED_CALLS = 10_000


class BiLSTM(nn.Module):
    """Forward and backward LSTM over ``(batch, time, features)``, then a dense head."""

    hidden: int = HIDDEN
    out: int = D_OUT

    @nn.compact
    def __call__(self, xs):
        fwd = nn.RNN(nn.OptimizedLSTMCell(self.hidden), name="fwd")(xs)
        bwd = nn.RNN(nn.OptimizedLSTMCell(self.hidden), reverse=True, keep_order=True, name="bwd")(xs)
        return nn.Dense(self.out, name="head")(jnp.concatenate([fwd, bwd], axis=-1))


MODEL = BiLSTM()


@at.autotuned(expected_calls=EXPECTED_CALLS)
def encode(params, xs):
    return MODEL.apply(params, xs)


def loss(params, xs, targets):
    """Mean squared error of the encoder's outputs: what a training step differentiates."""
    return jnp.mean((MODEL.apply(params, xs) - targets) ** 2)


def init(seed: int = 0):
    kx, kp = jax.random.split(jax.random.PRNGKey(seed))
    xs = jax.random.normal(kx, (BATCH, T, D_IN))
    params = MODEL.init(kp, xs)
    return params, xs


def examples():
    return [(encode, init())]
