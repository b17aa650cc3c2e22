"""A recurrent cell with a matmul per step over a few hundred steps, sized for an accelerator.

Where the pattern comes from: Elman/"vanilla" RNN encoders and the recurrent
core of LSTM/GRU layers written as a plain ``lax.scan`` over time (Haiku's
``dynamic_unroll``, Flax's ``nn.RNN`` over a simple cell): every step computes
``h = tanh(x_t @ U + h @ W + b)``, one (batch, hidden) x (hidden, hidden) matmul
on the carried state plus the input projection. Each step's matmul is too small
to keep the matrix unit busy and depends on the step before; only the input
projections are independent of ``h``, and an unrolled body lets XLA schedule
``k`` of them off the dependent chain and pay the loop's per-iteration cost
once per ``k`` steps: what ``unroll`` trades. A TPU v5e probe of this pattern
ran unroll 16-32 1.85-3.0x faster than unroll 1, back to back. This file at the
full size, timed once on a TPU v5e (jax 0.10.2, the median of 50 calls, each
waited for), gained less: 0.71 ms at unroll 1, 0.64 ms at unroll 16 (1.1x) for
a compile of 0.57 s against 0.16 s. Either way the tuner should pick an unroll
of 8-32 on the accelerator at 10,000 calls, where 0.07 ms a call is 0.7 s. On
the CPU at the small size the compile dominates at 10,000 calls and the default
(unroll 1) stood in a 4-trial run.

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
