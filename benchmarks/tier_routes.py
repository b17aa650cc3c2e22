"""What a short process pays for each way tier-up could compile the winner beside the default.

Tier-up compiles the winner on a thread of the program's process (`autotune.jit._tier`). A
process that ends while that compile runs must wait for it: XLA's compile cannot be stopped,
and a thread still inside it when the interpreter finalizes aborts the process. Two parts:

- ``phases``: the winner's build split into trace, lower and compile (medians over
  ``--repeats`` fresh functions in this process). Only trace and lower run Python that a cancel
  flag could stop; the compile is what a process ending early waits for.
- ``spawn``: the floor of the other route, a builder process that could be killed at exit. Whole
  processes that import JAX, jit the study's default and make N calls, with and without a
  child process that imports JAX and compiles a trivial program beside them (no export, no
  transfer: less than a real builder costs), alternating, ``--runs`` each.

    python -m benchmarks.tier_routes --study demo_unroll --runs 5 --calls 10,1000 --json out.json

Prints two tables; ``--json`` writes ``{"jax", "device", "machine", "date", "study", "phases": {"trace_s",
"lower_s", "compile_s", "default_lower_s", "default_compile_s"}, "spawn": [{"calls", "alone_s",
"with_child_s", "ratio"}]}`` (whole-process medians in seconds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from benchmarks._studies import ROOT, study_path
from benchmarks._tables import run_facts, write_json

# One whole process: import JAX and the study, jit its first function's default, make N calls.
# With "child", a process importing JAX starts first, as a builder would at the program's start.
_PROGRAM = """
import subprocess, sys
child = None
if sys.argv[1] == "child":
    child = subprocess.Popen([sys.executable, "-c", "import jax, jax.numpy as jnp; "
                              "jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready(); "
                              "import time; time.sleep(600)"])
import jax
from autotune.record._studyfile import load_examples
ex = load_examples(sys.argv[3])[0]
ctl = getattr(ex.fn, "autotune", ex.fn)
f = jax.jit(ctl.fun, **ctl.jit_kwargs)
for _ in range(int(sys.argv[2])):
    out = f(*ex.args, **ex.kwargs)
jax.block_until_ready(out)
if child is not None:
    child.kill()
    child.wait()
"""


def phases(study: str, repeats: int) -> dict[str, float]:
    """Medians of the winner's (every site written out) trace, lower and compile, and the
    default's lower and compile, each on a fresh function (nothing cached)."""
    import jax

    import autotune as at
    from autotune.record._studyfile import load_examples

    ex = load_examples(study_path(study))[0]
    ctl = getattr(ex.fn, "autotune", ex.fn)
    config = {s.id: {"repr": "for"} for s in ex.sites()}
    rows: dict[str, list[float]] = {
        k: [] for k in ("trace_s", "lower_s", "compile_s", "default_lower_s", "default_compile_s")
    }
    for _ in range(repeats):
        jitted = jax.jit(at.with_config(ctl.fun, config), **ctl.jit_kwargs)
        t0 = time.perf_counter()
        traced = jitted.trace(*ex.args, **ex.kwargs)
        t1 = time.perf_counter()
        lowered = traced.lower()
        t2 = time.perf_counter()
        lowered.compile()
        t3 = time.perf_counter()
        rows["trace_s"].append(t1 - t0)
        rows["lower_s"].append(t2 - t1)
        rows["compile_s"].append(t3 - t2)
        default = jax.jit(lambda *a, **k: ctl.fun(*a, **k), **ctl.jit_kwargs)  # a fresh function each time
        t0 = time.perf_counter()
        lowered = default.lower(*ex.args, **ex.kwargs)
        t1 = time.perf_counter()
        lowered.compile()
        rows["default_lower_s"].append(t1 - t0)
        rows["default_compile_s"].append(time.perf_counter() - t1)
    return {k: statistics.median(v) for k, v in rows.items()}


def whole_process(mode: str, calls: int, study: str) -> float:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-c", _PROGRAM, mode, str(calls), study_path(study)], env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"tier_routes: the {mode} process failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return wall


def spawn(study: str, calls: list[int], runs: int) -> list[dict[str, Any]]:
    """Per call count, whole processes alone and with a JAX child beside them, alternating (one
    untimed pair first); medians of ``runs`` each."""
    whole_process("alone", 1, study)
    whole_process("child", 1, study)
    rows = []
    for n in calls:
        alone, child = [], []
        for i in range(runs):
            order = ("alone", "child") if i % 2 == 0 else ("child", "alone")
            for mode in order:
                (alone if mode == "alone" else child).append(whole_process(mode, n, study))
        a, c = statistics.median(alone), statistics.median(child)
        rows.append({"calls": n, "alone_s": a, "with_child_s": c, "ratio": c / a, "alone": alone, "with_child": child})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--study", default="demo_unroll", help="a study under studies/ (default demo_unroll)")
    p.add_argument("--repeats", type=int, default=5, help="fresh builds timed in the phases part (default 5)")
    p.add_argument("--runs", type=int, default=5, help="whole processes of each mode per call count (default 5)")
    p.add_argument("--calls", default="10,1000", help="call counts of the spawn part, comma-separated")
    p.add_argument("--json", help="write the results as JSON here")
    a = p.parse_args(argv)

    calls = [int(c) for c in a.calls.split(",") if c.strip()]
    ph = phases(a.study, a.repeats)
    print(f"## The winner's build ({a.study}, every site written out), median of {a.repeats}\n")
    print("| trace s | lower s | compile s | default lower s | default compile s |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    print(" | ".join(["", *(f"{ph[k]:.3f}" for k in ph)]).strip() + " |")
    rows = spawn(a.study, calls, a.runs)
    print(f"\n## Whole processes with a JAX child beside them, median of {a.runs}\n")
    print("| calls | alone s | with a child s | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['calls']:,} | {r['alone_s']:.3f} | {r['with_child_s']:.3f} | {r['ratio']:.3f} |")
    if a.json:
        write_json(a.json, {**run_facts(), "study": a.study, "phases": ph, "spawn": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
