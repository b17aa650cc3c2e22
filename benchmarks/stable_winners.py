"""Stable winners: one function tuned three times in fresh processes on a loaded machine, then the
picks re-measured side by side.

    python -m benchmarks.stable_winners                       # README quickstart + the GRU training step
    python -m benchmarks.stable_winners --program smooth --runs 3 --trials 12 --no-burner

Each run is a fresh ``python`` process with a fresh study (``at.tune`` with a worker process), while
a CPU burner (benchmarks/_burner.py) holds one core. Then, in one process and with the burner still
on, every distinct pick and the default are measured again in interleaved rounds (compiled each
round); costs are medians under the function's objective, compile charged as
``Measurement.compile_cost_s``. Picks are stable when their costs lie within the noise of one
another (the spread of a config's own round costs). Prints a table and, last, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._burner import burner

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = {  # name: (module file, expected_calls)
    "smooth": ("scripts/stable_winners.py", 10_000),
    "gru_train": ("tests/fixtures/gru_train.py", 2_000),
}


def smooth_examples():
    """The README quickstart."""
    import jax.numpy as jnp

    import autotune as at

    def smooth(x):
        return at.loop(lambda c, _: (0.5 * c + 1.0, None), x, length=64, name="smooth")[0]

    return smooth, (jnp.zeros(128),)


def program(name: str):
    if name == "smooth":
        return smooth_examples()
    import importlib.util

    spec = importlib.util.spec_from_file_location("gru_train", REPO / PROGRAMS[name][0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ((fn, args),) = mod.examples()
    return fn.autotune.fun, tuple(args)


def tune_once(name: str, trials: int, storage: str) -> dict:
    """In this (fresh) process: tune and print the winner."""
    import autotune as at

    fn, args = program(name)
    t0 = time.perf_counter()
    r = at.tune(fn, *args, expected_calls=PROGRAMS[name][1], n_trials=trials, storage=storage, progress=False)
    return {
        "winner": r.best_config.to_dict(),
        "label": r.best_config.label(r.sites),
        "wall_s": time.perf_counter() - t0,
        "speedup": r.speedup,
        "confirmed": [
            {"config": p.config.to_dict(), "rounds": [list(x) for x in p.rounds], "compiles": p.compiles}
            for p in r.confirmed
        ],
    }


def side_by_side(name: str, configs: list[dict], rounds: int) -> dict[str, dict]:
    import autotune as at
    from autotune.measuring._runner import InProcessRunner

    fn, args = program(name)
    runner = InProcessRunner(at.Call(fn, args))
    goal = at.Objective(expected_calls=PROGRAMS[name][1])
    costs: dict[str, list[float]] = {json.dumps(c, sort_keys=True): [] for c in configs}
    for r in range(rounds):
        order = list(costs)[r % len(costs) :] + list(costs)[: r % len(costs)]
        for key in order:
            m = runner.measure(json.loads(key))
            costs[key].append(goal.cost(m))
    return {
        k: {"cost": statistics.median(v), "spread": (max(v) - min(v)) / statistics.median(v), "rounds": v}
        for k, v in costs.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", action="append", choices=sorted(PROGRAMS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=5, help="side-by-side rounds of the picks")
    ap.add_argument("--no-burner", action="store_true")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # name trials storage
    args = ap.parse_args()
    if args.child:
        print(json.dumps(tune_once(args.child[0], int(args.child[1]), args.child[2])))
        return
    out = {}
    with burner(not args.no_burner):
        env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
        for name in args.program or sorted(PROGRAMS):
            picks = []
            for i in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    child = [
                        sys.executable,
                        __file__,
                        "--child",
                        name,
                        str(args.trials),
                        os.path.join(tmp, "studies.db"),
                    ]
                    proc = subprocess.run(child, env=env, capture_output=True, text=True, check=False)
                if proc.returncode != 0:
                    raise SystemExit(f"run {i} of {name} failed:\n{proc.stderr[-3000:]}")
                picks.append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(
                    f"{name} run {i + 1}: {picks[-1]['label']} ({picks[-1]['speedup']:.3f}x, "
                    f"{picks[-1]['wall_s']:.0f} s)",
                    flush=True,
                )
            configs = [{}] + [p["winner"] for p in picks if p["winner"] != {}]
            unique = list({json.dumps(c, sort_keys=True): c for c in configs}.values())
            measured = side_by_side(name, unique, args.rounds)
            base = measured[json.dumps({}, sort_keys=True)]["cost"]
            for key, v in measured.items():
                print(
                    f"  {key:90s} cost {v['cost']:.4g} s  x{v['cost'] / base:.3f} of the default  "
                    f"(own spread {v['spread']:.1%})",
                    flush=True,
                )
            out[name] = {"picks": picks, "side_by_side": measured}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
