"""A study's row of ``benchmarks.bench``: each approach's final figures, the ratios between the
approaches, the final re-measure as the JSON keeps it, the sites.

A leaf of ``benchmarks.bench`` beside ``_study_run``: it imports only ``benchmarks._final`` and
``benchmarks._studies``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchmarks._final import config_key
from benchmarks._final import ratio as final_ratio
from benchmarks._studies import APPROACHES, LOOP_ONLY, PRODUCT, label, site_names


def site_rows(sites) -> list[dict[str, Any]]:
    names = site_names(sites)
    return [{"id": s.id, "short": names[s.id], "kind": s.kind, "length": s.length, "depth": s.depth} for s in sites]


def approach_rows(chosen, final, grid, searches, sites, xla: bool) -> dict[str, dict[str, Any]]:
    """Each approach's final figures, config, label, trials and walls."""
    approaches = {}
    for approach in APPROACHES + [LOOP_ONLY, PRODUCT] * xla:
        cfg = chosen[approach]
        key = config_key(cfg)
        f = final["aggregate"].get(key)
        row = {
            "cost": f["cost"] if f else None,
            "compile_cost_s": f["compile_cost_s"] if f else None,
            "run_cost_s": f["run_cost_s"] if f else None,
            "cost_per_process": f["cost_per_process"] if f else [],
            "samples": f["rounds"] if f else 0,
            "config": cfg,
            "label": label(cfg, sites),
        }
        if f is None:
            row["error"] = final["errors"].get(key, "not measured")
        if approach == "grid":
            row.update(trials=len(grid["points"]), tuning_wall_s=grid["wall"], search_cost=grid["best"]["cost"])
        elif approach in searches:
            s = searches[approach]
            row.update(
                trials=s["trials"],
                measured=s["measured"],
                tuning_wall_s=s["wall"],
                search_wall_s=s["search_wall"],
                confirm_measurements=s["confirm_measurements"],
                sampler=s["sampler"],
                space_size=s["space_size"],
                search_cost=s["study_cost"],
                wall_report=s["wall_report"],
            )
        else:
            row.update(trials=0, tuning_wall_s=0.0)
        approaches[approach] = row
    return approaches


def ratios(chosen, final, xla: bool) -> dict[str, Any]:
    """The study's cost ratios between approaches: medians of the per-process ratios."""

    def ratio(x, y, per_process=False):
        med, each = final_ratio(final.get(config_key(chosen[x])), final.get(config_key(chosen[y])))
        return each if per_process else med

    return {
        "regret": ratio("tuned", "grid"),
        "random_regret": ratio("random", "grid"),
        "random_over_tuned": ratio("random", "tuned"),
        "default_over_tuned": ratio("default", "tuned"),
        "for_over_tuned": ratio("for", "tuned"),
        "unroll8_over_tuned": ratio("unroll8", "tuned"),
        "loop_only_over_tuned": ratio(LOOP_ONLY, "tuned") if xla else None,
        "product_regret": ratio(PRODUCT, "grid") if xla else None,
        "product_over_tuned": ratio(PRODUCT, "tuned") if xla else None,
        "default_over_tuned_per_process": ratio("default", "tuned", per_process=True),
        "loop_only_over_tuned_per_process": ratio(LOOP_ONLY, "tuned", per_process=True) if xla else None,
    }


def final_record(final, sites, a: argparse.Namespace) -> dict[str, Any]:
    """The final re-measure as the JSON keeps it: its processes and every sample per config."""
    measured = final["measured"]
    return {
        "processes": a.final_processes,
        "rounds": a.rounds,
        "parent_pid": measured["parent_pid"],
        "pids": [p["pid"] for p in measured["processes"]],
        "failed": [p for p in measured["processes"] if p.get("error")],
        "configs": [
            {
                "config": json.loads(k),
                "label": label(json.loads(k), sites),
                "error": final["errors"].get(k),
                "samples": [{x: v for x, v in s.items() if x != "key"} for s in measured["samples"] if s["key"] == k],
            }
            for k in final["unique"]
        ],
    }
