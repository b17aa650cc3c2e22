"""A long scan of a tiny body: a gated exponential moving average over thousands of steps.

Where the pattern comes from: the sequential form of linear recurrences
``h_t = a_t * h_{t-1} + (1 - a_t) * x_t``: exponential moving averages with a
per-step, per-channel decay (online filters, signal smoothing, running
statistics over a stream) and the reference ``lax.scan`` of gated linear RNNs
and diagonal state-space layers (minGRU, LRU, the sequential scan that
Mamba-style code checks its parallel scan against). The gates are computed for
every step before the loop, so the body is a multiply-add on a 16-wide vector:
almost all of a step's cost is the loop itself (the counter, the slice of the
inputs, the write of the output). Unrolling by ``k`` pays that once per ``k``
steps, until the unrolled body itself grows too large: at 100,000 calls the
tuner should pick a moderate unroll (8-16) on an accelerator (measured on a TPU
v5e: docs/results/design-figures.md#the-accelerator-studies-expected-picks).
Full unroll (4,096 copies of the body) is in the space but predicted far over
the compile budget.

Site: the ``lax.scan`` over time (4,096 steps at the full size, 32 small).

Size: ``AUTOTUNE_STUDY_SIZE=full`` (4,096 steps x 16 channels) for an
accelerator; ``small`` (the default: 32 steps x 8 channels) so that a CPU
compiles and runs each config in well under a second.
"""

import os

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

SIZE = os.environ.get("AUTOTUNE_STUDY_SIZE") or "small"
if SIZE not in ("small", "full"):
    raise ValueError(f"AUTOTUNE_STUDY_SIZE is {SIZE!r}; set it to 'small' (the default, CPU-sized) or 'full'.")
T, CHANNELS = (4096, 16) if SIZE == "full" else (32, 8)
# A filter in a data pipeline runs on every window of a stream.
EXPECTED_CALLS = 100_000


@at.autotuned(expected_calls=EXPECTED_CALLS)
def smooth(gate_logits, x):
    decay = jax.nn.sigmoid(gate_logits)  # every step's decay at once, outside the loop

    def step(h, inputs):
        a, x_t = inputs
        h = a * h + (1.0 - a) * x_t
        return h, h

    _, ys = lax.scan(step, jnp.zeros(x.shape[1:], x.dtype), (decay, x))
    return ys


def init(seed: int = 0):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    gate_logits = 2.0 + jax.random.normal(k1, (T, CHANNELS))  # decays around 0.88
    x = jax.random.normal(k2, (T, CHANNELS))
    return gate_logits, x


def examples():
    return [(smooth, init())]
