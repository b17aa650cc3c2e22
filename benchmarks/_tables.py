"""The bench's report: the summary and targets over the studies, the markdown tables, the
machine line, and re-labelling a saved result (``--render``), old key names included; and what
the smaller benchmarks write beside their tables (:func:`run_facts`, :func:`write_json`).

A leaf of ``benchmarks.bench`` beside ``benchmarks._study_run``: it imports only
``benchmarks._studies`` and the sections of ``_walls`` and ``_xla_grid``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from typing import Any

from benchmarks._studies import LOOP_ONLY, approaches_of, label, site_names
from benchmarks._walls import walls
from benchmarks._xla_grid import stages_table

# A result written with the figures' old names, read with autotune's (docs/architecture.md): a
# row's old key -> its current name. In such a result ``compile_s`` / ``run_s`` are the charged figures.
OLD_KEYS = {
    "compile_s": "compile_cost_s",
    "run_s": "run_cost_s",
    "compile_wall_s": "compile_total_s",
    "xla_compile_s": "compile_s",
    "run_median_s": "run_s",
}


def upgrade_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row (approach, grid point, crossover, sample) with the current figure names; a row that
    has them already is returned as it is."""
    if "compile_cost_s" in row or "compile_s" not in row:
        return row
    return {OLD_KEYS.get(k, k): v for k, v in row.items()}


def relabel(result: dict[str, Any]) -> dict[str, Any]:
    """Recompute every display label of a saved result from its configs, and read its old key
    names (``--render``)."""
    for st in result["studies"]:
        names = site_names(st["sites"])
        for x in st["sites"]:
            x["short"] = names[x["id"]]
        st["approaches"] = {k: upgrade_row(v) for k, v in st["approaches"].items()}
        st["grid_points"] = [upgrade_row(p) for p in st.get("grid_points", ())]
        st["crossover"] = [upgrade_row(c) for c in st.get("crossover", ())]
        for row in [*st["approaches"].values(), *st["grid_points"], *st["crossover"]]:
            if "config" in row:
                row["label"] = label(row["config"], st["sites"])
    return result


def summary(studies: list[dict[str, Any]]) -> dict[str, Any]:
    def vals(k):
        return [s[k] for s in studies if s.get(k) is not None]

    regrets, rt, dt, wall = (
        vals("regret"),
        vals("random_over_tuned"),
        vals("default_over_tuned"),
        vals("wall_tuned_over_grid"),
    )
    search = [
        s["approaches"]["tuned"]["search_wall_s"] / s["approaches"]["grid"]["tuning_wall_s"]
        for s in studies
        if s["approaches"]["tuned"].get("search_wall_s") and s["approaches"]["grid"].get("tuning_wall_s")
    ]
    budget = [
        s["approaches"]["tuned"]["trials"] / s["grid_size"]
        for s in studies
        if s.get("grid_size") and s["approaches"]["tuned"].get("trials")
    ]
    xla = vals("loop_only_over_tuned")
    each = [r for st in studies for r in st.get("default_over_tuned_per_process") or () if r is not None]
    out = {
        "max_loop_only_over_tuned": max(xla) if xla else None,
        "median_regret": statistics.median(regrets) if regrets else None,
        "max_regret": max(regrets) if regrets else None,
        "tuned_le_random": sum(1 for x in rt if x >= 1.0),
        "tuned_le_random_within_2pct": sum(1 for x in rt if x >= 0.98),
        "studies": len(studies),
        "min_default_over_tuned": min(dt) if dt else None,
        "default_over_tuned_ge_1": sum(1 for x in dt if x >= 1.0),
        # The worst single process of the final re-measurement (the targets read the medians).
        "min_default_over_tuned_per_process": min(each) if each else None,
        "median_wall_tuned_over_grid": statistics.median(wall) if wall else None,
        "max_wall_tuned_over_grid": max(wall) if wall else None,
        "median_search_wall_tuned_over_grid": statistics.median(search) if search else None,
        "max_search_wall_tuned_over_grid": max(search) if search else None,
        # The trials the budget allows, as a share of the grid: the floor under the wall ratio.
        "median_trials_over_grid": statistics.median(budget) if budget else None,
        "max_trials_over_grid": max(budget) if budget else None,
        # Issue 13's targets: >= 6 of 8 is three quarters of the studies.
        "targets": {
            "median_regret<=1.02": bool(regrets) and statistics.median(regrets) <= 1.02,
            "tuned<=random on >=3/4": bool(rt) and sum(1 for x in rt if x >= 1.0) >= 0.75 * len(rt),
            "default/tuned>=0.98 everywhere": bool(dt) and min(dt) >= 0.98,
            "tuned wall median<=35% and max<=60% of grid": bool(wall)
            and statistics.median(wall) <= 0.35
            and max(wall) <= 0.60,
        },
    }
    if xla:  # the target: where compile dominates, the XLA options win >= 1.3x over the loop-only tuner
        out["targets"]["loop_only/tuned>=1.3 on a study"] = max(xla) >= 1.3
    return out


def _f(x, fmt="{:.3f}"):
    return "-" if x is None else fmt.format(x)


def _each(ratios) -> str:
    """Per-process ratios as ``1.02 / 0.97 / 1.10`` (``-`` where none)."""
    return " / ".join(_f(r) for r in ratios) if ratios else "-"


def _header(result: dict[str, Any]) -> list[str]:
    settings = result["settings"]
    final_k, rounds = settings.get("final_processes"), settings.get("rounds")
    load0, load1 = result.get("loadavg_start"), result.get("loadavg_end")
    return [
        "# Benchmark: tuned vs grid, random and fixed loop structures",
        "",
        f"- date: {result['date']}",
        f"- jax {result['jax']} (jaxlib {result['jaxlib']}), python {result['python']}",
        f"- device: {result['device']}",
        f"- machine: {result['machine']}",
        f"- settings: {json.dumps(result['settings'])}",
        *(
            [
                "- load: "
                + (
                    "a CPU burner on one core for the whole run (`python -c 'while True: pass'`)"
                    if settings.get("burner")
                    else "no burner"
                )
                + (f"; load average (1/5/15 min) at start {load0}" if load0 else "")
                + (f", at end {load1}" if load1 else "")
            ]
            if "burner" in settings  # a run from before --burner says nothing of it
            else []
        ),
        f"- total wall: {result['wall_s']:.0f} s"
        + (" (PARTIAL: the run is still going or was stopped)" if result.get("partial") else ""),
        "",
        "cost = compile_weight·(trace+lower+compile) + runtime_weight·expected_calls·run, "
        + (
            f"from a final re-measurement of every approach's config in {final_k} fresh process(es), one after "
            f"another, {rounds} interleaved rounds each (medians over every sample of every process of the "
            "objective's own seconds: compile in CPU s, run the 10th percentile of the calls). A ratio between "
            "approaches is the median of the per-process ratios. "
            if final_k
            else "from one interleaved re-measurement of every approach's config (medians over the rounds of the "
            "objective's own seconds: compile in CPU s, run the 10th percentile of the calls). "
        )
        + "`cost/grid` < 1 is noise in the grid's own pick.",
        "",
        "| study | calls | grid | approach | config | compile s | run µs | cost s | cost/grid | trials "
        "| tuning wall s |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]


def _approach_table(result: dict[str, Any]) -> list[str]:
    lines = []
    for st in result["studies"]:
        grid_cost = st["approaches"]["grid"]["cost"]
        for i, name in enumerate(approaches_of(st)):
            r = st["approaches"][name]
            g = f"{st['grid_size']}{' (sampled)' if st['sampled'] else ''}" if i == 0 else ""
            calls = format(st["expected_calls"], "g") if i == 0 else ""
            lines.append(
                f"| {st['study'] if i == 0 else ''} | {calls} | {g} | {name} | "
                f"`{r['label']}` | {_f(r['compile_cost_s'])} | "
                f"{_f(r['run_cost_s'] and r['run_cost_s'] * 1e6, '{:.1f}')} | "
                f"{_f(r['cost'], '{:.4g}')} | "
                f"{_f(r['cost'] / grid_cost if r['cost'] and grid_cost else None, '{:.3f}')} | "
                f"{r['trials']} | {_f(r['tuning_wall_s'], '{:.1f}')} |"
            )
    return lines


def _per_study(result: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Per study",
        "",
        "| study | regret tuned/grid | random/grid | random/tuned | default/tuned | default/tuned per process "
        "| for/tuned | unroll8/tuned | wall tuned/grid | search only/grid | grid pick: 1-sample → final cost |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for st in result["studies"]:
        tuned, grid = st["approaches"]["tuned"], st["approaches"]["grid"]
        search = (
            tuned["search_wall_s"] / grid["tuning_wall_s"]
            if tuned.get("search_wall_s") and grid.get("tuning_wall_s")
            else None
        )
        lines.append(
            f"| {st['study']} | {_f(st['regret'])} | {_f(st['random_regret'])} | {_f(st['random_over_tuned'])} | "
            f"{_f(st['default_over_tuned'])} | {_each(st.get('default_over_tuned_per_process'))} | "
            f"{_f(st['for_over_tuned'])} | {_f(st['unroll8_over_tuned'])} | "
            f"{_f(st['wall_tuned_over_grid'], '{:.0%}')} | {_f(search, '{:.0%}')} | "
            f"{_f(grid.get('search_cost'), '{:.4g}')} → {_f(grid['cost'], '{:.4g}')} |"
        )
    lines += [
        "",
        "`per process`: default/tuned in each fresh process of the final re-measurement (the spread between "
        "processes; the column before is their median). `search only`: the tuned study's wall time up to its "
        "confirmation (tune() then re-measures its top configs and the default interleaved, several rounds, each "
        "a fresh compile). `grid pick`: the grid winner's cost from its single grid measurement, then from the "
        "final re-measurement (the minimum of many noisy samples is optimistic, so the grid reference is itself "
        "noisy).",
    ]
    return lines


def _targets(s: dict[str, Any]) -> list[str]:
    t = s["targets"]
    return [
        "",
        "## Targets",
        "",
        f"- median regret cost(tuned)/cost(grid): {_f(s['median_regret'])} (max {_f(s['max_regret'])}); "
        f"target <= 1.02: {'met' if t['median_regret<=1.02'] else 'NOT met'}",
        f"- tuned <= random: {s['tuned_le_random']}/{s['studies']} studies "
        f"({s['tuned_le_random_within_2pct']} within 2%); "
        f"target >= 3/4: {'met' if t['tuned<=random on >=3/4'] else 'NOT met'}",
        f"- default/tuned >= 1.0: {s['default_over_tuned_ge_1']}/{s['studies']} "
        f"(min {_f(s['min_default_over_tuned'])}; in a single process of the final re-measurement "
        f"min {_f(s.get('min_default_over_tuned_per_process'))}); "
        f"target >= 0.98 everywhere: {'met' if t['default/tuned>=0.98 everywhere'] else 'NOT met'}",
        f"- tuning wall tuned/grid: median {_f(s['median_wall_tuned_over_grid'], '{:.0%}')}, "
        f"max {_f(s['max_wall_tuned_over_grid'], '{:.0%}')}; target median <= 35%, max <= 60%: "
        f"{'met' if t['tuned wall median<=35% and max<=60% of grid'] else 'NOT met'} (search only, without "
        f"tune()'s confirmation: median {_f(s.get('median_search_wall_tuned_over_grid'), '{:.0%}')}, "
        f"max {_f(s.get('max_search_wall_tuned_over_grid'), '{:.0%}')}; the trial budget alone is "
        f"median {_f(s.get('median_trials_over_grid'), '{:.0%}')}, max {_f(s.get('max_trials_over_grid'), '{:.0%}')} "
        f"of the grid's configs)",
        "",
    ]


def _xla(result: dict[str, Any]) -> list[str]:
    s = result["summary"]
    lines: list[str] = []
    searched = [st for st in result["studies"] if st.get("loop_only_over_tuned") is not None]
    if searched:
        lines += [
            "## XLA compile options: the tuner against the loop-only tuner (xla off)",
            "",
            "| study | calls | XLA choices | loop-only config | loop-only cost s | tuned config | tuned cost s "
            "| loop-only/tuned | per process |",
            "|---|---:|---|---|---:|---|---:|---:|---:|",
        ]
        for st in searched:
            lo, tu = st["approaches"][LOOP_ONLY], st["approaches"]["tuned"]
            lines.append(
                f"| {st['study']} | {st['expected_calls']:g} | {len(st['xla_choices'])} | `{lo['label']}` | "
                f"{_f(lo['cost'], '{:.4g}')} | `{tu['label']}` | {_f(tu['cost'], '{:.4g}')} | "
                f"{_f(st['loop_only_over_tuned'])} | {_each(st.get('loop_only_over_tuned_per_process'))} |"
            )
        met = s["targets"].get("loop_only/tuned>=1.3 on a study")
        lines += [
            "",
            f"- max loop-only/tuned {_f(s['max_loop_only_over_tuned'])}; target >= 1.3 where compile "
            f"dominates: {'met' if met else 'NOT met'}",
        ]
    return lines


def _crossover(result: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Crossover: the grid's winner at other call counts (re-scored, not re-measured)",
        "",
    ]
    for st in result["studies"]:
        legend = ", ".join(f"`{x['short']}` = {x['id']} ({x['kind']}, length {x['length']})" for x in st["sites"])
        lines += [
            f"### {st['study']} (tuned for {st['expected_calls']:g} calls)",
            "",
            f"Sites: {legend}.",
            "",
            "| calls | winner | compile s | run µs | cost s | default cost s |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        for c in st["crossover"]:
            lines.append(
                f"| {c['expected_calls']:g} | `{c['label']}` | {c['compile_cost_s']:.3f} | "
                f"{c['run_cost_s'] * 1e6:.1f} | "
                f"{c['cost']:.4g} | {_f(c['default_cost'], '{:.4g}')} |"
            )
        lines.append("")
    return lines


def markdown(result: dict[str, Any]) -> str:
    """The report: every approach per study, the ratios, the targets, XLA, the crossover."""
    parts = [_header, _approach_table, _per_study, lambda r: _targets(r["summary"]), walls, _xla, stages_table]
    parts.append(_crossover)
    return "\n".join(line for part in parts for line in part(result)) + "\n"


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    now = loadavg()
    load = f", load average at start {now[0]:.1f}" if now else ""
    return f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} logical CPUs{load}"


def run_facts() -> dict[str, str]:
    """Where and when a benchmark ran: ``jax`` (its version), ``device`` (the first device's
    kind), ``machine`` and ``date`` (UTC), the first keys of the JSON it writes."""
    import datetime as _dt

    import jax

    return {
        "jax": jax.__version__,
        "device": jax.devices()[0].device_kind,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def write_json(path: str, result: dict[str, Any]) -> None:
    """``result`` as indented JSON at ``path``, its folder made where missing."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(json.dumps(result, indent=2) + "\n")


def loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the system has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# A verdict needs this many paired runs: with fewer, the resampled medians are the runs themselves.
MIN_VERDICT_RUNS = 3


def median_interval(values: list[float], level: float = 0.9, resamples: int = 2000) -> tuple[float, float]:
    """A ``level`` bootstrap interval of the median of ``values`` (a fixed seed: the same runs
    give the same interval). Whole processes on a shared host spread ±10%, so a median of five
    alone cannot say whether a 2% target holds; the interval says whether the runs could."""
    import random

    rng = random.Random(0)
    n = len(values)
    meds = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(resamples))
    tail = (1.0 - level) / 2.0
    return meds[int(tail * (resamples - 1))], meds[int((1.0 - tail) * (resamples - 1))]


def verdict(ratios: list[float], target: float, level: float = 0.9) -> dict[str, Any]:
    """Whether paired ratios (one per run, lower is better) meet ``ratio <= target``: ``met``
    when the interval of their median lies at or below it, ``not met`` when above it, otherwise
    ``undecided`` (the runs cannot tell at this noise: run more), also with fewer than
    :data:`MIN_VERDICT_RUNS` runs.

    Example::

        >>> verdict([0.95, 0.97, 0.96, 0.98, 0.94], 1.02)["verdict"]
        'met'
        >>> verdict([0.9, 1.1, 1.0, 0.95, 1.08], 1.02)["verdict"]
        'undecided'
    """
    lo, hi = median_interval(ratios, level) if ratios else (float("nan"), float("nan"))
    if len(ratios) < MIN_VERDICT_RUNS:
        word = "undecided"
    else:
        word = "met" if hi <= target else "not met" if lo > target else "undecided"
    median = statistics.median(ratios) if ratios else None
    return {"median": median, "interval": [lo, hi], "level": level, "verdict": word}
