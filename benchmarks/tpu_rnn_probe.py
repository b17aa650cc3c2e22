"""Where a recurrent cell's unroll pays on this device: compile and steady per-call time by shape.

For each recurrent-cell shape in :data:`SHAPES` (steps, batch, input width, hidden width) and each
unroll in :data:`UNROLLS`, the cell of ``studies/accel_rnn.py`` (``h = tanh(x_t @ U + h @ W + b)``
under ``lax.scan``) is jitted, compiled and timed back to back (calls dispatched in a row, one wait
at the end: the steady state the tuner charges by default). The table shows which shapes are
dispatch-bound (every unroll at the host's dispatch rate) and which are device-bound, where unroll
trades compile for runtime; the accelerator study's full size is chosen from it. Run where the
device is this process's own (``scripts/tpu_session.sh probe`` on a TPU); on the CPU the shapes
are scaled down with ``--small``:

    python -m benchmarks.tpu_rnn_probe --json out/rnn-probe.json
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.tpu_xla_probe import steady_run_s

SHAPES = (
    (256, 16, 256, 512),  # the study's full size before this probe
    (1024, 16, 256, 512),
    (512, 128, 256, 256),
    (1024, 8, 128, 128),
    (512, 256, 512, 1024),
)
SMALL_SHAPES = ((32, 4, 16, 32), (64, 8, 16, 64))
UNROLLS = (1, 8, 16, 32)


def cell_program(unroll: int):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def encode(params, xs):
        def step(h, x_t):
            h = jnp.tanh(x_t @ params["u"] + h @ params["w"] + params["b"])
            return h, h

        h0 = jnp.zeros((xs.shape[1], params["w"].shape[0]), xs.dtype)
        return lax.scan(step, h0, xs, unroll=unroll)[1]

    return jax.jit(encode)


def inputs(steps: int, batch: int, d_in: int, hidden: int):
    import jax
    import jax.numpy as jnp

    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {
        "u": jax.random.normal(k1, (d_in, hidden)) / jnp.sqrt(d_in),
        "w": 0.9 * jax.random.normal(k2, (hidden, hidden)) / jnp.sqrt(hidden),
        "b": jnp.zeros(hidden),
    }
    return params, jax.random.normal(k3, (steps, batch, d_in))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="CPU-sized shapes")
    ap.add_argument("--calls", type=int, default=100, help="calls per timed round (default 100)")
    ap.add_argument("--json", help="write the rows as JSON here")
    args = ap.parse_args(argv)
    import jax

    rows = []
    print(f"device: {jax.devices()[0].device_kind}")
    print(
        f"{'steps':>6} {'batch':>6} {'d_in':>5} {'hidden':>6} {'unroll':>6} "
        f"{'compile s':>9} {'us/call':>9} {'vs u1':>6}"
    )
    for shape in SMALL_SHAPES if args.small else SHAPES:
        call_args = inputs(*shape)
        base = None
        for unroll in UNROLLS:
            fn = cell_program(unroll)
            t0 = time.perf_counter()
            compiled = fn.lower(*call_args).compile()
            compile_s = time.perf_counter() - t0
            run_s = steady_run_s(compiled, call_args, args.calls)
            base = base or run_s
            rows.append({"shape": list(shape), "unroll": unroll, "compile_s": compile_s, "run_s": run_s})
            print(
                f"{shape[0]:>6} {shape[1]:>6} {shape[2]:>5} {shape[3]:>6} {unroll:>6} {compile_s:>9.3f} "
                f"{run_s * 1e6:>9.1f} {base / run_s:>6.2f}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": jax.devices()[0].device_kind, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
