"""A sampler whose written-out loop runs a little faster and compiles much longer: tier-up's case.

Where the pattern comes from: a diffusion-style sampler (as in ``demo_unroll``) that also
carries a recurrent state through a matmul at every step. Written out (``for``), XLA folds the
schedule's coefficients and time embeddings into constants, as in ``demo_unroll``, but the
matmul stays: the written-out loop runs about 15% faster, not 15×, and compiles about 8× longer
(on the 2-core CPU: 1.2 s against 0.15 s). Compiled up front, that compile pays back only after
about 5,000 calls; served by the default while it compiles beside it (``tier_up=True``), the
default's calls during the compile are worth most of a second of the winner's, more than the
default's own compile: tier-up pays (`autotune.select._tiered.pays`).

Site: the ``steps`` loop (an ``at.loop``), 48 steps over a 1,024-wide state and a 16×64 hidden state.

Size: ``AUTOTUNE_STUDY_SIZE=small`` (the default, above) or ``full`` for a TPU v5e: a
262,144-wide state and a 256×1,024 hidden state at 100,000 calls, where the written-out loop runs
1.27× faster than the scan and compiles 20× longer (8.3 s), and tiering it was 8% below every
config compiled up front (docs/results/tpu.md, "A workload for tier-up on the chip").
"""

import os

import jax
import jax.numpy as jnp
import numpy as np

import autotune as at

SIZE = os.environ.get("AUTOTUNE_STUDY_SIZE") or "small"
if SIZE not in ("small", "full"):
    raise ValueError(f"AUTOTUNE_STUDY_SIZE is {SIZE!r}; set it to 'small' (the default, CPU-sized) or 'full'.")
STEPS, DIM, HIDDEN, BATCH = (48, 1024, 64, 16) if SIZE == "small" else (48, 1 << 18, 1024, 256)
# about where compiling the written-out loop up front pays back (small), where tiering it pays (full)
EXPECTED_CALLS = 5_000 if SIZE == "small" else 100_000


def make_step(steps: int, dim: int, hidden: int):
    """``(step, times)`` of the sampler at these sizes (the tier-up probe of docs/results/tpu.md timed four)."""
    times = np.linspace(1.0, 1.0 / steps, steps, dtype=np.float32)
    freqs = np.exp(-np.log(10_000.0) * np.arange(dim // 2, dtype=np.float32) / (dim // 2)).astype(np.float32)

    def step(carry, t):
        x, h, w = carry
        alpha = jnp.cos(0.5 * jnp.pi * t) ** 2
        embedding = jnp.concatenate([jnp.sin(1000.0 * t * freqs), jnp.cos(1000.0 * t * freqs)])
        x = jnp.sqrt(alpha) * x + 0.05 * jnp.sqrt(1.0 - alpha) * embedding
        h = jnp.tanh(h @ w + x[:hidden][None, :])
        return (x, h, w), None

    return step, times


STEP, TIMES = make_step(STEPS, DIM, HIDDEN)


@at.autotuned(expected_calls=EXPECTED_CALLS)
def sample(x, h, w):
    x, h, _ = at.loop(STEP, (x, h, w), TIMES, name="steps")[0]
    return x, h


def init(seed: int = 0, dim: int = DIM, hidden: int = HIDDEN, batch: int = BATCH):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    w = jax.random.normal(k3, (hidden, hidden)) / np.sqrt(hidden)
    return jax.random.normal(k1, (dim,)), jax.random.normal(k2, (batch, hidden)), w


def examples():
    return [(sample, init())]
