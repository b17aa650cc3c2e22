"""Levers on the compile's side of tier-up: can any keep the default's calls at their price while
the winner builds beside them?

Tier-up's thread (`autotune.jit._tier`) builds the winner in two phases: trace and lower, Python
that holds the GIL, then XLA's compile, which releases it and takes the cores. For each function
of a study, its default config's steady calls (back to back, one wait: the tuner's timing) are
timed alone and beside each phase on its own, interleaved for ``--rounds`` rounds in this one
process:

- ``lower``: a thread traces and lowers the winner (``--config``, default every site written out)
  again and again, at Python's default switch interval (5 ms) and at shorter ones set while it
  runs (``--intervals``). The main thread's calls need the GIL for each dispatch; a shorter
  interval hands it back sooner, and makes the lowering itself longer (``lower_stretch``).
- ``compile``: a thread compiles fresh lowerings of the winner (made before the block), with no
  option and with each of ``--options`` (XLA per-compile options, JSON), no Python beside.

    python -m benchmarks.beside_levers --study lambda_returns --rounds 7 --json out.json

Prints a table; ``--json`` writes ``{"jax", "device", "machine", "date", "rounds", "functions":
[{"function", "config", "alone_s", "lower": {LABEL: {"s", "lower_stretch"}}, "compile":
{LABEL: {"s"}}}]}`` (``s``: the median per-round ratio of the calls beside over alone).
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks._studies import study_path
from benchmarks._tables import run_facts, write_json
from benchmarks.beside import parser, written_out

DEFAULT_OPTIONS = '{"split 1": {"xla_cpu_parallel_codegen_split_count": 1}}'


def _beside(work: Callable[[], None], steady: Callable[[], float]) -> tuple[float, int]:
    """The calls' steady figure while a thread runs ``work`` back to back; and how many ran."""
    stop, started, done = threading.Event(), threading.Event(), [0]

    def loop() -> None:
        started.set()
        while not stop.is_set():
            work()
            done[0] += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    started.wait()
    took = steady()
    stop.set()
    thread.join()  # a daemon thread inside XLA at exit aborts the process
    return took, done[0]


def measure(
    ex: Any, config: dict[str, Any], rounds: int, target_s: float, intervals: list[float], options: dict
) -> dict:
    import jax

    import autotune as at
    from autotune.measuring._sampling import Sampling
    from autotune.measuring._timing import time_calls

    ctl = getattr(ex.fn, "autotune", ex.fn)
    args, kwargs = ex.args, ex.kwargs
    default = jax.jit(ctl.fun, **ctl.jit_kwargs)
    jax.block_until_ready(default(*args, **kwargs))

    def steady() -> float:
        return time_calls(lambda: default(*args, **kwargs), Sampling(mode="steady", target_s=target_s)).run_s

    def lower() -> Any:  # a fresh function each time: JAX keeps what it lowered and compiled
        return jax.jit(at.with_config(ctl.fun, config), **ctl.jit_kwargs).lower(*args, **kwargs)

    def lowering_at(interval: float | None) -> tuple[float, float]:
        """The calls beside lowering at ``interval`` (None: the default), and one lowering's seconds there."""
        took: list[float] = []

        def work() -> None:
            t = time.perf_counter()
            lower()
            took.append(time.perf_counter() - t)

        before = sys.getswitchinterval()
        if interval is not None:
            sys.setswitchinterval(interval)
        try:
            s, _ = _beside(work, steady)
        finally:
            sys.setswitchinterval(before)
        return s, statistics.median(took) if took else float("nan")

    def compiling_with(opts: dict | None) -> float:
        lowered = [lower() for _ in range(16)]  # before the block: only XLA's compile runs beside

        def work() -> None:
            if lowered:
                lo = lowered.pop()
                lo.compile(opts) if opts else lo.compile()

        return _beside(work, steady)[0]

    lower_labels = ["5 ms (default)"] + [f"{i * 1e3:g} ms" for i in intervals]
    lower_s = {k: [] for k in lower_labels}
    stretch = {k: [] for k in lower_labels}
    compile_s = {k: [] for k in ["none", *options]}
    alone_all: list[float] = []
    lower()  # warm: the first lowering in a process also pays one-off set-up
    for _ in range(rounds):
        t = time.perf_counter()
        lower()
        lower_alone = time.perf_counter() - t
        for label, interval in zip(lower_labels, [None, *intervals]):
            alone = steady()
            alone_all.append(alone)
            beside, one = lowering_at(interval)
            lower_s[label].append(beside / alone)
            stretch[label].append(one / lower_alone)
        for label, opts in [("none", None), *options.items()]:
            alone = steady()
            compile_s[label].append(compiling_with(opts) / alone)
    med = statistics.median
    return {
        "function": ctl.key,
        "config": config,
        "alone_s": med(alone_all),
        "lower": {k: {"s": med(lower_s[k]), "lower_stretch": med(stretch[k])} for k in lower_labels},
        "compile": {k: {"s": med(v)} for k, v in compile_s.items()},
    }


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--intervals", default="0.0005,0.0001", help="switch intervals to try, seconds (comma-separated)")
    p.add_argument("--options", default=DEFAULT_OPTIONS, help="XLA compile options to try: JSON {label: options}")
    a = p.parse_args(argv)

    from autotune.record._studyfile import load_examples

    intervals = [float(x) for x in a.intervals.split(",") if x.strip()]
    options = json.loads(a.options) if a.options else {}
    rows = []
    for ex in load_examples(study_path(a.study)):
        config = json.loads(a.config) if a.config else written_out(ex.sites())
        rows.append(measure(ex, config, a.rounds, a.target_s, intervals, options))
    print("| function | µs a call alone | beside | s | lowering stretched |")
    print("| --- | ---: | --- | ---: | ---: |")
    for r in rows:
        first = f"{r['function']} | {r['alone_s'] * 1e6:.1f}"
        for label, v in r["lower"].items():
            print(f"| {first} | lowering, switch interval {label} | {v['s']:.2f} | {v['lower_stretch']:.2f} |")
            first = " | "
        for label, v in r["compile"].items():
            print(f"| {first} | compiling, options: {label} | {v['s']:.2f} | |")
    if a.json:
        write_json(a.json, {**run_facts(), "rounds": a.rounds, "functions": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
