"""Tuning wall with and without builder processes: `autotune tune FILE --builders 0` vs `--builders K`.

The same study file is tuned twice (or `--repeats` times each), every run in a fresh storage and
cache, through the command line, so a run is what a user pays: the parent traces and lowers, the
worker measures, and with builders the compiles run in K parallel processes (deviceless on a TPU)
while the worker only loads and measures. It prints a table (tuning wall, trials, winner, where
the compiles ran) and writes the rows as JSON (`--json PATH`).

    python -m benchmarks.builders                                  # studies/demo_unroll.py, K=3
    python -m benchmarks.builders --study studies/accel_rnn.py --builders 4 --json out/builders.json

Target on a TPU v5e host: the tuning wall with builders at most half the wall compiling in the
worker. On a small CPU box the builders share the cores the worker times runtime on, so the
figure there says little.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_once(study: str, builders: int, args: argparse.Namespace) -> dict:
    """One `autotune tune` in a fresh storage and cache: its wall seconds and what it found."""
    with tempfile.TemporaryDirectory(prefix="autotune-builders-") as work:
        cmd = [sys.executable, "-m", "autotune", "tune", study, "--builders", str(builders), "--json"]
        cmd += ["--storage", os.path.join(work, "studies.db"), "--cache", os.path.join(work, "cache.db")]
        cmd += ["--sampler", args.sampler]
        if args.trials is not None:
            cmd += ["--trials", str(args.trials)]
        if args.trial_timeout is not None:
            cmd += ["--trial-timeout", str(args.trial_timeout)]
        if args.run_seconds is not None:
            cmd += ["--run-seconds", str(args.run_seconds)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    results = json.loads(proc.stdout)
    states = collections.Counter(t["state"] for r in results for t in r["trials"])
    return {
        "builders": builders,
        "wall_s": round(wall, 2),
        "trials": sum(len(r["trials"]) for r in results),
        "states": dict(states),
        "winner": [r["best_config"] for r in results],
        "best_cost": [r["best_cost"] for r in results],
        "default_cost": [r["default_cost"] for r in results],
        "compiled_in": [r.get("compiled_in") for r in results],
        "warnings": [ln for ln in proc.stderr.splitlines() if "builder processes" in ln][:3],
    }


def _winner(row: dict) -> str:
    return "; ".join(json.dumps(w, separators=(",", ":")) for w in row["winner"])[:60]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--study", default=str(REPO / "studies" / "demo_unroll.py"), help="the study file")
    p.add_argument("--builders", type=int, default=3, help="K, the builder processes of the second run")
    p.add_argument("--repeats", type=int, default=1, help="runs of each (alternating), for the spread")
    p.add_argument("--trials", type=int, default=None, help="--trials of each run (default: autotune's)")
    p.add_argument("--sampler", default="grid", help="--sampler (default grid: the builders compile ahead)")
    p.add_argument("--trial-timeout", type=float, default=None)
    p.add_argument("--run-seconds", type=float, default=None)
    p.add_argument("--json", default=None, metavar="PATH", help="write the rows and the ratio here")
    args = p.parse_args(argv)
    rows = []
    for _ in range(args.repeats):
        for k in (0, args.builders):
            rows.append(run_once(args.study, k, args))
            print(f"  builders={k}: {rows[-1]['wall_s']:.1f} s", file=sys.stderr)
    print(f"{'builders':>8}  {'wall s':>8}  {'trials':>6}  {'winner':<60}  compiles")
    for r in rows:
        where = "; ".join(map(str, r["compiled_in"]))
        print(f"{r['builders']:>8}  {r['wall_s']:>8.1f}  {r['trials']:>6}  {_winner(r):<60}  {where}")
    walls = {k: min(r["wall_s"] for r in rows if r["builders"] == k) for k in (0, args.builders)}
    ratio = walls[args.builders] / walls[0] if walls[0] else None
    same = len({json.dumps(r["winner"], sort_keys=True) for r in rows}) == 1
    print(f"wall with {args.builders} builders / in the runner: {ratio:.2f} (target <= 0.50); same winner: {same}")
    out = {"study": args.study, "builders": args.builders, "rows": rows, "wall_ratio": ratio, "same_winner": same}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
