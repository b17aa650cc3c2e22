"""Is there a tier-up workload on this device? The sampler of ``studies/tier_sampler.py`` by size.

Tier-up pays where the winner's calls are not much cheaper than the default's and its compile is
long (`autotune.select._tiered.pays`: the calls the default serves while the winner compiles
must be worth more, at the winner's price, than the default's compile). This probe jits the
study's own sampler (its ``make_step`` and ``init``: a constant-foldable schedule plus a matmul
per step) at a few sizes as
``scan×1`` (the default), ``scan×8`` and ``for``, compiles each once (wall seconds of lower and
compile) and times 100 calls back to back (one wait, median of 5 rounds), then compares, at
10,000, 100,000 and 1,000,000 calls, ``for`` served by the tiered default with ``s = 1`` (a
device with spare host cores) against the cheapest config compiled up front.

    python -m benchmarks.tpu_tier_probe --json out.json     # on the device
    python -m benchmarks.tpu_tier_probe --small             # CPU-sized, for a test
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from fractions import Fraction

from benchmarks._studies import study_path
from benchmarks._tables import run_facts, write_json

# (steps, state width, hidden, batch)
SHAPES = [(48, 1024, 64, 16), (48, 65536, 256, 64), (128, 65536, 512, 128), (48, 1 << 18, 1024, 256)]
SMALL_SHAPES = [(8, 256, 16, 4)]
CONFIGS = [("scan×1", {}), ("scan×8", {"steps": {"repr": "scan", "unroll": 8}}), ("for", {"steps": {"repr": "for"}})]


def probe(shape: tuple[int, int, int, int], calls: int) -> list[dict]:
    import jax

    import autotune as at
    from autotune.record._studyfile import load_module

    study = load_module(study_path("tier_sampler"))  # its sampler, at this probe's sizes
    steps, dim, hidden, batch = shape
    step, times = study.make_step(steps, dim, hidden)

    def f(x, h, w):
        return at.loop(step, (x, h, w), times, name="steps")[0][:2]

    args = study.init(0, dim, hidden, batch)
    rows = []
    for name, config in CONFIGS:
        jitted = jax.jit(at.with_config(f, config))
        t0 = time.perf_counter()
        compiled = jitted.lower(*args).compile()
        compile_s = time.perf_counter() - t0
        jax.block_until_ready(compiled(*args))
        rounds = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                out = compiled(*args)
            jax.block_until_ready(out)
            rounds.append((time.perf_counter() - t0) / calls)
        rows.append({"shape": list(shape), "config": name, "compile_s": compile_s, "run_s": statistics.median(rounds)})
    return rows


def verdict(rows: list[dict], calls: tuple[int, ...] = (10_000, 100_000, 1_000_000)) -> dict:
    """Per call count, ``for`` served by the tiered default (s = 1: a device with spare host cores)
    against the cheapest config compiled up front; ``pays``: whether tiering ``for`` beats compiling
    it up front at the first count (`autotune.select._tiered.pays`)."""
    from autotune.select._objective import Objective
    from autotune.select._tiered import TierCase, pays, tiered_at

    by = {r["config"]: r for r in rows}
    d, w = by["scan×1"], by["for"]
    dw = ((d["compile_s"], d["run_s"]), (w["compile_s"], w["run_s"]))
    at_calls = []
    for n in calls:
        tiered, _ = tiered_at(TierCase(Objective(expected_calls=n), *dw, slowdown=1.0), Fraction(n))
        best = min(rows, key=lambda r: r["compile_s"] + n * r["run_s"])
        cost = best["compile_s"] + n * best["run_s"]
        at_calls.append(
            {"calls": n, "tiered_for_s": float(tiered), "best_up_front": best["config"], "best_up_front_s": cost}
        )
    return {
        "shape": d["shape"],
        "for_speedup": d["run_s"] / w["run_s"] if w["run_s"] > 0 else None,
        "compile_ratio": w["compile_s"] / d["compile_s"] if d["compile_s"] > 0 else None,
        "pays": pays(TierCase(Objective(expected_calls=calls[0]), *dw, slowdown=1.0), Fraction(calls[0])),
        "at_calls": at_calls,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small", action="store_true", help="one CPU-sized shape (tests)")
    p.add_argument("--calls", type=int, default=100, help="calls per timing round (default 100)")
    p.add_argument("--json", help="write the rows and verdicts here")
    a = p.parse_args(argv)

    rows, verdicts = [], []
    for shape in SMALL_SHAPES if a.small else SHAPES:
        got = probe(shape, a.calls)
        rows += got
        v = verdict(got)
        verdicts.append(v)
        for r in got:
            print(
                f"{shape} {r['config']:7s} compile {r['compile_s']:7.3f} s  run {r['run_s'] * 1e6:9.1f} µs", flush=True
            )
        print(f"{shape} for: {v['for_speedup']:.2f}x faster, compiles {v['compile_ratio']:.1f}x longer", flush=True)
        for x in v["at_calls"]:
            wins = x["tiered_for_s"] < x["best_up_front_s"]
            print(
                f"  {x['calls']:>9,} calls: tier-up of for {x['tiered_for_s']:9.3f} s; the best up front "
                f"{x['best_up_front']} {x['best_up_front_s']:9.3f} s; tiering pays: {wins}",
                flush=True,
            )
    if a.json:
        write_json(a.json, {**run_facts(), "rows": rows, "verdicts": verdicts})
    return 0


if __name__ == "__main__":
    sys.exit(main())
