"""The demo's last step: a fresh process times plain ``jax.jit`` against the tuned config.

Run by ``scripts/demo.py`` after the tune, with ``AUTOTUNE_CACHE`` pointing at its cache::

    AUTOTUNE_CACHE=/tmp/autotune-demo-xyz/cache.db python scripts/demo_fresh.py

Both functions are the study's ``sample``: once under ``jax.jit`` as written (the
``lax.scan``), once as the ``@at.autotuned`` function, which reads the config the
tune stored. Each gets its first call (trace, compile and run: what a new process
pays) and its steady state (the median of many calls), printed side by side.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import jax

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "studies"))
import demo_unroll as study  # noqa: E402

CALL_SECONDS = 1.0  # of calls timed for the steady state, per function


def first_call(fn, *args) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - t0


def steady(fn, *args) -> float:
    """The median seconds per call, over about CALL_SECONDS of calls, each one synchronised."""
    samples: list[float] = []
    deadline = time.perf_counter() + CALL_SECONDS
    while time.perf_counter() < deadline or len(samples) < 100:
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def seconds(s: float) -> str:
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def main() -> int:
    (x,) = study.init()
    lookup = study.sample.config_for(x)
    print(f"the tuned function gets: {lookup}")
    plain = jax.jit(study.sample.autotune.fun)
    rows = {"plain jax.jit": [first_call(plain, x)], f"tuned ({lookup.config})": [first_call(study.sample, x)]}
    for fn, row in zip((plain, study.sample), rows.values()):
        row.append(steady(fn, x))
    width = max(map(len, rows))
    print(f"{'':{width}}  {'first call':>10}  {'per call':>10}")
    for name, (first, call) in rows.items():
        print(f"{name:{width}}  {seconds(first):>10}  {seconds(call):>10}")
    (jit_first, jit_call), (tuned_first, tuned_call) = rows.values()
    extra, saved = tuned_first - jit_first, jit_call - tuned_call
    ahead = f", ahead after {max(0.0, extra) / saved:,.0f} calls" if saved > 0 else ""
    print(
        f"tuned / plain jax.jit: first call {tuned_first / jit_first:.2f}× the time, "
        f"each later call {jit_call / tuned_call:.2f}× faster{ahead}"
    )
    if lookup.source != "cache":
        print(f"demo: the fresh process did not find the tuned config (source {lookup.source!r})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
