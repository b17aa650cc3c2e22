"""The report's PNG figures: matplotlib (Agg, no pyplot state), imported only when drawn.

* ``tradeoff``: compile seconds against run seconds per trial, the Pareto front, the
  chosen config and the default marked, with the curve of equal cost through the chosen;
* ``memory``: run seconds against device memory per trial, the memory budget and the chosen;
* ``crossover``: cost against expected calls (log-log), one line per shown config, the
  stretch where each is the winner drawn thick and the crossovers marked;
* ``sites``: per loop site, compile and run seconds against the unroll factor;
* ``history``: the cost of each trial and the best so far, with failed, rejected,
  pruned, duplicate... trials on a strip below and their reasons (wrapped, never cut
  mid-word).

Costs are :func:`autotune.select.cost` (through ``StudyReport.cost_of``), so the lines
pass through the same numbers the winner rule compares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autotune import _display
from autotune import select as _select
from autotune.program._config import Config
from autotune.report._axes import OUTCOME_STYLE, empty, legend, new_figure, padded, time_unit, wants_log
from autotune.report._crossover import figure_crossover
from autotune.report._data import StudyReport
from autotune.report._history import figure_history, figure_sites

FIGURES = ("tradeoff", "memory", "crossover", "sites", "history")
"""The figures of each study, in page order; each is written as ``<slug>_<name>.png``."""


def _hollow(ax, points: list[dict], scale: tuple[float, float], marker: str, **style) -> None:
    """Outlined markers at the points' compile (x) and run (y) costs, in the axes' units."""
    xk, yk = scale
    ax.scatter(
        [p["compile_cost_s"] * xk for p in points],
        [p["run_cost_s"] * yk for p in points],
        marker=marker,
        facecolor="none",
        **style,
    )


def figure_tradeoff(rep: StudyReport):
    """Compile seconds (x) against run seconds (y): trials, Pareto front, chosen and default."""
    fig = new_figure(8.0, 5.6)
    ax = fig.add_subplot()
    measured = [
        t for t in rep.trials if t.compile_total_s is not None and t.run_s is not None and t.outcome != "duplicate"
    ]
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
        return fig
    xs = [t.compile_total_s for t in measured] + [p["compile_cost_s"] for p in rep.shown + rep.confirmed]
    ys = [t.run_s for t in measured] + [p["run_cost_s"] for p in rep.shown + rep.confirmed]
    xk, xu = time_unit(xs)
    yk, yu = time_unit(ys)
    for outcome in sorted({t.outcome for t in measured}):
        pts = [t for t in measured if t.outcome == outcome]
        marker, color = OUTCOME_STYLE.get(outcome, ("o", "#7f7f7f"))
        name = "trial (complete)" if outcome == "complete" else f"trial ({outcome})"
        ax.scatter(
            [t.compile_total_s * xk for t in pts],
            [t.run_s * yk for t in pts],
            s=28,
            marker=marker,
            color="#b0b0b0" if outcome == "complete" else color,
            alpha=0.9,
            label=name,
            zorder=2,
        )
    medians = {Config.from_dict(c["config"]): c for c in rep.confirmed}
    linked = False
    for t in measured:
        c = medians.get(Config.from_dict(t.config)) if t.counts else None
        if c is not None:
            ax.plot(
                [t.compile_total_s * xk, c["compile_cost_s"] * xk],
                [t.run_s * yk, c["run_cost_s"] * yk],
                color="#9e9e9e",
                lw=0.8,
                ls="-",
                alpha=0.7,
                zorder=1,
                label=None if linked else "trial → confirmed median",
            )
            linked = True
    shown = {Config.from_dict(p["config"]) for p in rep.shown}
    # A confirmed config the lettered markers below do not cover gets its own diamond.
    off = [c for c in rep.confirmed if Config.from_dict(c["config"]) not in shown]
    if off:
        label = "confirmed median (re-measured), not lettered"
        _hollow(ax, off, (xk, yk), "D", s=40, edgecolor="#555555", lw=0.9, zorder=3, label=label)
    if rep.pareto:
        fx = [p["compile_cost_s"] * xk for p in rep.pareto]
        fy = [p["run_cost_s"] * yk for p in rep.pareto]
        ax.step(fx, fy, where="post", color="#333333", lw=1.2, ls="--", zorder=3, label="Pareto front")
    letters = [p["label"] for p in rep.shown]
    for i, p in enumerate(rep.shown):
        ax.scatter(
            [p["compile_cost_s"] * xk],
            [p["run_cost_s"] * yk],
            s=70,
            color=p["color"],
            edgecolor="black",
            lw=0.6,
            zorder=4,
            label=None
            if i
            else f"{letters[0]}"
            + (f"–{letters[-1]}" if len(letters) > 1 else "")
            + (": the configs compared, as re-measured side by side" if rep.confirmed else ": the configs compared"),
        )
        ax.annotate(
            p["label"],
            (p["compile_cost_s"] * xk, p["run_cost_s"] * yk),
            xytext=(6, 5),
            textcoords="offset points",
            fontsize=10,
            fontweight="bold",
            color=p["color"],
            zorder=6,
        )
    calls = _select.format_calls(obj.expected_calls)
    chosen_is_default = (
        rep.chosen is not None
        and rep.default is not None
        and Config.from_dict(rep.chosen["config"]) == Config.from_dict(rep.default["config"])
    )
    if rep.chosen is not None:
        cx, cy = rep.chosen["compile_cost_s"], rep.chosen["run_cost_s"]
        ax.scatter(
            [cx * xk],
            [cy * yk],
            s=320,
            marker="*",
            facecolor="gold",
            edgecolor="black",
            lw=0.8,
            zorder=6,
            label=f"chosen for {calls} calls" + (": the default" if chosen_is_default else ""),
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
                label=f"equal cost at {calls} calls",
            )
    if rep.default is not None:
        # Drawn over the star, and around it when the default is the chosen config, so
        # neither hides the other.
        size = 560 if chosen_is_default else 150
        _hollow(ax, [rep.default], (xk, yk), "s", s=size, edgecolor="#444444", lw=1.4, zorder=7, label="default config")
    if wants_log(xs):
        ax.set_xscale("log")
    if wants_log(ys):
        ax.set_yscale("log")
    ax.set_xlim(*padded([x * xk for x in xs], ax.get_xscale() == "log"))
    ax.set_ylim(*padded([y * yk for y in ys], ax.get_yscale() == "log"))
    ax.set_xlabel(f"compile time per signature: trace + lower + compile ({xu})")
    ax.set_ylabel(f"run time per call, median ({yu})")
    ax.grid(True, which="both", alpha=0.25)
    legend(ax, fontsize=8, loc="best", framealpha=0.9)
    return fig


def figure_memory(rep: StudyReport):
    """Device memory (x) against run seconds (y) per trial: the budget, what is over it, the chosen."""
    fig = new_figure(8.0, 5.0)
    ax = fig.add_subplot()
    measured = [t for t in rep.trials if t.counts and t.run_s is not None and t.memory_bytes is not None]
    limit = rep.objective.budget_bytes
    said = "no memory budget" if limit is None else f"memory budget {_display.memory(limit)}"
    ax.set_title(
        f"Run time vs device memory per trial — {rep.function_key}\n{len(measured)} trials; {said}", fontsize=10
    )
    if not measured:
        empty(ax, "no trial reported its memory")
        return fig
    mk, mu = _memory_unit([t.memory_bytes for t in measured] + ([limit] if limit else []))
    yk, yu = time_unit([t.run_s for t in measured])
    for inside in (True, False):
        pts = [t for t in measured if _select.within(t.memory_bytes, limit) == inside]
        style = {"color": "#4c72b0", "label": "trial"} if inside else {"color": "#c44e52", "label": "over the budget"}
        if pts:
            ax.scatter([t.memory_bytes * mk for t in pts], [t.run_s * yk for t in pts], s=30, zorder=2, **style)
    if limit is not None:
        ax.axvline(limit * mk, color="#c44e52", ls="--", lw=1.0, label="memory budget")
    chosen = None if rep.chosen is None else Config.from_dict(rep.chosen["config"])
    mine = [t for t in measured if chosen is not None and Config.from_dict(t.config) == chosen]
    if mine:
        ax.scatter([mine[0].memory_bytes * mk], [mine[0].run_s * yk], s=320, marker="*", facecolor="gold",
                   edgecolor="black", lw=0.8, zorder=6, label="chosen")  # fmt: skip
    ax.set_xlabel(f"device memory: arguments + outputs + temporaries + code − aliased ({mu})")
    ax.set_ylabel(f"run time per call, median ({yu})")
    ax.grid(True, alpha=0.25)
    legend(ax, fontsize=8, loc="best", framealpha=0.9)
    return fig


def _memory_unit(values: list[int]) -> tuple[float, str]:
    top = max(values)
    unit, size = next(((u, n) for u, n in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)) if top >= n), ("B", 1))
    return 1 / size, unit


FIGURE_DRAWERS: dict[str, Callable[[StudyReport], Any]] = {
    "tradeoff": figure_tradeoff,
    "memory": figure_memory,
    "crossover": figure_crossover,
    "sites": figure_sites,
    "history": figure_history,
}
"""Each figure's drawing: ``StudyReport -> matplotlib Figure`` (not saved)."""


def _saver(draw: Callable[[StudyReport], Any]) -> Callable[[StudyReport, str], str]:
    def save(rep: StudyReport, path: str) -> str:
        draw(rep).savefig(path)
        return path

    return save


FIGURE_MAKERS: dict[str, Callable[[StudyReport, str], str]] = {k: _saver(d) for k, d in FIGURE_DRAWERS.items()}
"""Each figure drawn and written: ``(StudyReport, path) -> path``, a PNG."""

CAPTIONS = {
    "tradeoff": "Each measured trial's compile time (trace + lower + compile, paid once per input signature) "
    "against its median run time per call. The Pareto front (lettered) holds the configs no other beats "
    "on both; the star is the config chosen for the expected call count (framed by the square when it is "
    "the default), the dotted curve the configs that would cost the same.",
    "memory": "Each measured trial's median run time per call against its device memory (arguments + outputs + "
    "temporaries + generated code − aliased bytes, as XLA's memory analysis of the compiled executable reports "
    "them). Under a memory budget (dashed), a config to its right never wins; the star is the chosen config.",
    "crossover": "Total cost against how many times the compiled function runs, one line per config of the "
    "Pareto front (and any other config the winner rule picks somewhere). Each config is the winner "
    "where its line is thick; the circles mark the call counts where the winner "
    "flips. The dash-dot line is the objective's expected_calls. With one config to show, it is the cheapest "
    "at every call count and the other configs measured are drawn faint.",
    "sites": "For each loop site, the compile and run time of every measured trial against that site's unroll factor "
    "and representation (a Python-style 'for' is the full unroll). Other sites vary between the points.",
    "history": "The cost of each complete trial in order and the best so far (single measurements). The chosen "
    "and default lines are their costs as confirmation re-timed them side by side, so the chosen line can sit "
    "above or below its own trial (ringed). The strip below shows every trial's outcome (failed, rejected by "
    "the correctness guard, pruned, duplicate...); reasons are listed in the trial table.",
}
