"""Benchmark: what @at.autotuned costs over plain jax.jit.

1. steady state: a tiny function called through @autotuned vs jax.jit, interleaved
   rounds, median per-call time and the median of per-round ratios (target <= 1.05);
2. first call: trace + cache lookup of @autotuned (a cache hit) vs jax.jit's own first
   call (trace + compile), and the lookup alone (target <= 10 ms over jit's trace).

Prints a table and writes JSON (--json PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import autotune as at  # noqa: E402


def tiny(x):
    return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="tiny")[0]


def per_call(f, x, n: int) -> float:
    jax.block_until_ready(f(x))
    t0 = time.perf_counter()
    for _ in range(n):
        y = f(x)
    jax.block_until_ready(y)
    return (time.perf_counter() - t0) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    cache = os.path.join(tempfile.mkdtemp(prefix="autotune-overhead-"), "cache.db")
    x = jnp.ones(8)

    tuned = at.autotuned(tiny, cache=cache, key="overhead:tiny")
    tuned.tune(x, n_trials=4, sampler="grid", storage=os.path.join(os.path.dirname(cache), "studies.db"))
    assert tuned.config_for(x).source == "cache"
    plain = jax.jit(tiny)

    # Steady state, interleaved so drift on a shared machine hits both alike.
    t_tuned, t_plain, ratios = [], [], []
    for _ in range(a.rounds):
        p = per_call(plain, x, a.calls)
        t = per_call(tuned, x, a.calls)
        t_plain.append(p)
        t_tuned.append(t)
        ratios.append(t / p)

    # First call: fresh objects, caches cleared each time.
    first_tuned, first_plain, lookups = [], [], []
    for _ in range(7):
        jax.clear_caches()
        f = jax.jit(tiny)
        t0 = time.perf_counter()
        jax.block_until_ready(f(x))
        first_plain.append(time.perf_counter() - t0)
        jax.clear_caches()
        g = at.autotuned(tiny, cache=cache, key="overhead:tiny")
        t0 = time.perf_counter()
        jax.block_until_ready(g(x))
        first_tuned.append(time.perf_counter() - t0)
        # The lookup alone: probe the program and read the cache, as the first trace does.
        t0 = time.perf_counter()
        assert g.config_for(x).source == "cache"
        lookups.append(time.perf_counter() - t0)

    res = {
        "jax": jax.__version__, "device": str(jax.devices()[0]),
        "steady_us": {"jit": statistics.median(t_plain) * 1e6, "autotuned": statistics.median(t_tuned) * 1e6},
        "steady_ratio_median": statistics.median(ratios),
        "first_call_ms": {"jit": statistics.median(first_plain) * 1e3, "autotuned": statistics.median(first_tuned) * 1e3},
        "first_call_extra_ms": (statistics.median(first_tuned) - statistics.median(first_plain)) * 1e3,
        "lookup_ms": statistics.median(lookups) * 1e3,
    }
    print("| measure | jax.jit | @autotuned | ratio / extra |")
    print("|---|---|---|---|")
    print(f"| steady call (µs, median of {a.rounds} interleaved rounds x {a.calls}) | {res['steady_us']['jit']:.2f} | "
          f"{res['steady_us']['autotuned']:.2f} | {res['steady_ratio_median']:.3f}x |")
    print(f"| first call incl. compile (ms) | {res['first_call_ms']['jit']:.1f} | {res['first_call_ms']['autotuned']:.1f} | "
          f"+{res['first_call_extra_ms']:.1f} ms |")
    print(f"| cache lookup (probe trace + SQLite read, ms) | - | {res['lookup_ms']:.1f} | |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
