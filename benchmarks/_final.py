"""The bench's final judgement: every approach's chosen config re-measured in fresh processes.

A program's run time differs between two processes (where its code and buffers land) by more
than it varies within one (measured: docs/results/design-figures.md#run-time-between-fresh-processes).
A judge that measures every config in the bench's own process sees one draw of that placement
and can misjudge a tuned config on it alone. So the final re-measure runs in ``processes`` fresh
Python processes, started one after another; each measures every unique chosen config for
``rounds`` interleaved rounds (the order rotated per round across the processes and reversed
every other cycle, :func:`order_for`, so no config always runs first or after the same
neighbour) with the
measurement the objective charges (:func:`autotune.measure`: ``compile_cost_s``, the CPU
seconds of trace + lower + compile; ``run_cost_s``, the 10th percentile of the timed calls),
after one uncounted warm-up measurement that takes the process's one-off costs.

From the samples (:func:`aggregate`): a config's final cost comes from the medians of its
compile and run seconds over every sample of every process; each process also gets its own
cost per config (from its own medians), and the ratio between two approaches
(:func:`ratio`) is the median of the per-process ratios, so one process's placement cannot
decide it alone and the spread between processes stays visible.

The protocol is two JSON files (no pickle): the parent writes a spec, the child its samples.

    python -m benchmarks._final SPEC.json OUT.json     # one child; benchmarks.bench starts it
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from benchmarks._studies import ROOT, controller, measure_point


def config_key(config: dict[str, Any]) -> str:
    """A config's identity among the chosen ones: its canonical JSON, ``Config.to_json()`` (the
    package's one spelling; a dict with its keys in another order is the same config)."""
    from autotune import Config

    return Config.from_dict(config).to_json()


def order_for(n: int, process: int, round_: int, rounds: int) -> list[int]:
    """The measuring order of ``n`` configs in one round of one process. The rounds of all
    processes are counted as one sequence; it rotates the order by one step per round (over
    ``n`` rounds each config takes every position once) and runs every other cycle of ``n``
    rounds reversed (each config gets its other neighbours): A B, B A, B A, A B for two."""
    if not n:
        return []
    g = process * rounds + round_
    order = list(range(g % n, n)) + list(range(g % n))
    return order[::-1] if (g // n) % 2 else order


# ---------------------------------------------------------------------------------------
# the parent


def final_measure(
    study_path: str,
    index: int,
    configs: list[dict[str, Any]],
    *,
    processes: int,
    rounds: int,
    timing: dict[str, Any],
    log: Callable[[str], None] = lambda _msg: None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Measure ``configs`` (unique) of ``examples()[index]`` of ``study_path`` in ``processes``
    fresh processes, one after another, ``rounds`` interleaved rounds each.

    Returns ``{"parent_pid", "processes": [{"process", "pid", "wall_s", "error"?}],
    "samples": [{"key", "process", "pid", "round", "position", "compile_cost_s", "run_cost_s", ...}],
    "errors": {key: message}}``. A process that dies is recorded with its exit status and the
    others still count; a config that fails in a process is an error of that config. A process
    past ``timeout_s`` seconds is killed and recorded as failed (a fixed approach's config that
    no grid trial measured may compile for minutes on an accelerator).
    """
    if processes < 1:
        raise ValueError(f"final_measure: processes={processes}; measure in at least 1 fresh process.")
    out: dict[str, Any] = {"parent_pid": os.getpid(), "processes": [], "samples": [], "errors": {}}
    with tempfile.TemporaryDirectory(prefix="bench-final-") as tmp:
        for p in range(processes):
            spec_path, result_path = os.path.join(tmp, f"spec{p}.json"), os.path.join(tmp, f"out{p}.json")
            spec = {
                "study_path": os.path.abspath(study_path),
                "index": index,
                "configs": configs,
                "process": p,
                "rounds": rounds,
                "timing": timing,
            }
            with open(spec_path, "w") as fh:
                json.dump(spec, fh)
            t0 = time.perf_counter()
            try:
                proc = subprocess.run(
                    [sys.executable, "-m", "benchmarks._final", spec_path, result_path],
                    cwd=ROOT,
                    stdout=subprocess.DEVNULL,
                    timeout=timeout_s,
                )
                failure = None if proc.returncode == 0 else f"exited {proc.returncode}"
            except subprocess.TimeoutExpired:
                failure = f"ran past {timeout_s:g} s and was killed"
            entry: dict[str, Any] = {"process": p, "wall_s": time.perf_counter() - t0}
            if failure is not None or not os.path.isfile(result_path):
                failure = failure or "wrote no result"
                entry.update(pid=None, error=f"the final-measure process {failure}")
                log(f"   final process {p + 1}/{processes}: FAILED ({failure})")
                out["processes"].append(entry)
                continue
            with open(result_path) as fh:
                child = json.load(fh)
            entry["pid"] = child["pid"]
            out["processes"].append(entry)
            out["samples"].extend(child["samples"])
            for key, why in child["errors"].items():
                out["errors"].setdefault(key, why)
            log(f"   final process {p + 1}/{processes} (pid {child['pid']}): {entry['wall_s']:.0f}s")
    return out


def aggregate(measured: dict[str, Any], objective, processes: int) -> dict[str, dict[str, Any]]:
    """Per config key: ``compile_cost_s``, ``run_cost_s`` (medians over every sample of every process),
    ``cost`` (the objective's cost of those), ``rounds`` (the samples), and
    ``cost_per_process`` (each process's cost from its own medians; None where it has none)."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for s in measured["samples"]:
        by_key.setdefault(s["key"], []).append(s)
    final = {}
    for key, samples in by_key.items():
        per_process = []
        for p in range(processes):
            own = [s for s in samples if s["process"] == p]
            per_process.append(_cost(own, objective) if own else None)
        compile_s, run_s = _medians(samples)
        final[key] = {
            "compile_cost_s": compile_s,
            "run_cost_s": run_s,
            "cost": objective.cost_of(compile_s, run_s),
            "rounds": len(samples),
            "cost_per_process": per_process,
        }
    return final


def _medians(samples: list[dict[str, Any]]) -> tuple[float, float]:
    """The median charged compile and run seconds of ``samples``."""
    return statistics.median(s["compile_cost_s"] for s in samples), statistics.median(s["run_cost_s"] for s in samples)


def _cost(samples: list[dict[str, Any]], objective) -> float:
    """The objective's cost of ``samples``' median compile and run seconds."""
    return objective.cost_of(*_medians(samples))


def ratio(x: dict[str, Any] | None, y: dict[str, Any] | None) -> tuple[float | None, list[float | None]]:
    """Cost of ``x`` over cost of ``y`` (two :func:`aggregate` rows): the median of the
    per-process ratios, and those ratios (None where a process lacks either)."""
    if x is None or y is None:
        return None, []
    each = [cx / cy if cx is not None and cy else None for cx, cy in zip(x["cost_per_process"], y["cost_per_process"])]
    known = [r for r in each if r is not None]
    return (statistics.median(known) if known else None), each


# ---------------------------------------------------------------------------------------
# the child


def child(spec_path: str, out_path: str) -> None:
    """Load the study's example, warm up once, then measure every config ``rounds`` times in
    the order :func:`order_for` gives this process; write the samples as JSON."""
    with open(spec_path) as fh:
        spec = json.load(fh)
    from autotune.record._studyfile import load_examples

    ex = load_examples(spec["study_path"])[spec["index"]]
    ctl = controller(ex.fn)
    configs, p, rounds, timing = spec["configs"], spec["process"], spec["rounds"], spec["timing"]
    pid = os.getpid()
    samples, errors = [], {}
    if configs:  # the first measurement of a process pays its imports and first traces
        try:
            measure_point(ctl, ex, configs[order_for(len(configs), p, 0, rounds)[0]], timing)
        except Exception:  # the config's own error is recorded when it is measured
            pass
    for r in range(rounds):
        for position, i in enumerate(order_for(len(configs), p, r, rounds)):
            key = config_key(configs[i])
            try:
                m = measure_point(ctl, ex, configs[i], timing)
            except Exception as exc:  # a config that fails is a result
                errors[key] = f"{type(exc).__name__}: {exc}"[:500]
                continue
            samples.append(
                {
                    "key": key,
                    "process": p,
                    "pid": pid,
                    "round": r,
                    "position": position,
                    "compile_cost_s": m.compile_cost_s,  # what the objective charges: CPU s of trace+lower+compile
                    "run_cost_s": m.run_cost_s,  # ... and the 10th percentile of the timed calls
                    "compile_total_s": m.compile_total_s,
                    "run_s": m.run_s,
                }
            )
    with open(out_path + ".tmp", "w") as fh:
        json.dump({"pid": pid, "samples": samples, "errors": errors}, fh)
    os.replace(out_path + ".tmp", out_path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m benchmarks._final SPEC.json OUT.json (benchmarks.bench starts it)")
    child(sys.argv[1], sys.argv[2])
