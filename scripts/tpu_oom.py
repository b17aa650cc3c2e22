"""A study where one config asks for more device memory than there is, on a TPU chip or on the CPU.

    python scripts/tpu_oom.py            # on a TPU v5e (JAX_PLATFORMS unset): about 3 minutes
    python scripts/tpu_oom.py --cpu      # the CPU twin: small sizes, the worker capped at 0.75 GiB
    python scripts/tpu_oom.py --remat    # on the chip: a checkpointed step whose +everything configs
                                         # ask for 31-33 GiB of HBM (72 s on a v5e; REMAT_SIZES)

The loop's body makes a large buffer from its step's input alone (``xs[i] @ w``: N x N) and
folds it into the carry. As a scan one step's buffer is live at a time; unrolled, XLA computes
every step's buffer before the first is folded in (they do not depend on the carry), so memory
grows with the unroll: on the CPU ``for`` asks for L times what ``scan×1`` asks (measured with
``Compiled.memory_analysis()``). At the TPU sizes one step's buffer is 1 GiB, so where XLA's
TPU schedule keeps the unrolled steps' buffers live as the CPU's does (not yet measured on a
chip), the unrolled configs ask for more than the chip's 15.75 GiB of HBM: XLA refuses them at
compile (``RESOURCE_EXHAUSTED``), the trial fails with one line, and the study goes on to a
winner that fits. Measured on a v5e (2026-12-06): it does not; every config asked for
0.05-0.14 GiB and none ran out (docs/reliability.md). The script prints what each config that
ran asked for, each failed trial's line and the winner (exit status 1 when no config ran out of
memory).

It is also a study file (``autotune tune scripts/tpu_oom.py``); ``AUTOTUNE_OOM_SIZE=cpu`` picks
the CPU sizes there.
"""

from __future__ import annotations

import os
import sys
import tempfile

import jax
import jax.numpy as jnp

import autotune as at
from autotune.measuring._oom import device_bytes, gib

SIZES = {  # N (the buffer is N x N float32), K (the inner dimension), L (steps)
    "tpu": (16384, 32, 24),  # 1 GiB a step: scan×1 about 1.05 GiB, scan×16 and for over 16 GiB
    "cpu": (4096, 8, 16),  # 64 MiB a step: scan×1 about 64 MiB, for about 1 GiB
}
CPU_LIMIT_GB = 0.75  # the CPU twin's trial_memory_gb: over scan×1's needs, under for's
REMAT_TRIALS, REMAT_SEED = 6, 0


def unrolls_grow(xs, w):
    def step(c, x):
        return jnp.tanh((x @ w) @ c), None

    return at.loop(step, jnp.ones(w.shape[1]) / w.shape[1], xs=xs, name="steps")[0]


hoisted = at.autotuned(expected_calls=1000)(unrolls_grow)


def inputs(size: str) -> tuple:
    n, k, length = SIZES[size]
    xs = jax.random.normal(jax.random.PRNGKey(0), (length, n, k)) * 0.01
    return xs, jnp.full((k, n), 0.5)


def examples():
    return [(hoisted, inputs(os.environ.get("AUTOTUNE_OOM_SIZE", "tpu")))]


REMAT_SIZES = {  # layers, batch, width (the hidden layer is 4x wider), dtype
    "tpu": (4, 1 << 18, 512, jnp.bfloat16),  # one batch x width activation is 0.25 GiB
    "cpu": (4, 256, 32, jnp.float32),
}
"""``--remat``: a training step over a scan of checkpointed MLP layers whose own policy saves nothing.
Saving everything keeps every intermediate of the layers' GELU MLPs: on the CPU at a 64th of the TPU
sizes (f32) the user's policy asks for 77 MiB, ``+dots`` 141 MiB and ``+everything`` 457 MiB, so at
the TPU sizes ``+everything`` asks for several times the chip's 15.75 GiB while the user's policy
fits. Seed 0 proposes ``+everything`` as trial 2 (the space is 100 configs, the trial budget 6)."""


def _mlp(x, w):
    return x + jax.nn.gelu(x @ w["up"]) @ w["down"], None


def remat_problem(size: str) -> tuple:
    """The ``--remat`` training step at ``size`` and its inputs: the weights and a ``width`` vector
    (the batch is made inside, so that gigabytes of inputs need not travel to the worker)."""
    layers, batch, width, dtype = REMAT_SIZES[size]

    def loss(ws, v):
        x = jnp.sin(jnp.arange(batch, dtype=jnp.float32)[:, None] * v[None, :]).astype(v.dtype)
        y, _ = jax.lax.scan(jax.checkpoint(_mlp, policy=jax.checkpoint_policies.nothing_saveable), x, ws)
        return jnp.mean(jnp.square(y.astype(jnp.float32)))

    def remat_step(ws, v):
        value, grads = jax.value_and_grad(loss)(ws, v)
        return value, jax.tree_util.tree_map(lambda w, g: (w - 1e-3 * g).astype(w.dtype), ws, grads)

    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    ws = {
        "up": (jax.random.normal(k1, (layers, width, 4 * width)) / width**0.5).astype(dtype),
        "down": (jax.random.normal(k2, (layers, 4 * width, width)) / (4 * width) ** 0.5).astype(dtype),
    }
    return remat_step, (ws, jnp.linspace(0.01, 1.0, width).astype(dtype))


def main(argv: list[str]) -> int:
    from autotune.measuring import _host

    _host.pin()  # this process traces and lowers on the CPU; the worker owns the chip (a TPU admits one process)
    size = "cpu" if "--cpu" in argv else "tpu"
    folder = tempfile.mkdtemp(prefix="tpu-oom-")
    remat = "--remat" in argv
    fn, args = remat_problem(size) if remat else (unrolls_grow, inputs(size))
    result = at.tune(
        fn,
        *args,
        expected_calls=1000,
        trial_memory_gb=CPU_LIMIT_GB if size == "cpu" and not remat else None,
        # the remat study's space is 100 configs: a seed whose first proposals include +everything
        n_trials=REMAT_TRIALS if remat else None,
        seed=REMAT_SEED if remat else 0,
        xla=False if remat else "auto",
        storage=os.path.join(folder, "studies.db"),
        timing={"target_s": 0.05, "min_reps": 3, "warmup": 1},
        confirm_top=1,
        confirm_rounds=1,
        progress=False,
    )
    for t in result.trials:  # what each config that ran asked for: does memory grow with the unroll here?
        if t.measurement and t.measurement.get("memory"):
            print(f"fits: trial {t.number} {t.config}: {gib(device_bytes(t.measurement['memory']) or 0)}")
    failed = [t for t in result.trials if t.state == "oom"]
    for t in failed:
        print(f"out of memory: trial {t.number} {t.config}: {t.reason}")
    if not failed:
        print(f"no config ran out of memory: raise the sizes in {'REMAT_SIZES' if remat else 'SIZES'}")
    asked = gib(device_bytes(result.best.memory) or 0)
    print(f"winner: {result.best_config} ({asked} of device memory); default cost {result.default_cost:.4g} s")
    return 0 if failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
