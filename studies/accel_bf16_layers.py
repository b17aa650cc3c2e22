"""A scan over 24 stacked bfloat16 MLP layers (inference), sized for an accelerator.

Where the pattern comes from: "scan over layers" in large-model code (Flax
``nn.scan``, MaxText's ``scan_layers``, Praxis repeat layers, Equinox's
filter-scan idiom): the parameters of L identical blocks are stacked on a
leading axis and one ``lax.scan`` applies them, so compile time stays flat in
depth. Each block here is the feed-forward half of a transformer layer in
bfloat16: dense 1024 -> 4096, GELU, dense 4096 -> 1024, residual, on 256
tokens. Every step is two large matmuls that keep the matrix unit busy, so the
loop's own overhead is a rounding error of a step's time and unrolling has
nothing to win at run time, while each unrolled copy of the block is compiled
again. The tuner should keep the default (unroll 1) at its 10,000 calls, on the
accelerator and on the CPU alike (measured on a TPU v5e:
docs/results/design-figures.md#the-accelerator-studies-expected-picks).

Site: the ``lax.scan`` over the layers (24 at the full size, 8 small).

Size: ``AUTOTUNE_STUDY_SIZE=full`` (24 layers, 256 tokens, width 1024, hidden
4096: 201M parameters, 0.4 GB in bfloat16) for an accelerator; ``small`` (the
default: 8 layers, 16 tokens, width 64, hidden 256) so that a CPU compiles and
runs each config in well under a second.
"""

import os

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

SIZE = os.environ.get("AUTOTUNE_STUDY_SIZE") or "small"
if SIZE not in ("small", "full"):
    raise ValueError(f"AUTOTUNE_STUDY_SIZE is {SIZE!r}; set it to 'small' (the default, CPU-sized) or 'full'.")
LAYERS, TOKENS, WIDTH, HIDDEN = (24, 256, 1024, 4096) if SIZE == "full" else (8, 16, 64, 256)
DTYPE = jnp.bfloat16
# A served model runs the same batch shape all day.
EXPECTED_CALLS = 10_000


def init(seed: int = 0):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    layers = {
        "w_in": (jax.random.normal(k1, (LAYERS, WIDTH, HIDDEN)) / jnp.sqrt(WIDTH)).astype(DTYPE),
        "b_in": jnp.zeros((LAYERS, HIDDEN), DTYPE),
        # Scaled by depth so that the residual stream stays of order one through every layer.
        "w_out": (jax.random.normal(k2, (LAYERS, HIDDEN, WIDTH)) / jnp.sqrt(HIDDEN * LAYERS)).astype(DTYPE),
        "b_out": jnp.zeros((LAYERS, WIDTH), DTYPE),
    }
    x = jax.random.normal(k3, (TOKENS, WIDTH)).astype(DTYPE)
    return layers, x


def block(h, p):
    z = jax.nn.gelu(h @ p["w_in"] + p["b_in"])
    return h + z @ p["w_out"] + p["b_out"], None


@at.autotuned(expected_calls=EXPECTED_CALLS)
def forward(layers, x):
    h, _ = lax.scan(block, x, layers)
    return h


def examples():
    return [(forward, init())]
