"""Benchmark: what @at.autotuned costs over plain jax.jit.

1. steady state: a tiny function called through @autotuned vs jax.jit, interleaved
   rounds, median per-call time and the median of per-round ratios (target <= 1.05);
2. first call: trace + cache lookup of @autotuned (a cache hit) vs jax.jit's own first
   call (trace + compile), and the lookup alone (target <= 10 ms over jit's trace);
3. recording (AUTOTUNE_RECORD): the first call of a new signature with recording on vs off
   (target <= 20 ms more; each recorded call writes a new pending row), and the steady
   state with recording on: unchanged in shape mode (it is the same jit object), one
   Python call more in values mode (the wrapper that keeps a new signature's values).

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


def first_call(make, x) -> tuple[float, float]:
    """Seconds of the first call, and of the background write recording queued (waited for
    afterwards, outside the call, so it does not disturb the next measurement)."""
    from autotune import _record

    jax.clear_caches()
    f = make()
    t0 = time.perf_counter()
    jax.block_until_ready(f(x))
    t1 = time.perf_counter()
    _record.flush()
    return t1 - t0, time.perf_counter() - t1


def recording(cache: str, x, rounds: int, calls: int) -> dict:
    """First call and steady state with recording off, in shape mode and in values mode,
    interleaved (the order rotates each round); medians, and medians of the per-round
    differences to recording off."""
    from autotune import _record

    modes = {"off": False, "shapes": True, "values": "values"}
    names = list(modes)
    first: dict[str, list[float]] = {m: [] for m in modes}
    write: dict[str, list[float]] = {m: [] for m in modes}
    own: dict[str, list[float]] = {m: [] for m in modes}
    hook = _record.record_call

    def timed_hook(*args):  # recording's own work on the call path, timed where it runs
        t0 = time.perf_counter()
        try:
            return hook(*args)
        finally:
            own[current].append(time.perf_counter() - t0)

    _record.record_call = timed_hook
    try:
        for i in range(rounds):
            for current in names[i % 3:] + names[:i % 3]:
                t, w = first_call(lambda: at.autotuned(tiny, cache=cache, key=f"overhead:{current}{i}",
                                                       record=modes[current]), x)
                first[current].append(t)
                write[current].append(w)
    finally:
        _record.record_call = hook
    steady: dict[str, list[float]] = {m: [] for m in modes}
    fns = {m: at.autotuned(tiny, cache=cache, key=f"overhead:steady-{m}", record=r) for m, r in modes.items()}
    for _ in range(rounds):
        for m, f in fns.items():
            steady[m].append(per_call(f, x, calls))
    med = statistics.median
    return {"rounds": rounds,
            "first_call_ms": {m: med(v) * 1e3 for m, v in first.items()},
            "first_call_extra_ms": {m: med(a - b for a, b in zip(first[m], first["off"])) * 1e3
                                    for m in ("shapes", "values")},
            "background_write_ms": {m: med(write[m]) * 1e3 for m in ("shapes", "values")},
            "on_call_path_ms": {m: med(own[m]) * 1e3 for m in ("shapes", "values")},
            "steady_us": {m: med(v) * 1e6 for m, v in steady.items()},
            "steady_ratio": {m: med(a / b for a, b in zip(steady[m], steady["off"])) for m in ("shapes", "values")}}


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

    rec = recording(cache, x, max(15, a.rounds), a.calls)
    res = {
        "jax": jax.__version__, "device": str(jax.devices()[0]),
        "steady_us": {"jit": statistics.median(t_plain) * 1e6, "autotuned": statistics.median(t_tuned) * 1e6},
        "steady_ratio_median": statistics.median(ratios),
        "first_call_ms": {"jit": statistics.median(first_plain) * 1e3, "autotuned": statistics.median(first_tuned) * 1e3},
        "first_call_extra_ms": (statistics.median(first_tuned) - statistics.median(first_plain)) * 1e3,
        "lookup_ms": statistics.median(lookups) * 1e3,
        "recording": rec,
    }
    print("| measure | jax.jit | @autotuned | ratio / extra |")
    print("|---|---|---|---|")
    print(f"| steady call (µs, median of {a.rounds} interleaved rounds x {a.calls}) | {res['steady_us']['jit']:.2f} | "
          f"{res['steady_us']['autotuned']:.2f} | {res['steady_ratio_median']:.3f}x |")
    print(f"| first call incl. compile (ms) | {res['first_call_ms']['jit']:.1f} | {res['first_call_ms']['autotuned']:.1f} | "
          f"+{res['first_call_extra_ms']:.1f} ms |")
    print(f"| cache lookup (probe trace + SQLite read, ms) | - | {res['lookup_ms']:.1f} | |")
    fc, ex, st, ra = rec["first_call_ms"], rec["first_call_extra_ms"], rec["steady_us"], rec["steady_ratio"]
    print()
    print("| recording | off | shapes (AUTOTUNE_RECORD=1) | values (AUTOTUNE_RECORD=values) |")
    print("|---|---|---|---|")
    bw = rec["background_write_ms"]
    print(f"| first call of a new signature (ms, median; per-round extra) | {fc['off']:.1f} | {fc['shapes']:.1f} "
          f"({ex['shapes']:+.1f}) | {fc['values']:.1f} ({ex['values']:+.1f}) |")
    cp = rec["on_call_path_ms"]
    print(f"| recording's own work on the call path (ms, median) | - | {cp['shapes']:.2f} | {cp['values']:.2f} |")
    print(f"| waiting for the background write after the call (ms, median) | - | {bw['shapes']:.1f} | "
          f"{bw['values']:.1f} |")
    print(f"| steady call (µs, median) | {st['off']:.2f} | {st['shapes']:.2f} ({ra['shapes']:.3f}x) | "
          f"{st['values']:.2f} ({ra['values']:.3f}x) |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
