"""One study of ``benchmarks.bench``: the grid, the tuner and random search, the fixed
baselines, then every approach's config re-measured in fresh processes (``benchmarks._final``).

:func:`run_study` returns one row per function of the study (the JSON's ``studies`` entries).
Figures carry autotune's names (``docs/architecture.md``): ``compile_cost_s`` and
``run_cost_s`` are what the objective charges, ``compile_total_s`` the trace + lower + compile
wall, ``compile_s`` XLA's compile alone, ``run_s`` the median call.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import random
import tempfile
import time
from typing import Any

from benchmarks._final import aggregate, config_key, final_measure
from benchmarks._rows import approach_rows, final_record, ratios, site_rows
from benchmarks._studies import (
    CROSSOVER_CALLS,
    LOOP_ONLY,
    PRODUCT,
    controller,
    label,
    log,
    study_path,
)
from benchmarks._xla_grid import stages, xla_rule


def run_study(name: str, a: argparse.Namespace) -> list[dict[str, Any]]:
    from autotune import Objective
    from autotune.program._space import Space
    from autotune.record._studyfile import load_examples

    rows = []
    examples = load_examples(study_path(name))
    for ex in examples:
        ctl = controller(ex.fn)
        study = name if len(examples) == 1 else f"{name}:{ctl.__name__}"
        objective = Objective(ctl.expected_calls, ctl.compile_weight, ctl.runtime_weight)
        a.max_memory_bytes = budget_bytes(a)
        sites = ctl.sites(*ex.args, **ex.kwargs)
        timing = {"target_s": a.target_s, **({"mode": a.timing} if a.timing else {})}
        runner = grid_runner(ctl, ex, timing, a)
        loops = Space(sites)
        log(a, f"== {study}: {len(loops.sites)} sites, {len(loops)} loop configs, calls={objective.expected_calls:g}")
        configs, sampled = grid_configs(loops, a.grid_max, a.seed)
        decided: dict[str, Any] = {"xla": (), "rule": None}
        grid = run_grid(
            study, runner, configs, objective, loops.sites, a, more=xla_grid(a, runner, objective, sites, decided)
        )
        xla = decided["xla"]
        space = Space(sites, xla=xla) if xla else loops
        configs, sampled = [p["config"] for p in grid["points"]], sampled or decided.get("sampled", False)
        n_trials = max(a.min_trials, math.ceil(a.budget_frac * len(configs)))
        searches = run_searches(name, ctl, ex, objective, timing, bool(xla), n_trials, a, space.sites)
        chosen = {approach: s["config"] for approach, s in searches.items()}
        chosen["grid"] = grid["best"]["config"]
        chosen.update({k: v.to_dict() for k, v in baseline_configs(space).items()})
        final = run_final(name, ex.index, objective, chosen, grid["points"], timing, a)
        approaches = approach_rows(chosen, final, grid, searches, space.sites, bool(xla))
        row = {
            "study": study,
            "function": ctl.key,
            "expected_calls": objective.expected_calls,
            "compile_weight": objective.compile_weight,
            "runtime_weight": objective.runtime_weight,
            "max_memory": a.max_memory_bytes,
            "space_size": len(space),
            "grid_size": len(configs),
            "sampled": sampled,
            "n_trials": n_trials,
            "sites": site_rows(space.sites),
            "approaches": approaches,
            **ratios(chosen, final["aggregate"], bool(xla)),
            "final": final_record(final, space.sites, a),
            "xla_choices": [str(c) for c in xla],
            "xla_rule": decided["rule"],
            "loop_space_size": len(loops),
            "wall_tuned_over_grid": approaches["tuned"]["tuning_wall_s"] / grid["wall"] if grid["wall"] else None,
            "grid_points": grid["points"],
            "grid_wall_report": grid["wall_report"],
            "crossover": crossover(grid["points"], objective),
        }
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------
# the grid


def grid_configs(space, grid_max: int, seed: int) -> tuple[list, bool]:
    """Every config, or a fixed random sample of ``grid_max`` that always holds the default."""
    configs = list(space.configs())  # the default first
    if len(configs) <= grid_max:
        return configs, False
    rng = random.Random(seed)
    return [configs[0]] + rng.sample(configs[1:], grid_max - 1), True


def grid_runner(ctl, ex, timing: dict, a: argparse.Namespace):
    """The grid's runner: a worker process, as the tuner's (this process only traces and lowers;
    on a TPU the worker owns the chip), closed before the tuner starts its own."""
    from autotune.measuring.process._worker_runner import WorkerRunner
    from autotune.program._call import Call

    call = Call(ctl.fun, ex.args, ex.kwargs, ctl.jit_kwargs)
    return WorkerRunner(call, timing, trial_timeout=a.trial_timeout)


def point(m, objective) -> dict[str, Any]:
    """One grid measurement's figures under autotune's names, and its cost."""
    return {
        "compile_cost_s": m.compile_cost_s,  # what the objective charges: CPU seconds (load stretches wall time)
        "compile_total_s": m.compile_total_s,
        "trace_s": m.trace_s,
        "lower_s": m.lower_s,
        "compile_s": m.compile_s,
        "run_cost_s": m.run_cost_s,  # ... and the 10th percentile of the calls (load stretches the median)
        "run_s": m.run_s,
        "run_iqr_s": m.run_iqr_s,
        "memory_bytes": m.memory_bytes,
        "cost": objective.cost(m),
    }


def budget_bytes(a: argparse.Namespace) -> int | None:
    """``--max-memory`` in bytes on the device the trials run on (a fraction of its memory resolved there)."""
    from autotune.measuring import _host
    from autotune.select._budget import resolve

    limit = None if a.max_memory is None or isinstance(a.max_memory, int) else _host.target_device().get("bytes_limit")
    return resolve(a.max_memory, limit, "--max-memory")


def run_grid(study, runner, configs, objective, sites, a: argparse.Namespace, more=None) -> dict[str, Any]:
    """Measure every grid config with ``runner`` (not started yet; then closed), then the configs
    ``more`` adds on those points (the XLA variants, where the grid spans them): ``{"points", "best",
    "wall", "wall_report"}`` (where its seconds went, :class:`autotune.measuring._wall.WallReport`'s
    JSON). Its wall counts its worker's start, every measurement, the first one's included, and its
    worker's end (on a TPU the runtime takes seconds to let the chip go): what trying everything
    costs a user, as the tuner's wall counts its own, ``runner.close()`` included."""
    from autotune.measuring._wall import Wall

    points: list[dict[str, Any]] = []
    t0 = time.perf_counter()  # from its worker's start: trying everything pays that once, as the tuner does
    with Wall("grid") as accounted:  # where the grid's seconds go, as the tuner's are accounted
        try:
            reference = _grid_loop(runner, configs, objective, sites, points, a)
            if more is not None:
                _grid_loop(runner, more(points), objective, sites, points, a, reference)
        finally:
            runner.close()  # the device goes to the tuner's worker next
    wall = time.perf_counter() - t0
    ok = [p for p in points if p.get("state") == "complete"]
    if not ok:
        raise RuntimeError(f"{study}: no grid config compiled and ran")
    from autotune.select._budget import within

    # Under a budget the grid's best is the best config that fits it (where none does, the best of all).
    fit = [p for p in ok if within(p.get("memory_bytes"), getattr(a, "max_memory_bytes", None))] or ok
    best = min(fit, key=lambda p: p["cost"])
    return {"points": points, "best": best, "wall": wall, "wall_report": accounted.report().to_json()}


def xla_grid(a: argparse.Namespace, runner, objective, sites, decided: dict[str, Any]):
    """``more`` for :func:`run_grid`: on the loop grid's points, the XLA choices (the tuner's rule,
    ``benchmarks._xla_grid.xla_rule``, recorded in ``decided``) and the product's XLA variants
    to measure (every one, or those of a fixed ``--grid-max`` sample of the product)."""

    def more(points: list[dict[str, Any]]) -> list:
        from autotune.program._space import Space

        if a.xla == "off" or not xla_supported():
            return []
        xla, decided["rule"] = xla_rule(a, runner.device_info(), objective, points)
        decided["xla"] = xla
        if not xla:
            return []
        product, decided["sampled"] = grid_configs(Space(sites, xla=xla), a.grid_max, a.seed)
        return [c for c in product if c.xla]

    return more


def _grid_loop(runner, configs, objective, sites, points: list, a: argparse.Namespace, reference=None):
    """Measure each grid config once, appending its point (the first complete one is the guard's
    reference, unless given); returns the reference."""
    from autotune.study import compare_outputs

    for i, config in enumerate(configs):
        entry = {"config": config.to_dict(), "label": label(config.to_dict(), sites)}
        try:
            m = runner.measure(config)
        except Exception as exc:  # a config that fails is a result
            entry.update(state="fail", reason=f"{type(exc).__name__}: {exc}"[:500])
            points.append(entry)
            continue
        if reference is None:
            reference = m.outputs
        why = compare_outputs(reference, m.outputs) if m.outputs is not None else None
        entry.update(point(m, objective), state="rejected" if why else "complete")
        if why:
            entry["reason"] = why
        points.append(entry)
        log(
            a,
            f"   grid {i + 1}/{len(configs)} {entry['label']}: compile {m.compile_total_s:.3f}s "
            f"run {m.run_s * 1e6:.1f}us cost {entry['cost']:.4g}",
        )
    return reference


def crossover(points: list[dict[str, Any]], objective) -> list[dict[str, Any]]:
    """The winning grid config at each call count, re-scored from the grid's measurements."""
    from autotune import Objective

    ok = [p for p in points if p.get("state") == "complete"]
    out = []
    for n in CROSSOVER_CALLS:
        obj = Objective(n, objective.compile_weight, objective.runtime_weight)
        best = min(ok, key=lambda p: obj.cost_of(p["compile_cost_s"], p["run_cost_s"]))
        default = ok[0] if points and points[0].get("state") == "complete" else None
        out.append(
            {
                "expected_calls": n,
                "config": best["config"],
                "label": best["label"],
                "compile_cost_s": best["compile_cost_s"],
                "run_cost_s": best["run_cost_s"],
                "cost": obj.cost_of(best["compile_cost_s"], best["run_cost_s"]),
                "default_cost": obj.cost_of(default["compile_cost_s"], default["run_cost_s"]) if default else None,
            }
        )
    return out


# ---------------------------------------------------------------------------------------
# the searches and the fixed baselines


def tune_supports(name: str) -> bool:
    from autotune import tune

    return name in inspect.signature(tune).parameters


def xla_supported() -> bool:
    """Whether this tree's tuner has the XLA option dimension (``TuneOptions.xla``)."""
    from autotune import TuneOptions

    return hasattr(TuneOptions(), "xla")


def tune_options(searched: bool, marks: dict[str, float], a: argparse.Namespace) -> dict[str, Any]:
    """The ``tune()`` keywords beyond the objective's: XLA, confirmation, the search's end mark."""
    extra: dict[str, Any] = {"xla": searched} if xla_supported() else {}
    if a.confirm_top is not None:
        extra["confirm_top"] = a.confirm_top
    if a.confirm_rounds is not None:
        extra["confirm_rounds"] = a.confirm_rounds
    if tune_supports("before_finish"):
        extra["before_finish"] = lambda marks=marks: marks.setdefault("search_end", time.perf_counter())
    return extra


def run_searches(name, ctl, ex, objective, timing, xla: bool, n_trials: int, a, sites) -> dict[str, dict[str, Any]]:
    """``tune()`` as ``tuned``, ``random`` (and ``loop_only``, ``product`` where XLA is searched): per
    approach its chosen config, walls, trial counts, space size and the study's own cost."""
    from autotune import tune

    searches = {}
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:  # the studies go with it
        runs = [("tuned", a.sampler, xla), ("random", "random", xla)]
        runs += [(LOOP_ONLY, a.sampler, False), (PRODUCT, a.sampler, True)] * xla
        for approach, sampler, searched in runs:
            marks: dict[str, float] = {}
            t0 = time.perf_counter()
            with stages(approach):
                result = tune(
                    ctl.fun,
                    *ex.args,
                    kwargs=ex.kwargs,
                    expected_calls=objective.expected_calls,
                    compile_weight=objective.compile_weight,
                    runtime_weight=objective.runtime_weight,
                    n_trials=n_trials,
                    sampler=sampler,
                    storage=os.path.join(tmp, f"{approach}.db"),
                    function_key=ctl.key,
                    jit_kwargs=ctl.jit_kwargs,
                    seed=a.seed,
                    timing=timing,
                    trial_timeout=a.trial_timeout,
                    max_memory=a.max_memory_bytes,
                    **tune_options(searched, marks, a),
                )
            wall = time.perf_counter() - t0
            searches[approach] = {
                "config": result.best_config.to_dict(),
                "wall": wall,
                "search_wall": (marks["search_end"] - t0) if "search_end" in marks else None,
                "trials": len(result.trials),
                "measured": sum(1 for t in result.trials if t.state != "duplicate"),
                "confirm_measurements": sum(len(c.rounds) for c in result.confirmed),
                "sampler": result.sampler,
                "space_size": result.space_size,
                "study_cost": result.best_cost,
                "wall_report": result.wall.to_json() if getattr(result, "wall", None) is not None else None,
            }
            log(
                a,
                f"   {approach} ({result.sampler}, {n_trials} trials, {wall:.1f}s): "
                f"{label(result.best_config.to_dict(), sites)}",
            )
    return searches


def baseline_configs(space) -> dict[str, Any]:
    from autotune import Config

    def full(e):  # a while loop has no trip count to unroll fully: its baseline is 8 guarded steps
        return {"repr": "while", "unroll": 8} if e.site.kind == "while" else {"repr": "for"}

    def unroll8(e):
        if e.site.kind == "while":
            return {"repr": "while", "unroll": 8}
        return {"repr": "scan", "unroll": min(8, e.site.length)}

    return {
        "default": space.default(),
        "for": Config({e.site.id: full(e) for e in space.entries}),
        "unroll8": Config({e.site.id: unroll8(e) for e in space.entries}),
    }


# ---------------------------------------------------------------------------------------
# the final re-measure


def run_final(name, index, objective, chosen, grid_points, timing, a) -> dict[str, Any]:
    """Every chosen config (once) re-measured in fresh processes: ``{"unique", "measured",
    "aggregate", "errors"}``. A config that failed in the grid (past --trial-timeout, say) is
    not re-measured: the final processes have no worker to stop it, and its failure is already
    the result."""
    failed = {config_key(p["config"]): p.get("reason", "failed") for p in grid_points if p.get("state") == "fail"}
    unique: list[str] = []
    for cfg in chosen.values():
        if config_key(cfg) not in unique and config_key(cfg) not in failed:
            unique.append(config_key(cfg))
    measured = final_measure(
        study_path(name),
        index,
        [json.loads(k) for k in unique],
        processes=a.final_processes,
        rounds=a.rounds,
        timing=timing,
        log=lambda msg: log(a, msg),
        # each config compiles once a round in each process: past that many trial timeouts, stop
        timeout_s=None if a.trial_timeout is None else a.trial_timeout * len(unique) * a.rounds + 60.0,
    )
    return {
        "unique": unique,
        "measured": measured,
        "aggregate": aggregate(measured, objective, a.final_processes),
        "errors": {**{k: f"failed in the grid: {why}" for k, why in failed.items()}, **measured["errors"]},
    }
