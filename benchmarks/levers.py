"""Experiment: what each lever on the tuner's wall saves, and what it costs in picks.

For each study, the tuner (``autotune.tune``, the loop-only space, ``benchmarks.bench``'s budget:
a quarter of the space, at least 6 trials, ``target_s`` 0.2) runs in fresh processes under each
variant, the variants alternating, ``--reps`` times each: ``old`` (every lever off: round 1
compiled, full-length rounds, a second process for every new winner, no early stop of a trial's
timing), ``new`` (every lever on) and ``new-X`` (every lever on but X). Each run's wall, its
breakdown and its pick are kept; every distinct pick (and the default) is then re-measured in
fresh processes side by side (``benchmarks._final``), and a pick's regret is its cost over the
cheapest re-measured pick's.

    python -m benchmarks.levers --study lambda_returns --study demo_unroll --reps 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

LEVERS = {
    "round1": ("autotune.study._confirm", "SEARCH_COMPILE_NOISE", float("inf")),
    "rounds": ("autotune.study._confirm", "ROUND_SAMPLING", 1.0),
    "second": ("autotune.study._confirm", "SECOND_PROCESS_LEAD", float("inf")),
    "cutoff": ("autotune.study._search", "CUTOFF", float("inf")),
    "reference": ("autotune.study._search", "REFERENCE_COMPILES", 3),
    "race": ("autotune.study._confirm", "_Rounds.race", lambda self, default: None),
}
"""lever -> (module, constant, the value that turns it off)."""

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def off_for(variant: str) -> list[str]:
    if variant == "old":
        return list(LEVERS)
    if variant == "new":
        return []
    return [variant.removeprefix("new-")]


def child(study: str, variant: str, out: str) -> None:
    import importlib

    for lever in off_for(variant):
        module, name, value = LEVERS[lever]
        owner = importlib.import_module(module)
        *path, attr = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, attr, value)
    from autotune import tune
    from autotune.jit._decorator import controller
    from autotune.program._space import Space
    from autotune.record._studyfile import load_examples

    ex = load_examples(os.path.join(ROOT, "studies", f"{study}.py"))[0]
    ctl = controller(ex.fn)
    space = Space(ctl.sites(*ex.args, **ex.kwargs))
    n_trials = max(6, math.ceil(0.25 * len(space)))
    storage = os.path.join(tempfile.mkdtemp(prefix="levers-"), "s.db")
    t0 = time.perf_counter()
    r = tune(
        ctl.fun, *ex.args, kwargs=ex.kwargs, expected_calls=ctl.expected_calls, compile_weight=ctl.compile_weight,
        runtime_weight=ctl.runtime_weight, n_trials=n_trials, storage=storage, function_key=ctl.key,
        jit_kwargs=ctl.jit_kwargs, seed=0, timing={"target_s": 0.2}, xla=False, progress=False,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    with open(out, "w") as fh:
        json.dump(
            {
                "wall": wall,
                "wall_report": r.wall.to_json(),
                "config": r.best_config.to_dict(),
                "space": len(space),
                "n_trials": n_trials,
                "renewed": any(p.worker_processes == 2 for p in r.confirmed),
                "stopped": sum(1 for t in r.trials if (t.reason or "").startswith("timing stopped")),
            },
            fh,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", action="append", required=False)
    ap.add_argument("--variants", default="old,new," + ",".join(f"new-{k}" for k in LEVERS))
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--final-processes", type=int, default=2)
    ap.add_argument("--json", default="/tmp/levers.json")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(*a.child)
    from autotune import Objective
    from autotune.jit._decorator import controller
    from autotune.record._studyfile import load_examples
    from benchmarks._final import aggregate, config_key, final_measure

    variants = a.variants.split(",")
    result: dict[str, Any] = {"variants": variants, "studies": {}}
    for study in a.study:
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for rep in range(a.reps):
            order = variants if rep % 2 == 0 else variants[::-1]
            for v in order:
                out = tempfile.mktemp(suffix=".json")
                cmd = [sys.executable, "-m", "benchmarks.levers", "--child", study, v, out]
                subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
                with open(out) as fh:
                    runs[v].append(json.load(fh))
                print(f"{study} {v} rep {rep}: {runs[v][-1]['wall']:.1f} s {runs[v][-1]['config']}", flush=True)
        ex = load_examples(os.path.join(ROOT, "studies", f"{study}.py"))[0]
        ctl = controller(ex.fn)
        objective = Objective(ctl.expected_calls, ctl.compile_weight, ctl.runtime_weight)
        picks = {config_key(r["config"]): r["config"] for rs in runs.values() for r in rs}
        picks.setdefault(config_key({}), {})
        measured = final_measure(
            os.path.join(ROOT, "studies", f"{study}.py"), ex.index, list(picks.values()),
            processes=a.final_processes, rounds=3, timing={"target_s": 0.2},
        )  # fmt: skip
        costs = {k: v["cost"] for k, v in aggregate(measured, objective, a.final_processes).items()}
        best = min(costs.values())
        rows = {}
        for v, rs in runs.items():
            rows[v] = {
                "wall_median": statistics.median(r["wall"] for r in rs),
                "walls": [r["wall"] for r in rs],
                "regrets": [costs.get(config_key(r["config"]), math.nan) / best for r in rs],
                "default_over_pick": [
                    costs.get(config_key({}), math.nan) / costs.get(config_key(r["config"]), math.nan) for r in rs
                ],
                "renewed": [r["renewed"] for r in rs],
                "stopped": [r["stopped"] for r in rs],
                "by_part": [r["wall_report"]["parts"] for r in rs],
            }
        result["studies"][study] = {"rows": rows, "costs": costs}
        with open(a.json, "w") as fh:
            json.dump(result, fh, indent=1)
        for v, row in rows.items():
            print(
                f"  {study:15s} {v:12s} wall {row['wall_median']:6.1f} s  regret "
                f"{'/'.join(f'{x:.3f}' for x in row['regrets'])}  default/pick "
                f"{'/'.join(f'{x:.3f}' for x in row['default_over_pick'])}  renewed {row['renewed']}",
                flush=True,
            )


if __name__ == "__main__":
    main()
