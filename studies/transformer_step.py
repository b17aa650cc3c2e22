"""A decoder-only transformer's training step: a scan over checkpointed layers, ``jax.grad`` inside.

Where the pattern comes from: MaxText, Flax ``nn.scan(nn.remat(Block))``, Equinox and
Praxis stack their identical layers on a leading axis and apply them with one ``lax.scan``
whose body is ``jax.checkpoint``-ed, with a rematerialisation policy chosen by hand
(``dots_with_no_batch_dims_saveable`` is MaxText's usual one). The policy decides which of a
layer's activations the forward pass keeps for the backward pass and which it recomputes, so
with the unroll factor it sets both the step time and the device memory. Each layer is
pre-norm causal self-attention (no projection biases) plus a GELU MLP, in bfloat16 with
float32 norms and logits; the step is ``jax.value_and_grad`` of a next-token loss, then SGD.

Sites: the forward scan over the layers and the backward (derived) scan ``jax.grad`` makes
of it; the backward one holds the checkpointed calls, so it is the one tuned over policies.

Size: ``AUTOTUNE_STUDY_SIZE=full`` (16 layers, batch 16, 512 tokens, width 1024, 8 heads,
MLP 4096: 0.2 G parameters; by estimate the residuals a step keeps are about 1 GiB saving
nothing, 3 GiB with the default policy and 8 GiB saving everything) for a TPU v5e's 16 GiB;
``small`` (the default: 4 layers, batch 2, 16 tokens, width 32) for the CPU (a training step's
compile there takes about 6 s a config on a 2-core machine, its calls under a millisecond).
"""

import os

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

SIZE = os.environ.get("AUTOTUNE_STUDY_SIZE") or "small"
if SIZE not in ("small", "full"):
    raise ValueError(f"AUTOTUNE_STUDY_SIZE is {SIZE!r}; set it to 'small' (the default, CPU-sized) or 'full'.")
LAYERS, BATCH, SEQ, WIDTH, HEADS, MLP, VOCAB = (
    (16, 16, 512, 1024, 8, 4096, 8192) if SIZE == "full" else (4, 2, 16, 32, 4, 64, 64)
)
DTYPE = jnp.bfloat16
POLICY = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
LR = 1e-3
# A training run: many steps of one compiled shape.
EXPECTED_CALLS = 10_000


def init(seed: int = 0):
    ks = jax.random.split(jax.random.PRNGKey(seed), 8)

    def normal(k, shape, fan_in):
        return (jax.random.normal(k, shape) / jnp.sqrt(fan_in)).astype(DTYPE)

    params = {
        "embed": normal(ks[0], (VOCAB, WIDTH), 1.0) * 0.02,
        "layers": {
            "ln1": jnp.ones((LAYERS, WIDTH), jnp.float32),
            "qkv": normal(ks[1], (LAYERS, WIDTH, 3 * WIDTH), WIDTH),
            "out": normal(ks[2], (LAYERS, WIDTH, WIDTH), WIDTH),
            "ln2": jnp.ones((LAYERS, WIDTH), jnp.float32),
            "up": normal(ks[3], (LAYERS, WIDTH, MLP), WIDTH),
            "down": normal(ks[4], (LAYERS, MLP, WIDTH), MLP),
        },
        "unembed": normal(ks[5], (WIDTH, VOCAB), WIDTH),
    }
    tokens = jax.random.randint(ks[6], (BATCH, SEQ + 1), 0, VOCAB)
    return params, tokens


def _norm(x, scale):
    x32 = x.astype(jnp.float32)
    return (x32 * lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6) * scale).astype(DTYPE)


def layer(x, p):
    """Pre-norm causal self-attention and a GELU MLP; ``(carry, None)`` as ``lax.scan`` wants."""
    b, t, d = x.shape
    q, k, v = jnp.split(_norm(x, p["ln1"]) @ p["qkv"], 3, axis=-1)
    q, k, v = (a.reshape(b, t, HEADS, d // HEADS) for a in (q, k, v))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / jnp.sqrt(d // HEADS)
    mask = jnp.tril(jnp.ones((t, t), bool))
    attn = jax.nn.softmax(jnp.where(mask, logits, -1e9), axis=-1).astype(DTYPE)
    x = x + jnp.einsum("bhqk,bkhd->bqhd", attn, v).reshape(b, t, d) @ p["out"]
    return x + jax.nn.gelu(_norm(x, p["ln2"]) @ p["up"]) @ p["down"], None


def loss(params, tokens):
    """Next-token cross entropy of the decoder."""
    x = params["embed"][tokens[:, :-1]]
    x, _ = lax.scan(jax.checkpoint(layer, policy=POLICY), x, params["layers"])
    logits = (x @ params["unembed"]).astype(jnp.float32)
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1))


@at.autotuned(expected_calls=EXPECTED_CALLS)
def train_step(params, tokens):
    value, grads = jax.value_and_grad(loss)(params, tokens)
    params = jax.tree_util.tree_map(lambda p, g: (p - LR * g).astype(p.dtype), params, grads)
    return params, value


def examples():
    return [(train_step, init())]
