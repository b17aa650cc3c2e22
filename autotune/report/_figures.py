"""The report's PNG figures: matplotlib (Agg, no pyplot state), imported only when drawn.

* ``tradeoff``: compile seconds against run seconds per trial, the Pareto front, the
  chosen config and the default marked, with the curve of equal cost through the chosen;
* ``crossover``: cost against expected calls (log-log), one line per shown config, the
  stretch where each is the winner drawn thick and the crossovers marked;
* ``sites``: per loop site, compile and run seconds against the unroll factor;
* ``history``: the cost of each trial and the best so far, with failed, rejected,
  pruned, duplicate... trials on a strip below and their reasons (wrapped, never cut
  mid-word).

Costs are :func:`autotune._select.cost` (through ``StudyReport.cost_of``), so the lines
pass through the same numbers the winner rule compares.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .. import _display, _select
from ._axes import LEGEND_CHARS, OUTCOME_STYLE, empty, new_figure, padded, time_unit, wants_log
from ._data import StudyReport
from ._history import figure_history, figure_sites

FIGURES = ("tradeoff", "crossover", "sites", "history")
"""The figures of each study, in page order; each is written as ``<slug>_<name>.png``."""


def figure_tradeoff(rep: StudyReport, path: str) -> str:
    """Compile seconds (x) against run seconds (y): trials, Pareto front, chosen and default."""
    fig = new_figure(8.0, 5.6)
    ax = fig.add_subplot()
    measured = [t for t in rep.trials if t.compile_s is not None and t.run_s is not None and t.outcome != "duplicate"]
    obj = rep.objective
    front = (
        "no Pareto front"
        if not rep.pareto
        else f"Pareto front {rep.pareto[0]['label']}" + (f"–{rep.pareto[-1]['label']}" if len(rep.pareto) > 1 else "")
    )
    ax.set_title(
        f"Compile vs run time per trial — {rep.function_key}\n"
        f"{len(measured)} measured trials; {front}; chosen for {_select.format_calls(obj.expected_calls)} calls",
        fontsize=10,
    )
    if not measured and not rep.pareto:
        empty(ax, "no trial was measured")
        fig.savefig(path)
        return path
    xs = [t.compile_s for t in measured] + [p["compile_s"] for p in rep.shown] + [c["compile_s"] for c in rep.confirmed]
    ys = [t.run_s for t in measured] + [p["run_s"] for p in rep.shown] + [c["run_s"] for c in rep.confirmed]
    xk, xu = time_unit(xs)
    yk, yu = time_unit(ys)
    for outcome in sorted({t.outcome for t in measured}):
        pts = [t for t in measured if t.outcome == outcome]
        marker, color = OUTCOME_STYLE.get(outcome, ("o", "#7f7f7f"))
        name = "trial (complete)" if outcome == "complete" else f"trial ({outcome})"
        ax.scatter(
            [t.compile_s * xk for t in pts],
            [t.run_s * yk for t in pts],
            s=28,
            marker=marker,
            color="#b0b0b0" if outcome == "complete" else color,
            alpha=0.9,
            label=name,
            zorder=2,
        )
    medians = {_select.config_text(c["config"]): c for c in rep.confirmed}
    linked = False
    for t in measured:
        c = medians.get(_select.config_text(t.config)) if t.counts else None
        if c is not None:
            ax.plot(
                [t.compile_s * xk, c["compile_s"] * xk],
                [t.run_s * yk, c["run_s"] * yk],
                color="#9e9e9e",
                lw=0.8,
                ls="-",
                alpha=0.7,
                zorder=1,
                label=None if linked else "trial → confirmed median",
            )
            linked = True
    if rep.confirmed:
        ax.scatter(
            [c["compile_s"] * xk for c in rep.confirmed],
            [c["run_s"] * yk for c in rep.confirmed],
            s=40,
            marker="D",
            facecolor="none",
            edgecolor="#555555",
            lw=0.9,
            zorder=3,
            label="confirmed median (re-measured)",
        )
    if rep.pareto:
        fx = [p["compile_s"] * xk for p in rep.pareto]
        fy = [p["run_s"] * yk for p in rep.pareto]
        ax.step(fx, fy, where="post", color="#333333", lw=1.2, ls="--", zorder=3, label="Pareto front")
    for p in rep.shown:
        ax.scatter(
            [p["compile_s"] * xk], [p["run_s"] * yk], s=70, color=p["color"], edgecolor="black", lw=0.6, zorder=4
        )
        ax.annotate(
            p["label"],
            (p["compile_s"] * xk, p["run_s"] * yk),
            xytext=(6, 5),
            textcoords="offset points",
            fontsize=10,
            fontweight="bold",
            color=p["color"],
            zorder=6,
        )
    if rep.default is not None:
        ax.scatter(
            [rep.default["compile_s"] * xk],
            [rep.default["run_s"] * yk],
            s=150,
            marker="s",
            facecolor="none",
            edgecolor="#444444",
            lw=1.4,
            zorder=5,
            label="default config",
        )
    if rep.chosen is not None:
        cx, cy = rep.chosen["compile_s"], rep.chosen["run_s"]
        ax.scatter(
            [cx * xk],
            [cy * yk],
            s=320,
            marker="*",
            facecolor="gold",
            edgecolor="black",
            lw=0.8,
            zorder=7,
            label=f"chosen for {_select.format_calls(obj.expected_calls)} calls",
        )
        # Configs on this curve cost the same as the chosen one: cw*c + rw*N*r = C.
        if obj.runtime_weight > 0 and obj.expected_calls > 0:
            import numpy as np

            lo, hi = min(xs), max(xs)
            span = np.linspace(max(0.0, lo - 0.05 * (hi - lo)), hi + 0.05 * (hi - lo), 200)
            iso = (rep.chosen["cost"] - obj.compile_weight * span) / (obj.runtime_weight * obj.expected_calls)
            keep = iso > 0
            ax.plot(
                span[keep] * xk,
                iso[keep] * yk,
                color="goldenrod",
                lw=1.0,
                ls=":",
                zorder=1,
                label=f"equal cost at {_select.format_calls(obj.expected_calls)} calls",
            )
    if wants_log(xs):
        ax.set_xscale("log")
    if wants_log(ys):
        ax.set_yscale("log")
    ax.set_xlim(*padded([x * xk for x in xs], ax.get_xscale() == "log"))
    ax.set_ylim(*padded([y * yk for y in ys], ax.get_yscale() == "log"))
    ax.set_xlabel(f"compile time per signature: trace + lower + compile ({xu})")
    ax.set_ylabel(f"run time per call, median ({yu})")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="best", framealpha=0.9)
    fig.savefig(path)
    return path


def calls_range(rep: StudyReport) -> tuple[float, float]:
    """The expected-calls axis of the crossover figure: every crossover and the objective's N inside."""
    marks = [it["from_calls"] for it in rep.intervals if it["from_calls"] > 0] + [rep.objective.expected_calls]
    marks = [m for m in marks if m > 0] or [1.0]
    lo = 10.0 ** (math.floor(math.log10(min(min(marks), 10.0))) - 1)
    hi = 10.0 ** (math.ceil(math.log10(max(max(marks), 1e4))) + 1)
    return lo, hi


def _wrapped(text: str) -> str:
    return "\n".join(_display.wrap(text, LEGEND_CHARS, max_lines=3))


def figure_crossover(rep: StudyReport, path: str) -> str:
    """Cost against expected calls, log-log: one line per shown config, crossovers marked.

    A lower panel shows each config's cost relative to the lowest at that N, where
    lines that nearly touch on the log-log plot come apart.
    """
    import numpy as np

    fig = new_figure(8.0, 7.2)
    ax, rel = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.5]})
    obj = rep.objective
    ax.set_title(
        f"Cost vs expected calls — {rep.function_key}\n"
        f"cost = {obj.compile_weight:g}·compile + {obj.runtime_weight:g}·N·run; "
        "thick: where each config is the winner",
        fontsize=10,
    )
    if not rep.shown:
        empty(ax, "no complete trial: nothing to compare")
        empty(rel, "")
        fig.savefig(path)
        return path
    lo, hi = calls_range(rep)
    n = np.logspace(math.log10(lo), math.log10(hi), 300)

    def cost(p, calls):  # the winner rule's cost (median of round costs) at each call count
        return np.array([rep.cost_of(p, float(c)) for c in np.atleast_1d(calls)])

    by_key = {_select.config_text(p["config"]): p for p in rep.shown}
    curves = {k: cost(p, n) for k, p in by_key.items()}
    envelope = np.min(list(curves.values()), axis=0)
    positive = bool(np.all(envelope > 0))
    excess_top = 0.0
    for key, p in by_key.items():
        never = not p["optimal"]
        ax.plot(
            n,
            curves[key],
            color=p["color"],
            lw=1.0,
            ls=":" if never else "-",
            alpha=0.8,
            label=_wrapped(f"{p['label']}: {rep.label(p['config'])}" + ("  (never cheapest)" if never else "")),
        )
        if positive:
            excess = 100.0 * (curves[key] / envelope - 1.0)
            rel.plot(n, excess, color=p["color"], lw=1.4, ls=":" if never else "-")
            excess_top = max(excess_top, float(np.max(excess)))
    for it in rep.intervals:
        p = by_key[_select.config_text(it["config"])]
        a, b = max(it["from_calls"], lo), min(it["to_calls"], hi)
        if b > a:
            seg = np.logspace(math.log10(a), math.log10(b), 60)
            ax.plot(seg, cost(p, seg), color=p["color"], lw=4.0, alpha=0.9, solid_capstyle="butt")
            rel.plot([a, b], [0, 0], color=p["color"], lw=6.0, solid_capstyle="butt")
    if rep.default is not None and _select.config_text(rep.default["config"]) not in by_key:
        line = cost(rep.default, n)
        ax.plot(n, line, color="#555555", lw=1.0, ls="--", label="default config (never the winner)")
        if positive:
            excess = 100.0 * (line / envelope - 1.0)
            rel.plot(n, excess, color="#555555", lw=1.0, ls="--")
            excess_top = max(excess_top, float(np.max(excess)))
    for prev, it in zip(rep.intervals, rep.intervals[1:]):  # the crossovers: where the winner changes
        x = it["from_calls"]
        if not lo <= x <= hi:
            continue
        y = float(cost(by_key[_select.config_text(it["config"])], x)[0])
        for panel in (ax, rel):
            panel.axvline(x, color="#444444", lw=0.8, ls="--", alpha=0.6)
        ax.scatter([x], [y], s=60, color="white", edgecolor="black", zorder=5)
        pa = by_key[_select.config_text(prev["config"])]["label"]
        pb = by_key[_select.config_text(it["config"])]["label"]
        ax.annotate(
            f"{pa}→{pb}\nN≈{_select.format_calls(x)}",
            (x, y),
            xytext=(6, -26),
            textcoords="offset points",
            fontsize=8.5,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#999999", "alpha": 0.9},
        )
    for panel in (ax, rel):
        panel.axvline(
            obj.expected_calls,
            color="goldenrod",
            lw=1.5,
            ls="-.",
            label=f"expected_calls = {_select.format_calls(obj.expected_calls)}" if panel is ax else None,
        )
    if rep.chosen is not None and obj.expected_calls > 0:
        ax.scatter(
            [obj.expected_calls],
            [rep.chosen["cost"]],
            s=260,
            marker="*",
            facecolor="gold",
            edgecolor="black",
            zorder=6,
            label="chosen",
        )
    ax.set_xscale("log")
    if positive:
        ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylabel("cost (s, log)" if obj.compile_weight == obj.runtime_weight == 1 else "weighted cost (log)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left", framealpha=0.9)
    top = min(max(excess_top, 1.0), 60.0)
    rel.set_ylim(-0.04 * top, top * 1.05)
    rel.set_ylabel("% above the lowest" + (" (clipped)" if excess_top > top else ""), fontsize=9)
    rel.set_xlabel("expected calls N per compile (log)")
    rel.grid(True, which="major", alpha=0.3)
    fig.savefig(path)
    return path


FIGURE_MAKERS: dict[str, Callable[[StudyReport, str], str]] = {
    "tradeoff": figure_tradeoff,
    "crossover": figure_crossover,
    "sites": figure_sites,
    "history": figure_history,
}

CAPTIONS = {
    "tradeoff": "Each measured trial's compile time (trace + lower + compile, paid once per input signature) "
    "against its median run time per call. The Pareto front (lettered) holds the configs no other beats "
    "on both; the star is the config chosen for the expected call count, the dotted curve the configs "
    "that would cost the same.",
    "crossover": "Total cost against how many times the compiled function runs, one line per config of the "
    "Pareto front (and any other config the winner rule picks somewhere). Each config is the winner "
    "where its line is thick; the circles mark the call counts where the winner "
    "flips. The dash-dot line is the objective's expected_calls.",
    "sites": "For each loop site, the compile and run time of every measured trial against that site's unroll factor "
    "and representation (a Python-style 'for' is the full unroll). Other sites vary between the points.",
    "history": "The cost of each complete trial in order and the best so far. The strip below shows every trial's "
    "outcome (failed, rejected by the correctness guard, pruned, duplicate...); reasons are listed in the "
    "trial table.",
}
