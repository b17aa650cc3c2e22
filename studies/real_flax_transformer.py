"""A decoder-only transformer written with Flax Linen: ``nn.scan`` over ``nn.remat`` blocks (training step).

Where the pattern comes from: MaxText and the other large Flax models stack their layers
with ``nn.scan(nn.remat(Block), variable_axes={"params": 0}, split_rngs={"params": True},
length=LAYERS)``: one block is traced once and its weights carry a leading layer axis, so
compile time does not grow with depth, and ``nn.remat`` recomputes each block's
activations in the backward pass instead of storing them. The tuned function is the
``jax.value_and_grad`` of a next-token loss, as a training step computes it. Each block is
pre-norm causal self-attention (no projection biases) plus a GELU MLP; the dims are small
(d_model 32, 4 heads, 16 tokens) so the program compiles in seconds on a CPU.

Needs the ``examples`` extra (``pip install 'jax-autotune[examples]'``: flax).

Sites: the forward scan over the 4 layers and the backward scan ``value_and_grad`` derives
from it (it re-runs each block's forward under remat).
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

VOCAB, LAYERS, BATCH, SEQ, D_MODEL, HEADS, D_MLP = 64, 4, 4, 16, 32, 4, 64
# A training run takes many steps of one compiled shape.
EXPECTED_CALLS = 10_000


class Block(nn.Module):
    """Pre-norm causal self-attention and MLP; ``(carry, None)`` in and out, as ``nn.scan`` wants."""

    @nn.compact
    def __call__(self, x, _):
        mask = nn.make_causal_mask(jnp.ones(x.shape[:2], jnp.int32))
        h = nn.LayerNorm(name="ln_attn")(x)
        # No projection biases, as in MaxText: a key bias would shift every logit of a query
        # alike, so its gradient is zero up to round-off, noise no tolerance can judge.
        x = x + nn.MultiHeadDotProductAttention(HEADS, use_bias=False, name="attn")(h, h, mask=mask)
        h = nn.LayerNorm(name="ln_mlp")(x)
        h = nn.Dense(D_MODEL, name="mlp_out")(nn.gelu(nn.Dense(D_MLP, name="mlp_in")(h)))
        return x + h, None


class Decoder(nn.Module):
    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(VOCAB, D_MODEL, name="embed")(tokens)
        # MaxText's decoder: one remat'ed block, scanned over a stacked "layers" axis.
        stack = nn.scan(
            nn.remat(Block, prevent_cse=False), variable_axes={"params": 0}, split_rngs={"params": True}, length=LAYERS
        )
        x, _ = stack(name="layers")(x, None)
        return nn.Dense(VOCAB, name="logits")(nn.LayerNorm(name="ln_final")(x))


MODEL = Decoder()


def loss(params, tokens):
    """Next-token cross entropy."""
    logits = MODEL.apply(params, tokens[:, :-1])
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1))


@at.autotuned(expected_calls=EXPECTED_CALLS)
def loss_and_grad(params, tokens):
    return jax.value_and_grad(loss)(params, tokens)


def init(seed: int = 0):
    kt, kp = jax.random.split(jax.random.PRNGKey(seed))
    tokens = jax.random.randint(kt, (BATCH, SEQ + 1), 0, VOCAB)
    params = MODEL.init(kp, tokens[:, :-1])
    return params, tokens


def examples():
    return [(loss_and_grad, init())]
