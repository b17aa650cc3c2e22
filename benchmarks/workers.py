"""Wall time of one study with 1 vs 2 (or more) worker processes: `autotune tune FILE --workers K`.

Each run starts from an empty study and cache, so the numbers compare like with like:

    python -m benchmarks.workers                          # studies/seed_rollout.py, SQLite, 1 vs 2 workers
    python -m benchmarks.workers --workers 1 2 4 --trials 16
    python -m benchmarks.workers --postgres               # a throw-away PostgreSQL server (tests/pg_server.py)
    python -m benchmarks.workers --storage postgresql://user@host/db   # an existing database (must be empty)

It prints a table and, last, one JSON object. On one CPU device the workers share the
cores and disturb each other's timings (the CLI warns): the rule is one worker per
device, so the speed-up measured here on a small CPU box is a floor, not the point.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_once(
    file: str, workers: int, trials: int, storage: str, cache: str, run_seconds: float | None, sampler: str
) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "autotune",
        "tune",
        file,
        "--workers",
        str(workers),
        "--trials",
        str(trials),
        "--storage",
        storage,
        "--cache",
        cache,
        "--sampler",
        sampler,
        "--json",
    ]
    if run_seconds is not None:
        cmd += ["--run-seconds", str(run_seconds)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    (result, *_) = json.loads(proc.stdout)
    states: dict[str, int] = {}
    for t in result["trials"]:
        states[t["state"]] = states.get(t["state"], 0) + 1
    return {
        "workers": workers,
        "wall_s": round(wall, 2),
        "trials": len(result["trials"]),
        "states": states,
        "measured": states.get("complete", 0),
        "best_cost": result["best_cost"],
        "default_cost": result["default_cost"],
        "best_config": result["best_config"],
        "warned_shared_device": "share" in proc.stderr,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--file", default=str(REPO / "studies" / "seed_rollout.py"), help="the study file")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to compare")
    p.add_argument("--trials", type=int, default=12, help="trials per study (the sum over workers)")
    p.add_argument("--sampler", default="auto", choices=["auto", "tpe", "grid", "random"])
    p.add_argument("--run-seconds", type=float, default=None, help="runtime sampling per measurement (--run-seconds)")
    p.add_argument("--postgres", action="store_true", help="study and cache on a throw-away PostgreSQL server")
    p.add_argument("--storage", default=None, help="an existing, empty database URL for study and cache")
    a = p.parse_args(argv)

    server = None
    if a.postgres:
        import importlib.util

        spec = importlib.util.spec_from_file_location("pg_server", REPO / "tests" / "pg_server.py")
        pg_server = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(pg_server)
        PgServer = pg_server.PgServer

        server = PgServer().start()
    rows = []
    try:
        for k in a.workers:
            with tempfile.TemporaryDirectory(prefix="workers-bench-") as tmp:
                if server is not None:
                    storage = cache = server.create_database()
                elif a.storage:
                    storage = cache = a.storage
                else:
                    storage = "sqlite:///" + os.path.join(tmp, "studies.db")
                    cache = "sqlite:///" + os.path.join(tmp, "cache.db")
                print(f"running {k} worker(s) ...", file=sys.stderr, flush=True)
                rows.append(run_once(a.file, k, a.trials, storage, cache, a.run_seconds, a.sampler))
                if server is not None:
                    server.drop_database(storage)
    finally:
        if server is not None:
            server.stop()

    base = rows[0]["wall_s"]
    backend = "postgresql" if (server is not None or (a.storage or "").startswith("postgresql")) else "sqlite"
    print(f"\n{Path(a.file).name}: {a.trials} trials, {backend} storage, {os.cpu_count()} CPUs")
    print(f"{'workers':>7} {'wall s':>8} {'speed-up':>8} {'trials':>6} {'measured':>8} {'best cost':>10}  states")
    for r in rows:
        print(
            f"{r['workers']:>7} {r['wall_s']:>8.2f} {base / r['wall_s']:>7.2f}x {r['trials']:>6} {r['measured']:>8} "
            f"{r['best_cost']:>10.4g}  {r['states']}"
        )
    print(json.dumps({"file": a.file, "trials": a.trials, "storage": backend, "cpus": os.cpu_count(), "runs": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
