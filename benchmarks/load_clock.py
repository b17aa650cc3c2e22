"""Which clock load moves: compile and run seconds with and without a CPU burner on one core.

    python -m benchmarks.load_clock                  # 6 samples per condition, four programs
    python -m benchmarks.load_clock --samples 10 --json out.json

For each program (the default config and one from the middle of its space) the two conditions
alternate (none, burner, burner, none, ...; the burner, benchmarks/_burner.py, keeps one core busy:
started before and killed after each sample). Compile: trace + lower + compile (caches cleared) in
wall seconds and in the process's CPU seconds. Run: 300 calls, the median and the 10th
percentile of the per-call wall seconds and the median per-call CPU seconds. Prints medians, the
burner/none ratio and the largest/smallest sample within each condition; README "Measuring
honestly" quotes a run of it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path

from benchmarks._burner import burner

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = ["tests/fixtures/gru_train.py", "studies/gru_encoder.py", "studies/kalman.py", "studies/scan_layers.py"]


def load(path: str):
    spec = importlib.util.spec_from_file_location(Path(path).stem, REPO / path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ex = mod.examples()[0]
    ctl = getattr(ex[0], "autotune", ex[0])
    return ctl.fun, tuple(ex[1])


def sample(fn, args, config) -> dict[str, float]:
    import jax

    from autotune.program import _compat
    from autotune.program._rewrite import with_config

    jitted = jax.jit(with_config(fn, config))
    with _compat.no_persistent_cache():
        _compat.clear_jax_caches()
        w0, c0 = time.perf_counter(), time.process_time()
        compiled = jitted.trace(*args).lower().compile()
        out = {"compile_wall": time.perf_counter() - w0, "compile_cpu": time.process_time() - c0}
    jax.block_until_ready(compiled(*args))
    walls, cpus = [], []
    for _ in range(300):
        w0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(compiled(*args))
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    out.update(
        run_median=statistics.median(walls),
        run_p10=statistics.quantiles(walls, n=10)[0],
        run_cpu=statistics.median(cpus),
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=6)
    ap.add_argument("--json")
    ap.add_argument("--program", action="append", help=f"a program file (repeatable; default: {PROGRAMS})")
    a = ap.parse_args()
    from autotune.program._space import Space

    results = {}
    for path in a.program or PROGRAMS:
        fn, args = load(path)
        import autotune as at

        configs = list(Space(at.sites(fn, *args)).configs())
        for config in (configs[0], configs[len(configs) // 2]):
            sample(fn, args, config)  # imports and first-use costs out of the way
            got: dict[str, list[dict]] = {"none": [], "burner": []}
            for i in range(a.samples):
                for cond in ("none", "burner") if i % 2 == 0 else ("burner", "none"):
                    with burner(cond == "burner") as proc:
                        if proc is not None:
                            time.sleep(0.3)  # the burner's interpreter started and spinning
                        got[cond].append(sample(fn, args, config))
            key = f"{Path(path).stem} {config.label(at.sites(fn, *args)) or 'default'}"
            row = {}
            for k in got["none"][0]:
                med = {c: statistics.median(s[k] for s in got[c]) for c in got}
                spread = {c: max(s[k] for s in got[c]) / min(s[k] for s in got[c]) for c in got}
                row[k] = {
                    "none": med["none"],
                    "burner": med["burner"],
                    "ratio": med["burner"] / med["none"],
                    "spread_none": spread["none"],
                    "spread_burner": spread["burner"],
                }
                print(
                    f"{key[:60]:60s} {k:13s} none {med['none']:.4g}  burner {med['burner']:.4g}  "
                    f"x{med['burner'] / med['none']:.2f}  spread {spread['none']:.2f}/{spread['burner']:.2f}",
                    flush=True,
                )
            results[key] = row
    print(json.dumps(results))
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
