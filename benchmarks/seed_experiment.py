"""The seed experiment, reproduced with our own code: the ``c`` loop as a Python ``for`` vs a ``scan``.

The workload is ``studies/seed_rollout.py``: a jitted ``execute`` whose middle loop
(``algo_iters``, 5 iterations) wraps an inner rollout ``lax.scan`` (16 steps, left as a
scan in both variants), called again and again by outer Python loops:

    for b in range(N):                  # outer calls
        params, state = execute(params, state)

For each N in ``--calls`` and each variant, a fresh compile (JAX's caches cleared, the
persistent cache off) is timed, then N dependent calls; total wall = compile + run.
Then every config of the study's space is measured once and re-scored at each N: what
the tuner would pick at that call count.

    python -m benchmarks.seed_experiment                     # writes docs/results/seed_experiment.{png,json,md}
    python -m benchmarks.seed_experiment --calls 1 10 100 --out /tmp/seed
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VARIANTS = {"for": {"algo_iters": {"repr": "for"}}, "scan": {"algo_iters": {"repr": "scan", "unroll": 1}}}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, nargs="+", default=[1, 10, 100, 1000, 10000], help="outer call counts")
    p.add_argument("--repeats", type=int, default=3, help="runs per (variant, N); the median total is kept")
    p.add_argument("--target-s", type=float, default=0.2, help="runtime sampling per config for the re-scoring")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "results"), help="folder for the PNG, JSON and table")
    p.add_argument("--no-space", action="store_true", help="skip measuring the whole space (no tuner picks)")
    p.add_argument(
        "--replot", metavar="JSON", default=None, help="only redraw the PNG from a saved seed_experiment.json"
    )
    return p


def timed_run(fn, config: dict, args: tuple, n_calls: int) -> dict[str, float]:
    """Cold compile (trace + lower + compile, timed by autotune's own primitive), then
    ``n_calls`` dependent calls; seconds of each part."""
    import jax

    from autotune.measuring._measurement import compile_total
    from autotune.measuring._stages import compile_config
    from autotune.program._config import Config

    stages = compile_config(fn, args, config=Config.from_dict(config))
    compile_s = compile_total(stages)
    params, state = args
    t0 = time.perf_counter()
    for _ in range(n_calls):
        params, state = stages.compiled(params, state)
    jax.block_until_ready((params, state))
    run_s = time.perf_counter() - t0
    return {"compile_s": compile_s, "run_s": run_s, "total_s": compile_s + run_s}


def median_row(rows: list[dict[str, float]]) -> dict[str, float]:
    best = sorted(rows, key=lambda r: r["total_s"])[len(rows) // 2]
    return dict(best, repeats=len(rows))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    a = build_parser().parse_args(argv)
    if a.replot:
        with open(a.replot) as fh:
            result = json.load(fh)
        plot(result, os.path.join(a.out, "seed_experiment.png"))
        return result
    import jax

    from autotune import Objective, measure
    from autotune.program._space import Space
    from studies import seed_rollout as seed

    ctl = getattr(seed.execute, "autotune", seed.execute)
    args = seed.init()
    os.makedirs(a.out, exist_ok=True)

    # 1. The article's experiment: real loops of N calls, compile and run timed apart.
    for config in VARIANTS.values():  # warm-up: the process's first compile pays one-off costs
        timed_run(ctl.fun, config, args, 1)
    measured: dict[str, dict[int, dict[str, float]]] = {v: {} for v in VARIANTS}
    for n in a.calls:
        for variant, config in VARIANTS.items():  # interleaved, so load drifts hit both
            rows = [timed_run(ctl.fun, config, args, n) for _ in range(a.repeats)]
            measured[variant][n] = median_row(rows)
            r = measured[variant][n]
            print(
                f"N={n:>6} c as {variant:4s}: compile {r['compile_s']:.3f}s + run {r['run_s']:.3f}s "
                f"= {r['total_s']:.3f}s",
                flush=True,
            )

    # 2. What the tuner picks: every config measured once, re-scored per call count.
    picks, points = [], []
    if not a.no_space:
        sites = ctl.sites(*args)
        space = Space(sites)
        for config in space.configs():
            m = measure(ctl.fun, args, config=config, jit_kwargs=ctl.jit_kwargs, target_s=a.target_s)
            points.append(
                {"config": config.to_dict(), "label": str(config), "compile_s": m.compile_total_s, "run_s": m.run_s}
            )
        print(f"measured {len(points)} configs of the space", flush=True)

        def cost_at(label_or_cfg: dict, n: int) -> float | None:
            for p in points:
                if _same(p["config"], label_or_cfg, space):
                    return Objective(n).cost_of(p["compile_s"], p["run_s"])
            return None

        for n in a.calls:
            obj = Objective(n, ctl.compile_weight, ctl.runtime_weight)
            best = min(points, key=lambda p: obj.cost_of(p["compile_s"], p["run_s"]))
            picks.append(
                {
                    "calls": n,
                    "config": best["config"],
                    "label": _short(best["config"]),
                    "cost": obj.cost_of(best["compile_s"], best["run_s"]),
                    "for_cost": cost_at(VARIANTS["for"], n),
                    "scan_cost": cost_at(VARIANTS["scan"], n),
                }
            )
            print(
                f"N={n:>6}: tuner picks {picks[-1]['label']} (predicted {picks[-1]['cost']:.3f}s; "
                f"for {picks[-1]['for_cost']:.3f}s, scan {picks[-1]['scan_cost']:.3f}s)",
                flush=True,
            )

    dev = jax.devices()[0]
    result = {
        "jax": jax.__version__,
        "device": f"{dev.platform}:{dev.device_kind}",
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} logical CPUs",
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "workload": {
            "algo_iters": seed.ALGO_ITERS,
            "rollout_len": seed.ROLLOUT_LEN,
            "batch": seed.BATCH,
            "hidden": seed.HIDDEN,
        },
        "calls": a.calls,
        "measured": {v: {str(n): r for n, r in rows.items()} for v, rows in measured.items()},
        "tuner_picks": picks,
        "space_points": points,
    }
    with open(os.path.join(a.out, "seed_experiment.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    md = markdown(result)
    with open(os.path.join(a.out, "seed_experiment.md"), "w") as fh:
        fh.write(md)
    plot(result, os.path.join(a.out, "seed_experiment.png"))
    print(md)
    print(f"wrote {a.out}/seed_experiment.{{png,json,md}}")
    return result


def _same(a: dict, b: dict, space) -> bool:
    from autotune import Config

    full = lambda d: Config({**space.default().to_dict(), **d})  # noqa: E731
    return full(a) == full(b)


def _short(config: dict) -> str:
    parts = []
    for sid, c in sorted(config.items(), key=lambda kv: kv[0].count("/")):
        name = sid.rsplit("/", 1)[-1].split("@")[0] if "/" in sid else sid
        name = "rollout" if name == "scan" else name
        parts.append(f"{name}={'for' if c['repr'] == 'for' else c['repr'] + '-u' + str(c['unroll'])}")
    return ", ".join(parts)


def markdown(r: dict[str, Any]) -> str:
    w = r["workload"]
    lines = [
        "# Seed experiment: the `c` loop as Python `for` vs `lax.scan`",
        "",
        f"- date: {r['date']}; jax {r['jax']}; device {r['device']}; machine: {r['machine']}",
        f"- workload: studies/seed_rollout.py, `c` loop of {w['algo_iters']} iterations around a "
        f"{w['rollout_len']}-step rollout scan (batch {w['batch']}, hidden {w['hidden']}); "
        "inner rollout a scan in both",
        "",
        "Measured: one cold compile, then N dependent calls (seconds).",
        "",
        "| N calls | for: compile | for: run | for: total | scan: compile | scan: run | scan: total | faster |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n in r["calls"]:
        f, s = r["measured"]["for"][str(n)], r["measured"]["scan"][str(n)]
        lines.append(
            f"| {n} | {f['compile_s']:.3f} | {f['run_s']:.3f} | {f['total_s']:.3f} | {s['compile_s']:.3f} | "
            f"{s['run_s']:.3f} | {s['total_s']:.3f} | {'for' if f['total_s'] < s['total_s'] else 'scan'} |"
        )
    if r["tuner_picks"]:
        lines += [
            "",
            f"What the tuner picks at each call count (every one of the {len(r['space_points'])} configs "
            "measured once, re-scored; predicted cost in seconds):",
            "",
            "| N calls | pick | predicted cost | `c` as for | `c` as scan |",
            "|---:|---|---:|---:|---:|",
        ]
        for p in r["tuner_picks"]:
            lines.append(
                f"| {p['calls']} | `{p['label']}` | {p['cost']:.3f} | {p['for_cost']:.3f} | {p['scan_cost']:.3f} |"
            )
    return "\n".join(lines) + "\n"


def plot(r: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    calls = r["calls"]
    colors = {"for": "#d95f02", "scan": "#1b9e77"}
    picks = r["tuner_picks"]
    fig = plt.figure(figsize=(13, 7.6 if picks else 5.4))
    gs = fig.add_gridspec(2 if picks else 1, 2, height_ratios=[3, 1.15] if picks else [1], width_ratios=[1, 1.2])
    ax1, ax2 = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1])

    for v in ("for", "scan"):
        rows = [r["measured"][v][str(n)] for n in calls]
        ax1.plot(calls, [x["total_s"] for x in rows], "o-", color=colors[v], lw=2, label=f"c as {v}: compile + run")
        ax1.plot(
            calls,
            [x["compile_s"] for x in rows],
            "s--",
            color=colors[v],
            lw=1.2,
            ms=4,
            alpha=0.8,
            label=f"c as {v}: compile only",
        )
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax1.yaxis.set_major_formatter(plain)
    lead = lambda v: round(v / 10 ** np.floor(np.log10(v))) if v > 0 else 0  # noqa: E731
    ax1.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if lead(v) in (2, 5) else ""))
    ax1.xaxis.set_major_formatter(plain)
    ax1.set_xlabel("outer calls N (each a dependent call of the jitted execute)")
    ax1.set_ylabel("wall time, seconds (log scale)")
    ax1.set_title("Total wall time for N calls")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=9, loc="upper left")

    x = np.arange(len(calls))
    width = 0.38
    for i, v in enumerate(("for", "scan")):
        rows = [r["measured"][v][str(n)] for n in calls]
        comp = np.array([row["compile_s"] for row in rows])
        run = np.array([row["run_s"] for row in rows])
        tot = comp + run
        pos = x + (i - 0.5) * width
        ax2.bar(
            pos,
            comp / tot * 100,
            width,
            color=colors[v],
            alpha=0.4,
            hatch="//",
            edgecolor="white",
            label=f"c as {v}: compile",
        )
        ax2.bar(pos, run / tot * 100, width, bottom=comp / tot * 100, color=colors[v], label=f"c as {v}: run")
        for px, t in zip(pos, tot):
            ax2.text(px, 102, f"{t:.2f}s", ha="center", va="bottom", fontsize=8)
    ax2.set_xticks(x)
    ax2.set_xticklabels([f"N={n}" for n in calls])
    ax2.set_ylim(0, 112)
    ax2.set_yticks([0, 20, 40, 60, 80, 100])
    ax2.set_ylabel("share of the total, % (label: total seconds)")
    ax2.set_title("Compile vs run share (left bar: for, right bar: scan)")
    ax2.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=4, frameon=False)

    if picks:
        ax3 = fig.add_subplot(gs[1, :])
        ax3.axis("off")
        cells = [
            [f"{p['calls']}", p["label"], f"{p['cost']:.3f}", f"{p['for_cost']:.3f}", f"{p['scan_cost']:.3f}"]
            for p in picks
        ]
        table = ax3.table(
            cellText=cells,
            colLabels=["N calls", "tuner's pick (all sites)", "predicted s", "c as for, s", "c as scan, s"],
            colWidths=[0.08, 0.46, 0.12, 0.12, 0.12],
            loc="center",
            cellLoc="center",
        )
        table.auto_set_font_size(False)
        table.set_fontsize(9)
        table.scale(1, 1.25)
        ax3.set_title(
            "What the tuner picks at each N (every config measured once, re-scored: compile + N x run)", fontsize=10
        )
    fig.suptitle(f"Seed experiment: the c loop as a Python for vs a scan (jax {r['jax']}, {r['device']})", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
