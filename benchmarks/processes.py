"""Does the pick change with ``--processes 8`` and the compilation cache on? Every config of a study
measured for real, then picked by the one rule (``autotune.select``) for one process, for 8 without
the cache and for 8 with it.

Per config, ``--samples`` times each (medians): trace + lower + compile and the per-call seconds
(``autotune.measuring._stages``, caches cleared, CPU seconds), and the load of its executable from a
persistent cache (``autotune.measuring.process._load_probe.measure_load``: compiled in one fresh process, loaded in a
second, the cache hit checked). A later process with the cache pays R = trace + lower + load.
The table lists the figures and the crossover intervals of each setting; the JSON has everything.

    python -m benchmarks.processes [--study demo_unroll] [--samples 3] [--out processes_bench.json]
    python -m benchmarks.processes --tune 300   # also `autotune tune` end to end at 300 calls, per setting
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SETTINGS = (("1 process", 1, False), ("8, cache off", 8, False), ("8, cache on", 8, True))


def measure_study(name: str, samples: int) -> tuple[list[dict], dict]:
    from autotune.measuring._stages import measure
    from autotune.measuring.process._load_probe import measure_load
    from autotune.program import _keys
    from autotune.program._call import Call
    from autotune.program._space import Space

    mod = importlib.import_module(f"studies.{name}")
    fn, args = mod.examples()[0][:2]
    ctl = fn.autotune
    program, _ = _keys.program_key(ctl.fun, args, {}, ctl.jit_kwargs)
    space = Space(program.sites)
    rows = []
    for config in space.configs():
        ms = [measure(ctl.fun, args, {}, config, jit_kwargs=ctl.jit_kwargs, target_s=0.2) for _ in range(samples)]
        loads = [measure_load(Call(ctl.fun, args, {}, ctl.jit_kwargs), config) for _ in range(samples)]
        got = [x.load_s for x in loads if x.load_s is not None]
        row = {
            "config": config.to_dict(),
            "label": str(config),
            "compile_cost_s": statistics.median(m.compile_cost_s for m in ms),
            "run_cost_s": statistics.median(m.run_cost_s for m in ms),
            "trace_lower_s": statistics.median(m.load_estimate_s for m in ms),
            "load_s": statistics.median(got) if got else None,
            "written_compile_s": statistics.median(x.compile_s for x in loads if x.compile_s is not None),
            "notes": sorted({x.note for x in loads if x.note}),
            "samples": samples,
        }
        row["load_cost_s"] = row["trace_lower_s"] + row["load_s"] if got else row["compile_cost_s"]
        rows.append(row)
        print(
            f"  {row['label']:>12}: C {row['compile_cost_s']:.3f} s  R {row['load_cost_s']:.3f} s  "
            f"run {row['run_cost_s'] * 1e6:.1f} µs",
            flush=True,
        )
    return rows, space.default().to_dict()


def picks(rows: list[dict], default: dict) -> dict:
    from autotune import select as _select
    from autotune.program._config import Config
    from autotune.select import Point

    points = [
        Point(Config.from_dict(r["config"]), r["compile_cost_s"], r["run_cost_s"], load_cost_s=r["load_cost_s"])
        for r in rows
    ]
    out = {}
    for label, p, cache in SETTINGS:
        intervals = _select.crossover_intervals(points, processes=p, compilation_cache=cache, default=default)
        out[label] = [
            {
                "config": str(it["config"]),
                "from_calls": it["from_calls"],
                "to_calls": _select.json_bound(it["to_calls"]),
            }
            for it in intervals
        ]
    return out


def tune_end_to_end(study: str, calls: float, samples: int) -> dict:
    """`autotune tune STUDY --expected-calls N --processes P --compilation-cache on|off`, each in a
    private cache and storage, ``samples`` times per setting: the picks and their costs."""
    import tempfile

    out: dict = {}
    for label, p, cache in SETTINGS:
        out[label] = []
        for _ in range(samples):
            with tempfile.TemporaryDirectory() as tmp:
                argv = [
                    sys.executable,
                    "-m",
                    "autotune",
                    "tune",
                    os.path.join(ROOT, "studies", f"{study}.py"),
                    "--expected-calls",
                    str(calls),
                    "--processes",
                    str(p),
                    "--compilation-cache",
                    "on" if cache else "off",
                    "--xla",
                    "off",
                    "--json",
                    "--cache",
                    os.path.join(tmp, "c.db"),
                    "--storage",
                    f"sqlite:///{tmp}/s.db",
                ]
                env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
                t = time.perf_counter()
                done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
                wall = time.perf_counter() - t
            if done.returncode != 0:
                out[label].append({"error": done.stderr.strip().splitlines()[-25:]})
                continue
            (r,) = json.loads(done.stdout)
            out[label].append(
                {
                    "best": r["best_config"],
                    "best_cost": r["best_cost"],
                    "default_cost": r["default_cost"],
                    "load_notes": r.get("load_notes"),
                    "wall_s": wall,
                    "loads": {
                        json.dumps(p["config"], sort_keys=True): p.get("load_cost_s")
                        for p in r["confirmed"]
                        if p.get("load_measured")
                    },
                }
            )
            print(f"  tune {label}: best {r['best_config']} cost {r['best_cost']:.4g} ({wall:.0f} s)", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", default="demo_unroll")
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--tune", type=float, default=None, metavar="N", help="also tune end to end at N calls")
    ap.add_argument("--tune-samples", type=int, default=1)
    ap.add_argument("--only-tune", action="store_true", help="skip the per-config measurements")
    ap.add_argument("--out", default="processes_bench.json")
    a = ap.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if a.only_tune:
        result = {"study": a.study, "tune": {"calls": a.tune, "runs": tune_end_to_end(a.study, a.tune, a.tune_samples)}}
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {a.out}")
        return 0
    print(f"{a.study}: every config, {a.samples} samples each", flush=True)
    rows, default = measure_study(a.study, a.samples)
    result = {"study": a.study, "configs": rows, "default": default, "intervals": picks(rows, default)}
    print()
    print("| config | compile C (s) | later process with the cache R (s) | of which the load (s) | run (µs) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        load = "-" if r["load_s"] is None else f"{r['load_s']:.3f}"
        print(
            f"| {r['label']} | {r['compile_cost_s']:.3f} | {r['load_cost_s']:.3f} | {load} | "
            f"{r['run_cost_s'] * 1e6:.1f} |"
        )
    print()
    for label, intervals in result["intervals"].items():
        spans = ", ".join(
            f"{it['config']} [{it['from_calls']:.0f}, "
            f"{'∞' if it['to_calls'] is None else format(it['to_calls'], '.0f')})"
            for it in intervals
        )
        print(f"{label}: {spans}")
    if a.tune is not None:
        result["tune"] = {"calls": a.tune, "runs": tune_end_to_end(a.study, a.tune, a.tune_samples)}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
