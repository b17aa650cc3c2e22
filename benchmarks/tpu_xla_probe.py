"""Which per-compile XLA options this platform's compiler accepts, and what they trade on loops.

For each candidate in :data:`CANDIDATES` (passed as ``jax.jit(compiler_options=...)``): whether the
compiler accepts it, then compile seconds and steady-state run seconds of two loop-heavy programs
(the accelerator studies' RK4 integrator and tiny scan at their ``AUTOTUNE_STUDY_SIZE``), each
against the default compiled in the same process. Prints a table and writes JSON (``--json``).
Run where the device is this process's own (``scripts/tpu_session.sh`` runs it on a TPU):

    python -m benchmarks.tpu_xla_probe --json out/xla-probe.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Generic XLA debug options, and TPU compiler flags that libtpu takes as compile options.
CANDIDATES = (
    {"xla_backend_optimization_level": 0},
    {"xla_backend_optimization_level": 1},
    {"xla_llvm_disable_expensive_passes": True},
    {"exec_time_optimization_effort": -1.0},
    {"xla_tpu_enable_latency_hiding_scheduler": False},
    {"xla_enable_dumping": False},
)
PROGRAMS = ("accel_rk4", "accel_tiny_scan")


def steady_run_s(compiled, args, calls: int = 50, rounds: int = 5) -> float:
    """Median over rounds of seconds per call, ``calls`` dispatched back to back per round."""
    import jax

    jax.block_until_ready(compiled(*args))
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = None
        for _ in range(calls):
            out = compiled(*args)
        jax.block_until_ready(out)
        samples.append((time.perf_counter() - t0) / calls)
    return statistics.median(samples)


def compile_with(fun, args, options: dict) -> tuple[object, float]:
    import jax

    t0 = time.perf_counter()
    compiled = jax.jit(fun, compiler_options=options or None).lower(*args).compile()
    return compiled, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import jax

    from autotune.record._studyfile import load_examples

    dev = jax.devices()[0]
    rows = []
    for name in PROGRAMS:
        (ex,) = load_examples(os.path.join(ROOT, "studies", f"{name}.py"))
        fun, args = ex.fn.autotune.fun if hasattr(ex.fn, "autotune") else ex.fn.fun, ex.args
        jax.clear_caches()
        base, base_c = compile_with(fun, args, {})
        base_r = steady_run_s(base, args)
        rows.append({"program": name, "option": "default", "accepted": True, "compile_s": base_c, "run_s": base_r})
        for opt in CANDIDATES:
            jax.clear_caches()
            row = {"program": name, "option": json.dumps(opt)}
            try:
                compiled, c = compile_with(fun, args, opt)
            except Exception as exc:  # noqa: BLE001 - the compiler's refusal is the result
                row.update(accepted=False, why=str(exc).splitlines()[0][:200])
            else:
                r = steady_run_s(compiled, args)
                row.update(accepted=True, compile_s=c, run_s=r, compile_x=c / base_c, run_x=r / base_r)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\n{dev.platform}:{dev.device_kind}")
    print(f"{'program':16} {'option':48} {'compile':>9} {'run':>10} {'c/def':>6} {'r/def':>6}")
    for r in rows:
        if not r["accepted"]:
            print(f"{r['program']:16} {r['option']:48} refused: {r['why'][:60]}")
            continue
        print(
            f"{r['program']:16} {r['option']:48} {r['compile_s']:8.3f}s {r['run_s'] * 1e6:8.1f}us "
            f"{r.get('compile_x', 1):6.2f} {r.get('run_x', 1):6.2f}"
        )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(
                {"device": f"{dev.platform}:{dev.device_kind}", "jax": jax.__version__, "rows": rows}, fh, indent=1
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
