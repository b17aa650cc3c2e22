"""The report's crossover figure: cost against expected calls (see :mod:`autotune.report._figures`)."""

from __future__ import annotations

import math

from autotune import _display
from autotune import select as _select
from autotune.program._config import Config
from autotune.report._axes import LEGEND_CHARS, empty, legend, new_figure
from autotune.report._data import StudyReport


def calls_range(rep: StudyReport) -> tuple[float, float]:
    """The expected-calls axis of the crossover figure: every crossover and the objective's N inside."""
    marks = [it["from_calls"] for it in rep.intervals if it["from_calls"] > 0] + [rep.objective.expected_calls]
    marks = [m for m in marks if m > 0] or [1.0]
    lo = 10.0 ** (math.floor(math.log10(min(min(marks), 10.0))) - 1)
    hi = 10.0 ** (math.ceil(math.log10(max(max(marks), 1e4))) + 1)
    return lo, hi


def _wrapped(text: str) -> str:
    return "\n".join(_display.wrap(text, LEGEND_CHARS, max_lines=3))


def _star_chosen(rep: StudyReport, ax) -> None:
    obj = rep.objective
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


def _single_crossover(rep: StudyReport, fig, ax):
    """The crossover figure of a study with one config to show: its cost line, the other
    configs measured (each dominated by it) faint, and a note that it covers every count."""
    import numpy as np

    obj = rep.objective
    (p,) = rep.shown
    lo, hi = calls_range(rep)
    n = np.logspace(math.log10(lo), math.log10(hi), 300)
    line = np.array([rep.cost_of(p, float(c)) for c in n])
    ax.plot(n, line, color=p["color"], lw=4.0, alpha=0.9, label=_wrapped(f"{p['label']}: {rep.label(p['config'])}"))
    others = [q for q in rep.points if q.config != Config.from_dict(p["config"])]
    for i, q in enumerate(others):
        ax.plot(
            n,
            [rep.cost_of(q, float(c)) for c in n],
            color="#9e9e9e",
            lw=0.9,
            ls=":",
            label=None if i else f"the other {len(others)} config(s) measured (never cheapest)",
        )
    ax.axvline(
        obj.expected_calls,
        color="goldenrod",
        lw=1.5,
        ls="-.",
        label=f"expected_calls = {_select.format_calls(obj.expected_calls)}",
    )
    _star_chosen(rep, ax)
    why = "every other config measured costs more at every count" if others else "it is the only config measured"
    ax.text(
        0.02,
        0.6,
        _wrapped(f"{p['label']} covers every call count: {why}, so no count flips the winner."),
        transform=ax.transAxes,
        ha="left",
        va="center",
        fontsize=9,
        bbox={"boxstyle": "round,pad=0.4", "fc": "#fff8e1", "ec": "#cccccc"},
    )
    ax.set_xscale("log")
    if np.all(line > 0):
        ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylabel("cost (s, log)" if obj.compile_weight == obj.runtime_weight == 1 else "weighted cost (log)")
    ax.set_xlabel("expected calls N per compile (log)")
    ax.grid(True, which="major", alpha=0.3)
    legend(ax, fontsize=7.5, loc="upper left", framealpha=0.9)
    return fig


def figure_crossover(rep: StudyReport):
    """Cost against expected calls, log-log: one line per shown config, crossovers marked.

    A lower panel shows each config's cost relative to the lowest at that N, where
    lines that nearly touch on the log-log plot come apart.
    """
    import numpy as np

    obj = rep.objective
    single = len(rep.shown) == 1
    if single:  # nothing to compare it with: no lower panel of one flat line
        fig = new_figure(8.0, 5.4)
        ax, rel = fig.add_subplot(), None
    else:
        fig = new_figure(8.0, 7.2)
        ax, rel = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.5]})
    ax.set_title(
        f"Cost vs expected calls — {rep.function_key}\n"
        f"cost = {obj.compile_weight:g}·compile + {obj.runtime_weight:g}·N·run; "
        + ("one config is the cheapest at every call count" if single else "thick: where each config is the winner"),
        fontsize=10,
    )
    if not rep.shown:
        empty(ax, "no complete trial: nothing to compare")
        empty(rel, "")
        return fig
    if single:
        return _single_crossover(rep, fig, ax)
    lo, hi = calls_range(rep)
    n = np.logspace(math.log10(lo), math.log10(hi), 300)

    def cost(p, calls):  # the winner rule's cost (median of round costs) at each call count
        return np.array([rep.cost_of(p, float(c)) for c in np.atleast_1d(calls)])

    by_key = {Config.from_dict(p["config"]): p for p in rep.shown}
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
        p = by_key[Config.from_dict(it["config"])]
        a, b = max(it["from_calls"], lo), min(it["to_calls"], hi)
        if b > a:
            seg = np.logspace(math.log10(a), math.log10(b), 60)
            ax.plot(seg, cost(p, seg), color=p["color"], lw=4.0, alpha=0.9, solid_capstyle="butt")
            rel.plot([a, b], [0, 0], color=p["color"], lw=6.0, solid_capstyle="butt")
    if rep.default is not None and Config.from_dict(rep.default["config"]) not in by_key:
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
        y = float(cost(by_key[Config.from_dict(it["config"])], x)[0])
        for panel in (ax, rel):
            panel.axvline(x, color="#444444", lw=0.8, ls="--", alpha=0.6)
        ax.scatter([x], [y], s=60, color="white", edgecolor="black", zorder=5)
        pa = by_key[Config.from_dict(prev["config"])]["label"]
        pb = by_key[Config.from_dict(it["config"])]["label"]
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
    _star_chosen(rep, ax)
    ax.set_xscale("log")
    if positive:
        ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylabel("cost (s, log)" if obj.compile_weight == obj.runtime_weight == 1 else "weighted cost (log)")
    ax.grid(True, which="major", alpha=0.3)
    legend(ax, fontsize=7.5, loc="upper left", framealpha=0.9)
    top = min(max(excess_top, 1.0), 60.0)
    rel.set_ylim(-0.04 * top, top * 1.05)
    rel.set_ylabel("% above the lowest" + (" (clipped)" if excess_top > top else ""), fontsize=9)
    rel.set_xlabel("expected calls N per compile (log)")
    rel.grid(True, which="major", alpha=0.3)
    return fig
