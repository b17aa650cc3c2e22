"""A recurrent cell with a matmul per step over a few hundred steps, sized for an accelerator.

Where the pattern comes from: Elman/"vanilla" RNN encoders and the recurrent
core of LSTM/GRU layers written as a plain ``lax.scan`` over time (Haiku's
``dynamic_unroll``, Flax's ``nn.RNN`` over a simple cell): every step computes
``h = tanh(x_t @ U + h @ W + b)``, one (batch, hidden) x (hidden, hidden) matmul
on the carried state plus the input projection. Each step's matmul is too small
to keep the matrix unit busy and depends on the step before; only the input
projections are independent of ``h``, and an unrolled body lets XLA schedule
``k`` of them off the dependent chain and pay the loop's per-iteration cost
once per ``k`` steps: what ``unroll`` trades against a longer compile. On a
TPU v5e this shape gains about 1.3x in steady-state runtime at unroll 8-32 for
a 2-6x longer compile (docs/results/tpu.md, "The recurrent cell by shape": the
probe's script is ``benchmarks/tpu_rnn_probe.py`` at commit f38b122), so at 10,000 calls a
moderate unroll (2-8) is about 1.1x cheaper than the default, compile included;
on the CPU at the small size the compile dominates and the default stands.

float32, not bfloat16: the hidden state is fed back through 256 steps and stays
float32, as RNN code keeps it; on a TPU a float32 matmul at JAX's default
precision already runs on the MXU (bfloat16 passes, float32 accumulation), so
the matrix unit does the work without a bfloat16 copy of the state. Batch 16
and hidden 512 (4 x 128 lanes) make each step a real MXU matmul.

Site: the ``lax.scan`` over time (256 steps at the full size, 32 small).

Size: ``AUTOTUNE_STUDY_SIZE=full`` (T=256, batch 16, input 256, hidden 512) for
an accelerator; ``small`` (the default: T=32, batch 4, input 16, hidden 32) so
that a CPU compiles and runs each config in well under a second.
"""

import os

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

SIZE = os.environ.get("AUTOTUNE_STUDY_SIZE") or "small"
if SIZE not in ("small", "full"):
    raise ValueError(f"AUTOTUNE_STUDY_SIZE is {SIZE!r}; set it to 'small' (the default, CPU-sized) or 'full'.")
T, BATCH, D_IN, HIDDEN = (256, 16, 256, 512) if SIZE == "full" else (32, 4, 16, 32)
# The acceptance class: a deployed encoder serving many batches per compiled shape.
EXPECTED_CALLS = 10_000


def init(seed: int = 0):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    params = {
        "u": jax.random.normal(k1, (D_IN, HIDDEN)) / jnp.sqrt(D_IN),
        # Gain 0.9: a stable (echo-state) recurrence, so results do not depend on rounding.
        "w": 0.9 * jax.random.normal(k2, (HIDDEN, HIDDEN)) / jnp.sqrt(HIDDEN),
        "b": jnp.zeros(HIDDEN),
    }
    xs = jax.random.normal(k3, (T, BATCH, D_IN))
    return params, xs


@at.autotuned(expected_calls=EXPECTED_CALLS)
def encode(params, xs):
    def step(h, x_t):
        h = jnp.tanh(x_t @ params["u"] + h @ params["w"] + params["b"])
        return h, h

    h0 = jnp.zeros((xs.shape[1], HIDDEN), xs.dtype)
    _, hs = lax.scan(step, h0, xs)
    return hs


def examples():
    return [(encode, init())]
