"""The report's per-site and history figures (see :mod:`autotune.report._figures`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from autotune import _display
from autotune import select as _select
from autotune.program._config import Config, site_label
from autotune.report._axes import OUTCOME_STYLE, REASON_CHARS, empty, legend, new_figure, padded, time_unit, wants_log
from autotune.report._data import StudyReport


def _effective_unroll(choice: dict[str, Any], length: int | None) -> int:
    return int(length) if choice.get("repr") == "for" and length else int(choice.get("unroll", 1))


_MARKERS = {"scan": "o", "fori": "s", "for": "^", "while": "D"}
_COLORS = {"scan": "#1f77b4", "fori": "#2ca02c", "for": "#d62728", "while": "#9467bd"}


def _unroll_ticks(length: int | None, seen: set[int]) -> list[int]:
    """Powers of two up to the trip count, the trip count ("for") and every factor seen."""
    top = length if length else max(seen | {2})
    return sorted(
        {1}
        | seen
        | ({length} if length else set())
        | {2**i for i in range(1, max(1, int(math.log2(max(top, 2)))) + 1) if 2**i < top}
    )


def _site_title(names: dict[str, str], site: dict[str, Any]) -> str:
    """``s1 = scan@train.py:42`` for a site with a short name, else its name (an ``at.loop``'s)."""
    short = names.get(site["id"], site["id"])
    return short if short == site["id"] or short == site_label(site) else f"{short} = {site_label(site)}"


def figure_sites(rep: StudyReport):
    """Per tunable loop site: compile and run time against the unroll factor and repr
    (a while loop's factor is the body applications per iteration; it has no "for")."""
    import numpy as np

    sites = rep.tunable_sites
    rows = max(1, len(sites))
    fig = new_figure(9.0, 2.9 * rows + 0.6)
    axes = fig.subplots(rows, 2, squeeze=False)
    fig.suptitle(
        f"Per loop site: unroll factor and representation vs time — {rep.function_key}\n"
        "each point is one measured trial (other sites vary too); lines join the medians; "
        "'for' = fully unrolled",
        fontsize=10,
    )
    measured = [t for t in rep.trials if t.counts and t.compile_total_s is not None and t.run_s is not None]
    if not sites or not measured:
        for ax in axes[0]:
            empty(ax, "no tunable loop site" if not sites else "no measured trial")
        return fig
    ck, cu = time_unit([t.compile_total_s for t in measured] + [rep.chosen["compile_cost_s"]] * bool(rep.chosen))
    rk, ru = time_unit([t.run_s for t in measured] + [rep.chosen["run_cost_s"]] * bool(rep.chosen))
    chosen = rep.chosen["config"] if rep.chosen else {}
    names = _display.site_names(rep.sites)  # the short names every command uses for this function
    for row, site in enumerate(sites):
        sid = site["id"]
        length = None if site.get("length") is None else int(site["length"])
        default = rep.default_config.get(sid, {"repr": "while" if length is None else "scan", "unroll": 1})
        picks = [(t, t.config.get(sid, default)) for t in measured]
        seen = {_effective_unroll(c, length) for _, c in picks}
        metrics = ((("compile_total_s", "compile_cost_s"), ck, cu, "compile"), (("run_s", "run_cost_s"), rk, ru, "run"))
        for col, ((metric, chosen_metric), k, unit, what) in enumerate(metrics):
            ax = axes[row][col]
            for rep_name in _MARKERS:
                pts = [(t, c) for t, c in picks if c.get("repr", "scan") == rep_name]
                if not pts:
                    continue
                x = np.array([_effective_unroll(c, length) for _, c in pts], dtype=float)
                y = np.array([getattr(t, metric) * k for t, _ in pts])
                jitter = np.exp(np.linspace(-0.06, 0.06, len(x))) if len(x) > 1 else np.ones(1)
                ax.scatter(
                    x * jitter,
                    y,
                    marker=_MARKERS[rep_name],
                    color=_COLORS[rep_name],
                    alpha=0.7,
                    s=26,
                    label=rep_name if rep_name != "for" else f"for (= unroll {length})",
                )
                xs = sorted(set(x))
                if len(xs) > 1:
                    ax.plot(xs, [float(np.median(y[x == v])) for v in xs], color=_COLORS[rep_name], lw=1.0, alpha=0.8)
            pick = chosen.get(sid)
            if pick is not None:
                ax.scatter(
                    [_effective_unroll(pick, length)],
                    [rep.chosen[chosen_metric] * k],
                    s=260,
                    marker="*",
                    facecolor="gold",
                    edgecolor="black",
                    zorder=5,
                    label="chosen config" + (" (confirmed median)" if rep.confirmed else ""),
                )
            ax.set_xscale("log", base=2)
            ticks = _unroll_ticks(length, seen)
            ax.set_xticks(ticks)
            ax.set_xticklabels([f"{v}\n(for)" if v == length else str(v) for v in ticks], fontsize=8)
            ax.set_xlim(ticks[0] / 1.5, ticks[-1] * 1.5)
            ax.set_ylabel(f"{what} time ({unit})")
            ax.set_xlabel(
                "unroll factor (body applications per iteration)"
                if length is None
                else "unroll factor (iterations per rolled step)"
            )
            ax.grid(True, alpha=0.25)
            size = "dynamic length" if length is None else f"length {length}"
            ax.set_title(
                _display.shorten(
                    f"{_site_title(names, site)}  [{site.get('kind')}, {size}, depth {site.get('depth', 0)}"
                    + (", derived" if site.get("derived") else "")
                    + f"] — {what}",
                    76,
                ),
                fontsize=9,
            )
            if row == 0 and col == 1:
                legend(ax, fontsize=7.5, loc="best", framealpha=0.9)
    return fig


def reason_lines(trials: Sequence[Any], most: int = 6) -> list[str]:
    """The reasons of the trials that gave no measurement, wrapped at word boundaries."""
    failed = [t for t in trials if t.failed and t.reason]
    lines = []
    for t in failed[:most]:
        wrapped = _display.wrap(
            f"#{t.number} {t.outcome}: {_display.first_sentence(t.reason)}", REASON_CHARS, max_lines=2
        )
        lines += [wrapped[0]] + ["    " + ln for ln in _display.wrap(" ".join(wrapped[1:]), REASON_CHARS - 4)]
    if len(failed) > most:
        lines.append(f"... and {len(failed) - most} more: see the report's trial table")
    return lines


def figure_history(rep: StudyReport):
    """Trial history: each trial's cost and the best so far; the other trials on a strip."""
    trials = sorted(rep.trials, key=lambda t: t.number)
    lines = reason_lines(trials)
    notes = 0.2 + 0.16 * len(lines) if lines else 0.0
    fig = new_figure(8.5, 6.2 + notes)
    if lines:
        ax, strip, text = fig.subplots(3, 1, gridspec_kw={"height_ratios": [3, 1.3, notes * 0.8]})
        strip.sharex(ax)
        text.axis("off")
        note = text.text(
            0.0,
            1.0,
            "\n".join(lines),
            transform=text.transAxes,
            ha="left",
            va="top",
            fontsize=7,
            family="monospace",
            bbox={"boxstyle": "round,pad=0.4", "fc": "#fff8e1", "ec": "#cccccc"},
        )
        note.set_in_layout(False)
    else:
        ax, strip = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    obj = rep.objective
    counts = rep.outcome_counts()
    fig.suptitle(
        f"Trial history — {rep.function_key}\n"
        + ", ".join(f"{n} {o}" for o, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        + f"; cost for {_select.format_calls(obj.expected_calls)} calls",
        fontsize=10,
    )
    scored = [t for t in trials if t.counts and t.cost is not None]
    if scored:
        ax.scatter(
            [t.number for t in scored],
            [t.cost for t in scored],
            s=30,
            color="#1f77b4",
            zorder=3,
            label="measured trial",
        )
        xs, ys, best = [], [], math.inf
        for t in scored:
            best = min(best, t.cost)
            xs.append(t.number)
            ys.append(best)
        xs.append(trials[-1].number + 0.5)
        ys.append(best)
        ax.step(xs, ys, where="post", color="#d62728", lw=2.0, label="best so far (single measurements)", zorder=2)
        confirmed = {Config.from_dict(c["config"]) for c in rep.confirmed}

        def retimed(row: dict[str, Any]) -> str:  # its line is the side-by-side figure, not a trial's
            return " as confirmation re-timed it side by side" if Config.from_dict(row["config"]) in confirmed else ""

        def cost_line(row: dict[str, Any], name: str, **style: Any) -> None:
            label = f"{name}, {_display.cost(row['cost'])}{retimed(row)}"
            ax.axhline(row["cost"], label=label, **style)

        if rep.chosen is not None:
            chosen = Config.from_dict(rep.chosen["config"])
            own = [t for t in scored if Config.from_dict(t.config) == chosen]
            if own:  # the chosen config's own trials: their single measurements vs the line
                ax.scatter(
                    [t.number for t in own],
                    [t.cost for t in own],
                    s=120,
                    facecolor="none",
                    edgecolor="goldenrod",
                    lw=1.8,
                    zorder=4,
                    label=f"the chosen config's trial{'s' * (len(own) > 1)} (one measurement)",
                )
            cost_line(rep.chosen, "chosen", color="goldenrod", lw=1.2, ls="-.")
            if retimed(rep.chosen):
                ax.annotate(
                    "chosen: re-timed in confirmation",
                    (1.0, rep.chosen["cost"]),
                    xycoords=("axes fraction", "data"),
                    xytext=(-4, 3),
                    textcoords="offset points",
                    ha="right",
                    va="bottom",
                    fontsize=7.5,
                    color="#8a6d0b",
                )
        if rep.default is not None:
            cost_line(rep.default, "default", color="#555555", lw=1.0, ls=":")
        shown = [t.cost for t in scored] + [r["cost"] for r in (rep.chosen, rep.default) if r is not None]
        log = wants_log(shown, 10.0)
        if log:
            ax.set_yscale("log")
        ax.set_ylim(*padded(shown, log))
        legend(ax, fontsize=8, loc="best", framealpha=0.9)
    else:
        empty(ax, "no complete trial")
    ax.set_ylabel("cost (s)" if obj.compile_weight == obj.runtime_weight == 1 else "weighted cost")
    ax.grid(True, alpha=0.25)

    outcomes = [o for o in OUTCOME_STYLE if o in counts] + sorted(o for o in counts if o not in OUTCOME_STYLE)
    for yi, outcome in enumerate(outcomes):
        marker, color = OUTCOME_STYLE.get(outcome, ("o", "#7f7f7f"))
        pts = [t.number for t in trials if t.outcome == outcome]
        strip.scatter(pts, [yi] * len(pts), marker=marker, color=color, s=46)
        if outcome not in ("complete", "shared", "duplicate"):
            for t in trials:
                if t.outcome == outcome:
                    strip.annotate(
                        f"#{t.number}",
                        (t.number, yi),
                        xytext=(0, 6),
                        textcoords="offset points",
                        ha="center",
                        fontsize=7,
                        color=color,
                    )
    strip.set_yticks(range(len(outcomes)))
    strip.set_yticklabels([f"{o} ({counts[o]})" for o in outcomes], fontsize=8)
    strip.set_ylim(-0.7, len(outcomes) - 0.3)
    strip.set_xlabel("trial number")
    strip.grid(True, axis="x", alpha=0.25)
    if trials:
        strip.set_xlim(trials[0].number - 0.7, trials[-1].number + 0.7)
    return fig
