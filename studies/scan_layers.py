"""A training step of a deep residual MLP whose identical blocks are scanned over stacked parameters.

Where the pattern comes from: "scan over layers" in large-model code (Flax
``nn.scan`` / ``nn.remat_scan``, MaxText's ``scan_layers``, Praxis repeat layers,
Equinox's filter-scan idiom): the parameters of L identical blocks are stacked
on a leading axis and one ``lax.scan`` applies them, so compile time stays flat
in depth. Under ``jax.grad`` the scan appears twice in the traced program: the
forward pass (saving residuals) and its transposed backward pass, and each can
be unrolled independently.

Sites: the forward scan over 12 blocks and the backward (transposed) scan.
"""

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

LAYERS, BATCH, WIDTH, HIDDEN = 12, 32, 64, 128
LR = 1e-3
# One call per optimiser step: a short fine-tuning run.
EXPECTED_CALLS = 5_000


def init(seed: int = 0):
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(seed), 4)
    blocks = {
        "scale": jnp.ones((LAYERS, WIDTH)),
        "w_in": jax.random.normal(k1, (LAYERS, WIDTH, HIDDEN)) / jnp.sqrt(WIDTH),
        "w_out": jax.random.normal(k2, (LAYERS, HIDDEN, WIDTH)) / jnp.sqrt(HIDDEN) * 0.1,
    }
    x = jax.random.normal(k3, (BATCH, WIDTH))
    y = jax.random.normal(k4, (BATCH, WIDTH))
    return blocks, x, y


def block(h, p):
    """Pre-norm residual MLP block (RMSNorm, GELU)."""
    z = h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1e-6) * p["scale"]
    return h + jax.nn.gelu(z @ p["w_in"]) @ p["w_out"], None


def loss(blocks, x, y):
    h, _ = lax.scan(block, x, blocks)
    return jnp.mean((h - y) ** 2)


@at.autotuned(expected_calls=EXPECTED_CALLS)
def train_step(blocks, x, y):
    value, grads = jax.value_and_grad(loss)(blocks, x, y)
    blocks = jax.tree_util.tree_map(lambda p, g: p - LR * g, blocks, grads)
    return blocks, value


def examples():
    return [(train_step, init())]
