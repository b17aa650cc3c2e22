"""A second input signature tuned from its neighbour's configs, against a fresh study of it.

For each study (``--study``, repeatable; default :data:`DEFAULT_STUDIES`), in one run on one
machine, every tune is a fresh ``autotune tune FILE --json`` process (what a user pays):

* ``first``:  the study's own example (signature A) into cache C1: the neighbour;
* ``seeded``: signature B (one knob of the study changed, :data:`VARIANTS`: a batch doubled, a
  sequence twice as long) into C1, which holds A: the study starts from A's configs and may stop
  after them (``autotune.study._seeded``);
* ``fresh``:  B into an empty cache C2: what tuning B cost before.

``seeded`` and ``fresh`` alternate which runs first from one repeat to the next. Then both
winners are re-measured side by side in ``--final-processes`` fresh processes
(``benchmarks._final``: interleaved rounds; a config's cost from the medians of every sample, the
ratio the median of the per-process ratios), under the study's own objective. The targets
(issue 46): the seeded run's wall at most 25% of the fresh one's (the whole process; the tune's
own wall, ``TuneResult.wall``, is shown beside it), its winner within 2% of the fresh one's.

    python -m benchmarks.shapes                    # the default studies, one repeat (about 25 min on 2 cores)
    python -m benchmarks.shapes --study lambda_returns --repeats 2 --json out.json --out out.md
    python -m benchmarks.shapes --quick            # CI-sized: lambda_returns, 4 trials, short timing

It prints a table and writes JSON: ``{"jax", "device", "machine", "date", "settings", "rows":
[{"study", "variant", "repeat", "first", "seeded", "fresh" (each: "wall_s", "tune_wall_s",
"wall_parts", "trials", "best_config", "seeding"), "wall_ratio", "tune_wall_ratio", "cost_ratio",
"cost_ratio_per_process", "same_config", "costs"}], "summary"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks._final import aggregate, config_key, final_measure, ratio
from benchmarks._studies import ROOT, STUDY_DIR, label, study_path
from benchmarks._tables import loadavg, machine_line, run_facts, write_json

VARIANTS = {
    "lambda_returns": ("lambda_returns", "N_ENVS", 512, "batch ×2 (256 -> 512 environments)"),
    "gru_encoder": ("gru_encoder", "T", 64, "sequence ×2 (32 -> 64 steps)"),
    "gru_encoder_short": ("gru_encoder", "T", 8, "sequence ÷4 (32 -> 8 steps)"),
    "seed_rollout": ("seed_rollout", "BATCH", 64, "batch ×2 (32 -> 64)"),
    "scan_layers": ("scan_layers", "BATCH", 64, "batch ×2 (32 -> 64)"),
    "ode_rk4": ("ode_rk4", "ENSEMBLE", 128, "ensemble ×2 (64 -> 128 members)"),
    "kalman": ("kalman", "T", 64, "series ×2 (32 -> 64 steps)"),
}
"""Per case: the study, the module constant its ``init`` reads, its value for signature B, and what it is."""
DEFAULT_STUDIES = ["lambda_returns", "gru_encoder", "seed_rollout"]
WALL_TARGET, COST_TARGET = 0.25, 1.02

VARIANT_FILE = '''"""{study} with {knob} = {value}: {what} (written by benchmarks.shapes)."""

import {study} as _study

_study.{knob} = {value}
examples = _study.examples
'''


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--study", action="append", default=None, choices=sorted(VARIANTS), help="a case of VARIANTS (repeatable)"
    )
    p.add_argument("--repeats", type=int, default=1, help="pairs of seeded and fresh runs per study (default 1)")
    p.add_argument("--quick", action="store_true", help="CI-sized: lambda_returns, 4 trials, short timing")
    p.add_argument("--trials", type=int, default=None, help="--trials of every tune (default: autotune's)")
    p.add_argument("--run-seconds", type=float, default=None, help="--run-seconds of every tune")
    p.add_argument("--final-processes", type=int, default=3, help="fresh processes of the final re-measure")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per final process")
    p.add_argument("--target-s", type=float, default=0.2, help="runtime sampling per final measurement")
    p.add_argument("--json", default=None, metavar="PATH")
    p.add_argument("--out", default=None, metavar="PATH.md", help="write the markdown table here too")
    p.add_argument("--quiet", action="store_true")
    return p


def resolve(a: argparse.Namespace) -> argparse.Namespace:
    if a.quick:
        a.study = a.study or ["lambda_returns"]
        a.trials = a.trials or 4
        a.run_seconds = a.run_seconds or 0.02
        a.final_processes, a.rounds, a.target_s = 1, 1, 0.02
    a.study = a.study or DEFAULT_STUDIES
    if a.repeats < 1 or a.final_processes < 1 or a.rounds < 1:
        raise SystemExit("benchmarks.shapes: --repeats, --final-processes and --rounds must be at least 1.")
    return a


def say(a: argparse.Namespace, msg: str) -> None:
    if not a.quiet:
        print(msg, file=sys.stderr, flush=True)


def tune(file: str, cache: str, storage: str, a: argparse.Namespace) -> dict[str, Any]:
    """One ``autotune tune FILE --json`` process: its wall and what it found."""
    cmd = [sys.executable, "-m", "autotune", "tune", file, "--json", "--cache", cache, "--storage", storage]
    if a.trials is not None:
        cmd += ["--trials", str(a.trials)]
    if a.run_seconds is not None:
        cmd += ["--run-seconds", str(a.run_seconds)]
    if a.quick:
        cmd += ["--confirm-top", "1", "--confirm-rounds", "1"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    (r,) = json.loads(proc.stdout)
    return {
        "wall_s": wall,
        "tune_wall_s": (r.get("wall") or {}).get("total_s"),
        "wall_parts": (r.get("wall") or {}).get("parts"),
        "trials": len(r["trials"]),
        "best_config": r["best_config"],
        "best_cost": r["best_cost"],
        "objective": r["objective"],
        "seeding": r.get("seeding"),
        "loadavg": loadavg(),
    }


def final(file: str, seeded: dict, fresh: dict, a: argparse.Namespace) -> dict[str, Any]:
    """Both winners re-measured side by side in fresh processes: the seeded one's cost over the fresh one's."""
    from autotune.select._objective import Objective

    if config_key(seeded["best_config"]) == config_key(fresh["best_config"]):
        return {"cost_ratio": 1.0, "cost_ratio_per_process": [], "same_config": True}
    configs = [seeded["best_config"], fresh["best_config"]]
    measured = final_measure(
        file, 0, configs, processes=a.final_processes, rounds=a.rounds, timing={"target_s": a.target_s}
    )
    rows = aggregate(measured, Objective.from_dict(fresh["objective"]), a.final_processes)
    mid, each = ratio(rows.get(config_key(configs[0])), rows.get(config_key(configs[1])))
    return {"cost_ratio": mid, "cost_ratio_per_process": each, "same_config": False, "costs": rows}


def run_study(case: str, a: argparse.Namespace, tmp: str) -> list[dict[str, Any]]:
    name, knob, value, what = VARIANTS[case]
    variant = os.path.join(tmp, f"{case}_b.py")
    with open(variant, "w") as fh:
        fh.write(VARIANT_FILE.format(study=name, knob=knob, value=value, what=what))
    rows = []
    for rep in range(a.repeats):
        work = os.path.join(tmp, f"{case}-{rep}")
        os.makedirs(work)
        c1, c2 = (os.path.join(work, f"cache{i}.db") for i in (1, 2))
        s1, s2 = (os.path.join(work, f"studies{i}.db") for i in (1, 2))
        say(a, f"== {case} (repeat {rep + 1}/{a.repeats}): signature A, the neighbour")
        first = tune(study_path(name), c1, s1, a)
        got: dict[str, dict] = {}
        for which in ("seeded", "fresh") if rep % 2 == 0 else ("fresh", "seeded"):
            say(a, f"   {which}: signature B ({what})")
            got[which] = tune(variant, c1, s1, a) if which == "seeded" else tune(variant, c2, s2, a)
            say(a, f"   {which}: {got[which]['wall_s']:.0f} s, {got[which]['trials']} trials")
        judged = final(variant, got["seeded"], got["fresh"], a)
        rows.append(
            {
                "study": name,
                "case": case,
                "variant": what,
                "repeat": rep,
                "first": first,
                **got,
                "wall_ratio": got["seeded"]["wall_s"] / got["fresh"]["wall_s"],
                "tune_wall_ratio": _over(got["seeded"]["tune_wall_s"], got["fresh"]["tune_wall_s"]),
                **judged,
            }
        )
    return rows


def _over(x: float | None, y: float | None) -> float | None:
    return x / y if x is not None and y else None


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    walls = [r["wall_ratio"] for r in rows]
    costs = [r["cost_ratio"] for r in rows if r["cost_ratio"] is not None]
    return {
        "runs": len(rows),
        "stopped": sum(bool((r["seeded"]["seeding"] or {}).get("stopped")) for r in rows),
        "median_wall_ratio": statistics.median(walls) if walls else None,
        "max_wall_ratio": max(walls) if walls else None,
        "max_cost_ratio": max(costs) if costs else None,
        "wall_target_met": sum(w <= WALL_TARGET for w in walls),
        "cost_target_met": sum(c <= COST_TARGET for c in costs),
    }


def _winner(row: dict[str, Any], which: str) -> str:
    """A winner in autotune's notation, the sites named from their ids (an ``at.loop``'s id is its name)."""
    config = row[which]["best_config"]
    sites = [{"id": sid, "kind": "scan" if "@" in sid else "loop"} for sid in config if not sid.startswith("@")]
    return label(config, sites)


COLUMNS = (
    ("study", "---"),
    ("signature B", "---"),
    ("fresh s", "---:"),
    ("seeded s", "---:"),
    ("seeded/fresh (tune)", "---:"),
    ("trials fresh, seeded", "---:"),
    ("neighbours", "---"),
    ("winner fresh", "---"),
    ("winner seeded", "---"),
    ("cost seeded/fresh", "---:"),
)
"""The table's columns and their alignment."""


def table(result: dict[str, Any]) -> str:
    lines = ["| " + " | ".join(name for name, _ in COLUMNS) + " |", "| " + " | ".join(a for _, a in COLUMNS) + " |"]
    for r in result["rows"]:
        seeding = r["seeded"]["seeding"] or {}
        verdict = seeding.get("verdict") or {}
        margin = "" if verdict.get("margin") is None else f", margin {verdict['margin']:.0%}"
        how = ("stopped" if seeding.get("stopped") else "searched on") + f" ({verdict.get('rule', '-')}{margin})"
        cost = "same config" if r.get("same_config") else f"{r['cost_ratio']:.3f}"
        tune_wall = "" if r["tune_wall_ratio"] is None else f" ({r['tune_wall_ratio']:.0%})"
        lines.append(
            f"| {r['study']} | {r['variant']} | {r['fresh']['wall_s']:.0f} | {r['seeded']['wall_s']:.0f} | "
            f"{r['wall_ratio']:.0%}{tune_wall} | {r['fresh']['trials']}, {r['seeded']['trials']} | {how} | "
            f"{_winner(r, 'fresh')} | {_winner(r, 'seeded')} | {cost} |"
        )
    s = result["summary"]
    lines += [
        "",
        f"wall seeded/fresh: median {s['median_wall_ratio']:.0%}, max {s['max_wall_ratio']:.0%} "
        f"(target <= {WALL_TARGET:.0%}: {s['wall_target_met']} of {s['runs']}); winner cost seeded/fresh: "
        f"max {s['max_cost_ratio']:.3f} (target <= {COST_TARGET}: {s['cost_target_met']} of {s['runs']}); "
        f"stopped after the seeds in {s['stopped']} of {s['runs']}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    a = resolve(build_parser().parse_args(argv))
    path = [ROOT, STUDY_DIR, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(path)  # the variant files import their study; so do their workers
    settings = {k: getattr(a, k) for k in ("study", "repeats", "quick", "trials", "run_seconds", "final_processes")}
    result: dict[str, Any] = {**run_facts(), "machine_line": machine_line(), "settings": settings, "rows": []}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-shapes-") as tmp:
        for name in a.study:
            result["rows"].extend(run_study(name, a, tmp))
            result["summary"] = summary(result["rows"])
            result["wall_s"] = time.perf_counter() - started
            if a.json:
                write_json(a.json, result)  # after every study, so a long run leaves results
    text = table(result)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text)
    print(text, end="")
    return result


if __name__ == "__main__":
    main()
