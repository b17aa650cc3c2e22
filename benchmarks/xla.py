"""Measure what XLA's compile options trade, per program: compile CPU seconds against run time.

For each program (a fully unrolled probe body, or a study's function at its default config)
and each option set (none, ``xla_backend_optimization_level`` 0-3,
``xla_llvm_disable_expensive_passes``, combinations), compile it fresh (JAX's caches
cleared, the persistent cache off) ``--samples`` times, interleaved over the option sets so
that load from other processes spreads evenly, and time its calls (10th percentile). Medians
over the samples. From those: the cost ``C + N·run`` at 10, 100, 1000 calls, the best option
set at each N and what it wins against no options. This is plain JAX (``jax.jit(f,
compiler_options=...)``); it decides the default of ``TuneOptions.xla``.

    python -m benchmarks.xla                                  # the probes and the default studies
    python -m benchmarks.xla --program unrolled48 --samples 7 --json out.json
    python -m benchmarks.xla --program study:hmc --program study:demo_unroll@for

Outputs a markdown table on stdout (``--out`` also writes it) and, with ``--json``, a file
``{"jax", "samples", "programs": [{"program", "expected_calls", "options": {label: {"trace_lower_cpu_s",
"compile_cpu_s", "run_p10_s", "compile_samples", "run_samples"}}, "costs": {N: {label: cost}}}]}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from autotune.measuring import _stages as _measure  # noqa: E402
from autotune.measuring._sampling import Sampling  # noqa: E402
from autotune.program._config import Config, SiteChoice  # noqa: E402
from autotune.program._jitargs import dynamic_args  # noqa: E402

OPT = "xla_backend_optimization_level"
NOLLVM = "xla_llvm_disable_expensive_passes"
# label -> compiler_options; "none" is XLA's own default.
OPTION_SETS: dict[str, dict[str, Any]] = {
    "none": {},
    "O0": {OPT: 0},
    "O1": {OPT: 1},
    "O2": {OPT: 2},
    "O3": {OPT: 3},
    "nollvm": {NOLLVM: True},
    "O0+nollvm": {OPT: 0, NOLLVM: True},
    "O1+nollvm": {OPT: 1, NOLLVM: True},
}
CALLS = (10, 100, 1000)
DEFAULT_PROGRAMS = [
    "unrolled24",
    "unrolled48",
    "study:lambda_returns",
    "study:seed_rollout",
    "study:demo_unroll",
    "study:gru_encoder",
    "study:ode_rk4",
    "study:kalman",
    "study:hmc",
    "study:scan_layers",
    "study:rl_cartpole",
]


def unrolled(steps: int, dim: int = 64):
    """``steps`` copies of a 6-op body (matmul, add, tanh, mul, sin, add) on a dim×dim state,
    unrolled by Python: a program whose compile dominates its cost at few calls."""

    def f(x, w):
        for i in range(steps):
            y = jnp.tanh(x @ w + 0.01 * i)
            x = x + 0.1 * y * jnp.sin(x)
        return x

    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (dim, dim))
    w = jax.random.normal(jax.random.fold_in(key, 1), (dim, dim)) / dim**0.5
    return f, (x, w), {}, {}, Config(), 10


def study(spec: str):
    """``study:NAME`` (its first example at the default config) or ``study:NAME@for`` (every
    site fully unrolled)."""
    from autotune.record._studyfile import load_examples

    name, _, variant = spec.partition("@")
    example = load_examples(os.path.join(ROOT, "studies", f"{name}.py"))[0]
    fn = example.fn
    config = Config()
    if variant == "for":
        sites = fn.sites(*example.args, **example.kwargs)
        config = Config({s.id: SiteChoice("for") for s in sites if s.length is not None})
    return fn.fun, example.args, example.kwargs, dict(fn.jit_kwargs), config, fn.expected_calls


def program(spec: str):
    if spec.startswith("unrolled"):
        return unrolled(int(spec[len("unrolled") :] or 48))
    if spec.startswith("study:"):
        return study(spec[len("study:") :])
    raise SystemExit(f"xla_bench: unknown program {spec!r}; use unrolledN or study:NAME[@for]")


def sample(fun, args, kwargs, jit_kwargs, config, options, target_s: float) -> tuple[float, float, float]:
    """(trace+lower CPU s, compile CPU s, run p10 s) of one fresh compile."""
    merged = dict(jit_kwargs)
    merged["compiler_options"] = {**options, **dict(jit_kwargs.get("compiler_options") or {})}
    stages = _measure.compile_config(fun, args, kwargs, config, jit_kwargs=merged)
    dyn_args, dyn_kwargs = dynamic_args(fun, tuple(args), dict(kwargs), merged)
    timing = _measure.time_compiled(stages.compiled, dyn_args, dyn_kwargs, Sampling(target_s=target_s, min_reps=5))
    return stages.trace_cpu_s + stages.lower_cpu_s, stages.compile_cpu_s, timing[3]


def measure_program(spec: str, labels: list[str], samples: int, target_s: float) -> dict[str, Any]:
    fun, args, kwargs, jit_kwargs, config, expected = program(spec)
    raw: dict[str, list[tuple[float, float, float]]] = {label: [] for label in labels}
    for _ in range(samples):  # interleaved: every option set once per round
        for label in labels:
            raw[label].append(sample(fun, args, kwargs, jit_kwargs, config, OPTION_SETS[label], target_s))
    options = {}
    for label, rows in raw.items():
        options[label] = {
            "trace_lower_cpu_s": statistics.median(r[0] for r in rows),
            "compile_cpu_s": statistics.median(r[1] for r in rows),
            "run_p10_s": statistics.median(r[2] for r in rows),
            "compile_samples": [r[1] for r in rows],
            "run_samples": [r[2] for r in rows],
        }
    costs = {
        n: {label: o["trace_lower_cpu_s"] + o["compile_cpu_s"] + n * o["run_p10_s"] for label, o in options.items()}
        for n in (*CALLS, expected)
    }
    return {"program": spec, "expected_calls": expected, "options": options, "costs": costs}


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| program | option | trace+lower CPU s | compile CPU s | run p10 ms | "
        + " | ".join(f"cost@{n} (×none)" for n in CALLS)
        + " |",
        "|---|---|---:|---:|---:|" + "---:|" * len(CALLS),
    ]
    for res in results:
        for label, o in res["options"].items():
            cells = []
            for n in CALLS:
                cost, base = res["costs"][n][label], res["costs"][n]["none"]
                cells.append(f"{cost:.3f} ({base / cost:.2f})")
            lines.append(
                f"| {res['program']} | {label} | {o['trace_lower_cpu_s']:.3f} | {o['compile_cpu_s']:.3f} | "
                f"{o['run_p10_s'] * 1e3:.3f} | " + " | ".join(cells) + " |"
            )
    lines += ["", "| program | compile share of default cost @10 / @100 / @1000 | best @10 | @100 | @1000 |"]
    lines.append("|---|---|---|---|---|")
    for res in results:
        none = res["options"]["none"]
        one_off = none["trace_lower_cpu_s"] + none["compile_cpu_s"]
        shares = " / ".join(f"{100 * one_off / res['costs'][n]['none']:.0f}%" for n in CALLS)
        bests = []
        for n in CALLS:
            best = min(res["costs"][n], key=res["costs"][n].get)
            bests.append(f"{best} ×{res['costs'][n]['none'] / res['costs'][n][best]:.2f}")
        lines.append(f"| {res['program']} | {shares} | " + " | ".join(bests) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--program", action="append", default=None, help="unrolledN or study:NAME[@for] (repeatable)")
    p.add_argument("--option", action="append", default=None, choices=list(OPTION_SETS), help="option sets")
    p.add_argument("--samples", type=int, default=5, help="fresh compiles per option set (median)")
    p.add_argument("--target-s", type=float, default=0.2, help="seconds of timed calls per sample")
    p.add_argument("--json", default=None, metavar="PATH")
    p.add_argument("--out", default=None, metavar="PATH.md")
    a = p.parse_args(argv)
    labels = a.option or list(OPTION_SETS)
    if "none" not in labels:
        labels = ["none", *labels]
    results = []
    for spec in a.program or DEFAULT_PROGRAMS:
        results.append(measure_program(spec, labels, a.samples, a.target_s))
        print(table(results[-1:]), flush=True)
        if a.json:  # written after each program, so a long run leaves what it measured
            with open(a.json, "w") as f:
                json.dump({"jax": jax.__version__, "samples": a.samples, "programs": results}, f, indent=1)
    text = table(results)
    print("\n" + text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
