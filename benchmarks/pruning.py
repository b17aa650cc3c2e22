"""Tuning wall time with and without compile-budget pruning, on a loop whose full unroll explodes.

The workload is one ``at.loop`` of ``--length`` steps over a body of ``--body-ops`` x 4
elementwise ops. Rolled, it compiles in a fraction of a second; unrolled by k, XLA compiles
k copies of the body, so ``"for"`` and the large unroll factors take seconds each. The same
grid of configs is tuned three ways, each in a fresh study with a worker process:

* ``no pruning``: every trial compiles to the end (the runner takes no compile budget);
* ``pruning``: what ``at.tune`` does: once a best cost exists, a trial whose trace+lower+compile
  reaches best cost / compile weight is stopped, once it has also run as long as starting a
  new worker takes (killing a compile that would finish sooner costs more than it saves);
* ``pruning, kill at budget``: the same, killed the moment the budget is reached.

Prints a table and writes JSON (``--json``, default ``pruning_bench.json``).

    python -m benchmarks.pruning                 # length 400: a few minutes on 2 cores
    python -m benchmarks.pruning --quick         # length 200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import autotune as at  # noqa: E402
from autotune.measuring.process._worker_runner import WorkerRunner  # noqa: E402

FAST = {"target_s": 0.05, "min_reps": 3, "warmup": 1}


def make_workload(length: int, body_ops: int):
    def body(c, _):
        for _k in range(body_ops):
            c = jnp.sin(c) * 1.01 + jnp.cos(c * 0.5)
        return c, None

    def explode(x):
        return at.loop(body, x, length=length, name="l")[0]

    return explode


class NoBudget(WorkerRunner):
    """A worker runner that ignores the compile budget tune() passes, so no trial is pruned."""

    def measure(self, config, *, compile_budget_s=None, on_lowered=None):  # noqa: D102
        return super().measure(config, on_lowered=on_lowered)


def run(mode: str, fn, x, args) -> dict:
    storage = f"sqlite:///{tempfile.mkdtemp(prefix='pruning-bench-')}/s.db"
    runner = None
    if mode == "no pruning":
        runner = NoBudget(at.Call(fn, (x,)), FAST)
    elif mode == "pruning, kill at budget":
        runner = WorkerRunner(at.Call(fn, (x,)), FAST, prune_grace_s=0.0)
    t0 = time.perf_counter()
    r = at.tune(
        fn,
        x,
        expected_calls=args.expected_calls,
        sampler="grid",
        storage=storage,
        timing=FAST,
        confirm_rounds=1,
        confirm_top=2,
        runner=runner,
    )
    wall = time.perf_counter() - t0
    states: dict[str, int] = {}
    for t in r.trials:
        states[t.state] = states.get(t.state, 0) + 1
    return {
        "mode": mode,
        "wall_s": wall,
        "trials": len(r.trials),
        "states": states,
        "best_config": r.best_config.to_dict(),
        "best_cost": r.best_cost,
        "default_cost": r.default_cost,
        "trial_details": [
            {
                "config": t.config.to_dict(),
                "state": t.state,
                "cost": t.cost,
                "reason": t.reason,
                "compile_total_s": None
                if not t.measurement
                else t.measurement["trace_s"] + t.measurement["lower_s"] + t.measurement["compile_s"],
            }
            for t in r.trials
        ],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--length", type=int, default=400, help="loop trip count (default 400)")
    p.add_argument("--body-ops", type=int, default=10, help="sin/cos groups per step (default 10)")
    p.add_argument("--expected-calls", type=float, default=10.0, help="objective's call count (default 10)")
    p.add_argument(
        "--modes",
        default="none,grace,budget",
        help="comma-separated: none (no pruning), grace (at.tune's pruning), budget (kill at budget)",
    )
    p.add_argument("--quick", action="store_true", help="length 200")
    p.add_argument("--json", default="pruning_bench.json", help="where to write the results")
    args = p.parse_args(argv)
    if args.quick:
        args.length = 200
    names = {"none": "no pruning", "grace": "pruning", "budget": "pruning, kill at budget"}
    modes = [names[m.strip()] for m in args.modes.split(",") if m.strip()]
    fn = make_workload(args.length, args.body_ops)
    x = jnp.linspace(0.0, 1.0, 64)
    print(
        f"workload: at.loop of {args.length} steps x {4 * args.body_ops} ops, expected_calls={args.expected_calls:g}, "
        f"every config (grid); jax {jax.__version__}, Python {platform.python_version()}, {os.cpu_count()} cores",
        flush=True,
    )
    rows = []
    for mode in modes:
        row = run(mode, fn, x, args)
        rows.append(row)
        print(f"  {mode:<26} {row['wall_s']:7.1f} s  {row['states']}", flush=True)
    base = next((r["wall_s"] for r in rows if r["mode"] == "no pruning"), None)
    print()
    print(f"{'mode':<26} {'wall s':>8} {'vs none':>8} {'trials':>7} {'complete':>9} {'pruned':>7}  best config (cost)")
    for r in rows:
        speed = f"{base / r['wall_s']:.2f}x" if base else "-"
        best = ", ".join(
            f"{k}={v['repr']}" + (f"x{v['unroll']}" if v["repr"] != "for" else "") for k, v in r["best_config"].items()
        )
        print(
            f"{r['mode']:<26} {r['wall_s']:8.1f} {speed:>8} {r['trials']:>7} {r['states'].get('complete', 0):>9} "
            f"{r['states'].get('pruned', 0):>7}  {best} ({r['best_cost']:.3g})"
        )
    doc = {
        "length": args.length,
        "body_ops": args.body_ops,
        "expected_calls": args.expected_calls,
        "jax": jax.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "runs": rows,
    }
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
