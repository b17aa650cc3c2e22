"""Reports of tuning studies: tables, PNG figures and one self-contained HTML page.

A report reads an Optuna study written by :func:`autotune.tune` (every trial keeps its
config and its trace/lower/compile/run seconds as user attributes), so it can show the
trade-off for *any* call count without measuring again:

* ``tradeoff``: compile seconds against run seconds per trial, the Pareto front
  highlighted, the chosen config and the default marked, with the curve of equal cost
  through the chosen config;
* ``crossover``: cost against expected calls (log-log), one line per Pareto config, the
  stretch where each is cheapest drawn thick and the crossovers marked;
* ``sites``: per loop site, compile and run seconds against the unroll factor and
  representation;
* ``history``: the cost of each trial and the best so far, with failed, rejected,
  pruned, duplicate... trials on a strip below and their reasons.

matplotlib (Agg, no pyplot state) and optuna are imported only when a report is made.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._config import Config, choice_label, config_label, site_label
from ._errors import StudyError
from ._objective import Objective
from . import _select
from ._select import crossover_intervals, format_calls, intervals_json, pareto_front

FIGURES = ("tradeoff", "crossover", "sites", "history")
"""The figures of each study, in page order; each is written as ``<slug>_<name>.png``."""

OUTCOME_STYLE = {  # marker, colour: every outcome tune() records, and Optuna's own states
    "complete": ("o", "#1f77b4"),
    "duplicate": (".", "#9e9e9e"),
    "rejected": ("X", "#d62728"),
    "fail": ("x", "#d62728"),
    "timeout": ("v", "#ff7f0e"),
    "crashed": ("D", "#8c564b"),
    "oom": ("P", "#8c564b"),
    "error": ("x", "#d62728"),
    "shared": ("o", "#17becf"),
    "interrupted": ("|", "#7f7f7f"),
    "abandoned": ("|", "#7f7f7f"),
    "pruned": ("s", "#9467bd"),
    "running": ("|", "#bcbd22"),
    "waiting": ("|", "#c7c7c7"),
}
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#17becf", "#bcbd22", "#7f7f7f")


# ---------------------------------------------------------------------------- data


@dataclass
class TrialRow:
    """One trial as a report shows it (seconds are None where nothing was measured)."""

    number: int
    outcome: str
    config: dict[str, Any]
    reason: str | None = None
    trace_s: float | None = None
    lower_s: float | None = None
    xla_compile_s: float | None = None
    run_s: float | None = None
    cost: float | None = None
    duration_s: float | None = None

    @property
    def compile_s(self) -> float | None:
        """trace + lower + compile seconds: everything paid once per signature."""
        if self.trace_s is None:
            return None
        return self.trace_s + (self.lower_s or 0.0) + (self.xla_compile_s or 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "outcome": self.outcome, "config": self.config, "reason": self.reason,
                "trace_s": self.trace_s, "lower_s": self.lower_s, "xla_compile_s": self.xla_compile_s,
                "compile_s": self.compile_s, "run_s": self.run_s, "cost": self.cost, "duration_s": self.duration_s}


@dataclass
class StudyReport:
    """Everything a report shows about one study.

    Attributes:
        pareto: the (compile_s, run_s) Pareto set, confirmed medians replacing single
            trials' numbers (as :func:`autotune.tune` computes it), by compile time;
            each item also has ``"label"`` (A, B, C...) and ``"color"``.
        intervals: :func:`autotune._select.crossover_intervals` of ``pareto`` under ``objective``.
        chosen: the config the cache holds for ``objective`` (``config``, ``compile_s``,
            ``run_s``, ``cost``): the confirmation's winner when the study's own objective
            is used, else the cheapest Pareto config (as the decorator re-picks).
        default: the default config's point (confirmed if it was), or None.
    """

    study_name: str
    storage: str
    function_key: str
    device: dict[str, Any]
    objective: Objective
    study_objective: dict[str, Any]
    search: str
    fingerprint: str | None
    sites: list[dict[str, Any]]
    trials: list[TrialRow]
    confirmed: list[dict[str, Any]]
    pareto: list[dict[str, Any]]
    intervals: list[dict[str, Any]]
    chosen: dict[str, Any] | None
    default: dict[str, Any] | None
    default_config: dict[str, Any]
    slug: str = ""
    figures: dict[str, str] = field(default_factory=dict)

    @property
    def tunable_sites(self) -> list[dict[str, Any]]:
        return [s for s in self.sites if int(s.get("length", 0)) > 1]

    def label(self, config: dict[str, Any]) -> str:
        """A short readable form of a config: ``algo_iters=for, scan@f.py:53=scan×2``."""
        return config_label(config, self.sites)

    def outcome_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for t in self.trials:
            counts[t.outcome] = counts.get(t.outcome, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """The report's data as strict JSON-able dicts (an unbounded interval ends at null)."""
        return {
            "study_name": self.study_name, "storage": self.storage, "function_key": self.function_key,
            "device": self.device, "objective": self.objective.to_dict(), "study_objective": self.study_objective,
            "search": self.search, "fingerprint": self.fingerprint, "sites": self.sites,
            "default_config": self.default_config, "chosen": self.chosen, "default": self.default,
            "pareto": [{**p, "optimal": [[a, None if b == math.inf else b] for a, b in p.get("optimal", [])]}
                       for p in self.pareto],
            "crossovers": intervals_json(self.intervals), "confirmed": [
                {k: v for k, v in c.items() if k != "measurement"} for c in self.confirmed],
            "trials": [t.to_dict() for t in self.trials], "figures": self.figures,
        }


def _config_key(config: Any) -> str:
    return Config.from_dict(config).to_json()


def _float(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _slug(function_key: str, study_name: str) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", "_", function_key.split(":")[-1]).strip("_")[:40] or "study"
    return f"{base}-{hashlib.sha1(study_name.encode()).hexdigest()[:6]}"


def _trial_row(trial, objective: Objective) -> TrialRow:
    attrs = trial.user_attrs
    try:
        config = Config.from_json(attrs["config"]).to_dict() if attrs.get("config") else {}
    except Exception:
        config = {}
    outcome = attrs.get("outcome") or trial.state.name.lower()
    m = attrs.get("measurement") or {}
    row = TrialRow(number=trial.number, outcome=outcome, config=config, reason=attrs.get("reason"),
                   trace_s=_float(m.get("trace_s")), lower_s=_float(m.get("lower_s")),
                   xla_compile_s=_float(m.get("compile_s")), run_s=_float(m.get("run_s")))
    if trial.datetime_start is not None and trial.datetime_complete is not None:
        row.duration_s = (trial.datetime_complete - trial.datetime_start).total_seconds()
    if row.compile_s is not None and row.run_s is not None:
        row.cost = objective.cost_of(row.compile_s, row.run_s)
    return row


def load_study_report(study_name: str, storage: str, *, expected_calls: float | None = None,
                      compile_weight: float | None = None, runtime_weight: float | None = None) -> StudyReport:
    """Read one study and compute its Pareto set, crossovers and chosen config.

    Arguments:
        study_name: the Optuna study's name.
        storage: its storage URL (or a SQLite file path).
        expected_calls, compile_weight, runtime_weight: re-score for this objective;
            None keeps the study's own (its ``objective`` user attribute).

    Returns:
        A :class:`StudyReport`.
    """
    import optuna

    from ._paths import storage_url

    url = storage_url(storage)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=study_name, storage=url)
    except KeyError:
        names = optuna.study.get_all_study_names(storage=url)
        raise StudyError(f"No study {study_name!r} in {url}; it has {len(names)} "
                         f"stud{'y' if len(names) == 1 else 'ies'}: {names[:10]}.") from None
    attrs = study.user_attrs
    own = dict(attrs.get("objective") or {})
    objective = Objective(
        expected_calls=float(expected_calls if expected_calls is not None else own.get("expected_calls", 1000)),
        compile_weight=float(compile_weight if compile_weight is not None else own.get("compile_weight", 1.0)),
        runtime_weight=float(runtime_weight if runtime_weight is not None else own.get("runtime_weight", 1.0)),
    )
    sites = [dict(s) for s in attrs.get("sites") or []]
    default_config = {s["id"]: dict(s.get("default") or {"repr": "scan", "unroll": 1})
                      for s in sites if int(s.get("length", 0)) > 1}
    trials = [_trial_row(t, objective) for t in study.get_trials(deepcopy=False)]

    if attrs.get("default_config") is not None:
        default_config = dict(attrs["default_config"])

    # Exactly what tune() decided on: the confirmed points (with their paired rounds), judged
    # by the one selection rule; a study without confirmation falls back to its trials.
    confirmed = [dict(c) for c in attrs.get("confirmed") or []]
    points = confirmed or [{"config": t.config, "compile_s": t.compile_s, "run_s": t.run_s} for t in trials
                           if t.outcome in ("complete", "shared") and t.compile_s is not None and t.run_s is not None]
    for c in confirmed:
        c["cost"] = _select.cost(c, objective)
    pareto = [dict(p) for p in pareto_front(points)]
    for i, p in enumerate(pareto):
        p["label"] = _letter(i)
        p["color"] = _PALETTE[i % len(_PALETTE)]
    intervals = crossover_intervals(points, objective.compile_weight, objective.runtime_weight,
                                    default=default_config if confirmed else None)
    for p in pareto:
        p["optimal"] = [[it["from_calls"], it["to_calls"]] for it in intervals
                        if _config_key(it["config"]) == _config_key(p["config"])]
    default_key = _config_key(default_config)
    choice = _select.choose(points, objective, default=default_config if confirmed else None,
                            complete=attrs.get("complete_range"))
    chosen = None if choice is None else {"config": choice.config, "compile_s": choice.compile_s,
                                          "run_s": choice.run_s, "cost": choice.cost, "in_range": choice.in_range}
    default = next((p for p in points if _config_key(p["config"]) == default_key), None)
    if default is not None:
        default = {**default, "cost": _select.cost(default, objective)}
    return StudyReport(
        study_name=study.study_name, storage=url, function_key=str(attrs.get("function_key", "?")),
        device=dict(attrs.get("device") or {}), objective=objective, study_objective=own,
        search=str(attrs.get("search", "pareto" if len(study.directions) > 1 else "cost")),
        fingerprint=attrs.get("fingerprint"), sites=sites, trials=trials, confirmed=confirmed, pareto=pareto,
        intervals=intervals, chosen=chosen, default=default, default_config=default_config,
        slug=_slug(str(attrs.get("function_key", "study")), study.study_name),
    )


def _letter(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def study_summaries(storage: str) -> list[Any]:
    """Optuna's summaries of every study in a storage (refusing to create a missing SQLite file)."""
    import optuna

    from ._paths import storage_url

    url = storage_url(storage)
    if url.startswith("sqlite:///") and ":memory:" not in url and not os.path.exists(url[len("sqlite:///"):]):
        raise StudyError(f"There is no study storage at {url}: run `autotune tune FILE` first, or pass "
                         "--storage (or --cache) to point at the one it used.")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.get_all_study_summaries(storage=url, include_best_trial=False)


def studies_for_file(path: str, storage: str, *, all_programs: bool = False) -> list[str]:
    """The studies in ``storage`` of the functions a study file tunes.

    A study belongs to a function when its ``function_key`` user attribute is the
    function's key. Of those, the studies of the current program (same fingerprint)
    are returned, the one :func:`autotune._keys.study_name` derives for the
    decorator's objective first; studies of older versions of the function only when
    there are no current ones or ``all_programs`` is set.
    """
    from ._keys import device_info, program_key, study_name
    from ._studyfile import load_examples

    wanted: dict[str, set[str]] = {}
    preferred: list[str] = []
    device = device_info()
    for ex in load_examples(path):
        program, signature = program_key(ex.fn.fun, ex.args, ex.kwargs, ex.fn.jit_kwargs)
        wanted.setdefault(ex.fn.key, set()).add(program.fingerprint)
        obj = Objective(ex.fn.expected_calls, ex.fn.compile_weight, ex.fn.runtime_weight)
        for search in ("cost", "pareto"):
            preferred.append(study_name(ex.fn.key, program.fingerprint, signature, device, obj, search))
    matches = [s for s in study_summaries(storage) if s.user_attrs.get("function_key") in wanted]
    current = [s for s in matches if s.user_attrs.get("fingerprint") in wanted[s.user_attrs["function_key"]]]
    chosen = matches if (all_programs or not current) else current
    rank = {name: i for i, name in enumerate(preferred)}
    return [s.study_name for s in sorted(chosen, key=lambda s: (rank.get(s.study_name, len(rank)), s.study_name))]


# ---------------------------------------------------------------------------- figures


def _time_unit(values: Sequence[float]) -> tuple[float, str]:
    """Scale and unit name so that the largest value reads well."""
    top = max((abs(v) for v in values if v is not None), default=1.0)
    if top < 1e-3:
        return 1e6, "µs"
    if top < 1.0:
        return 1e3, "ms"
    return 1.0, "s"


def _wants_log(values: Sequence[float], ratio: float = 20.0) -> bool:
    vals = [v for v in values if v is not None and v > 0]
    return bool(vals) and max(vals) / min(vals) > ratio


def _new_figure(width: float, height: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    return fig


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#666666")
    ax.set_xticks([])
    ax.set_yticks([])


def figure_tradeoff(rep: StudyReport, path: str) -> str:
    """Compile seconds (x) against run seconds (y): trials, Pareto front, chosen and default."""
    fig = _new_figure(8.0, 5.6)
    ax = fig.add_subplot()
    measured = [t for t in rep.trials if t.compile_s is not None and t.run_s is not None and t.outcome != "duplicate"]
    obj = rep.objective
    front = ("no Pareto front" if not rep.pareto else f"Pareto front {rep.pareto[0]['label']}"
             + (f"–{rep.pareto[-1]['label']}" if len(rep.pareto) > 1 else ""))
    ax.set_title(f"Compile vs run time per trial — {rep.function_key}\n"
                 f"{len(measured)} measured trials; {front}; chosen for {format_calls(obj.expected_calls)} calls",
                 fontsize=10)
    if not measured and not rep.pareto:
        _empty(ax, "no trial was measured")
        fig.savefig(path)
        return path
    xs = [t.compile_s for t in measured] + [p["compile_s"] for p in rep.pareto] + [c["compile_s"] for c in rep.confirmed]
    ys = [t.run_s for t in measured] + [p["run_s"] for p in rep.pareto] + [c["run_s"] for c in rep.confirmed]
    xk, xu = _time_unit(xs)
    yk, yu = _time_unit(ys)
    for outcome in sorted({t.outcome for t in measured}):
        pts = [t for t in measured if t.outcome == outcome]
        marker, color = OUTCOME_STYLE.get(outcome, ("o", "#7f7f7f"))
        name = "trial (complete)" if outcome == "complete" else f"trial ({outcome})"
        ax.scatter([t.compile_s * xk for t in pts], [t.run_s * yk for t in pts], s=28, marker=marker,
                   color="#b0b0b0" if outcome == "complete" else color, alpha=0.9, label=name, zorder=2)
    medians = {_config_key(c["config"]): c for c in rep.confirmed}
    linked = False
    for t in measured:
        c = medians.get(_config_key(t.config)) if t.outcome == "complete" else None
        if c is not None:
            ax.plot([t.compile_s * xk, c["compile_s"] * xk], [t.run_s * yk, c["run_s"] * yk], color="#9e9e9e",
                    lw=0.8, ls="-", alpha=0.7, zorder=1, label=None if linked else "trial → confirmed median")
            linked = True
    if rep.confirmed:
        ax.scatter([c["compile_s"] * xk for c in rep.confirmed], [c["run_s"] * yk for c in rep.confirmed], s=40,
                   marker="D", facecolor="none", edgecolor="#555555", lw=0.9, zorder=3,
                   label="confirmed median (re-measured)")
    if rep.pareto:
        fx = [p["compile_s"] * xk for p in rep.pareto]
        fy = [p["run_s"] * yk for p in rep.pareto]
        ax.step(fx, fy, where="post", color="#333333", lw=1.2, ls="--", zorder=3, label="Pareto front")
        for p in rep.pareto:
            ax.scatter([p["compile_s"] * xk], [p["run_s"] * yk], s=70, color=p["color"], edgecolor="black",
                       lw=0.6, zorder=4)
            ax.annotate(p["label"], (p["compile_s"] * xk, p["run_s"] * yk), xytext=(6, 5),
                        textcoords="offset points", fontsize=10, fontweight="bold", color=p["color"], zorder=6)
    if rep.default is not None:
        ax.scatter([rep.default["compile_s"] * xk], [rep.default["run_s"] * yk], s=150, marker="s",
                   facecolor="none", edgecolor="#444444", lw=1.4, zorder=5, label="default config")
    if rep.chosen is not None:
        cx, cy = rep.chosen["compile_s"], rep.chosen["run_s"]
        ax.scatter([cx * xk], [cy * yk], s=320, marker="*", facecolor="gold", edgecolor="black", lw=0.8,
                   zorder=7, label=f"chosen for {format_calls(obj.expected_calls)} calls")
        # Configs on this curve cost the same as the chosen one: cw*c + rw*N*r = C.
        if obj.runtime_weight > 0 and obj.expected_calls > 0:
            import numpy as np

            lo, hi = min(xs), max(xs)
            span = np.linspace(max(0.0, lo - 0.05 * (hi - lo)), hi + 0.05 * (hi - lo), 200)
            iso = (rep.chosen["cost"] - obj.compile_weight * span) / (obj.runtime_weight * obj.expected_calls)
            keep = iso > 0
            ax.plot(span[keep] * xk, iso[keep] * yk, color="goldenrod", lw=1.0, ls=":", zorder=1,
                    label=f"equal cost at {format_calls(obj.expected_calls)} calls")
    if _wants_log(xs):
        ax.set_xscale("log")
    if _wants_log(ys):
        ax.set_yscale("log")
    ax.set_xlim(*_padded([x * xk for x in xs], ax.get_xscale() == "log"))
    ax.set_ylim(*_padded([y * yk for y in ys], ax.get_yscale() == "log"))
    ax.set_xlabel(f"compile time per signature: trace + lower + compile ({xu})")
    ax.set_ylabel(f"run time per call, median ({yu})")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="best", framealpha=0.9)
    fig.savefig(path)
    return path


def _padded(values: Sequence[float], log: bool) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if log:
        return lo / 1.25, hi * 1.25
    pad = (hi - lo) * 0.08 or abs(hi) * 0.1 or 1.0
    return max(0.0, lo - pad) if lo >= 0 else lo - pad, hi + pad


def calls_range(rep: StudyReport) -> tuple[float, float]:
    """The expected-calls axis of the crossover figure: every crossover and the objective's N inside."""
    marks = [it["from_calls"] for it in rep.intervals if it["from_calls"] > 0] + [rep.objective.expected_calls]
    marks = [m for m in marks if m > 0] or [1.0]
    lo = 10.0 ** (math.floor(math.log10(min(min(marks), 10.0))) - 1)
    hi = 10.0 ** (math.ceil(math.log10(max(max(marks), 1e4))) + 1)
    return lo, hi


def figure_crossover(rep: StudyReport, path: str) -> str:
    """Cost against expected calls, log-log: one line per Pareto config, crossovers marked.

    A lower panel shows each config's cost relative to the cheapest at that N, where
    lines that nearly touch on the log-log plot come apart.
    """
    import numpy as np

    fig = _new_figure(8.0, 7.2)
    ax, rel = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.5]})
    obj = rep.objective
    ax.set_title(f"Cost vs expected calls — {rep.function_key}\n"
                 f"cost = {obj.compile_weight:g}·compile + {obj.runtime_weight:g}·N·run; "
                 "thick: where each config is cheapest", fontsize=10)
    if not rep.pareto:
        _empty(ax, "no complete trial: nothing to compare")
        _empty(rel, "")
        fig.savefig(path)
        return path
    lo, hi = calls_range(rep)
    n = np.logspace(math.log10(lo), math.log10(hi), 600)

    def cost(p, calls):
        return obj.compile_weight * p["compile_s"] + obj.runtime_weight * calls * p["run_s"]

    by_key = {_config_key(p["config"]): p for p in rep.pareto}
    envelope = np.min([cost(p, n) for p in rep.pareto], axis=0)
    positive = bool(np.all(envelope > 0))
    excess_top = 0.0
    for p in rep.pareto:
        never = not p["optimal"]
        ax.plot(n, cost(p, n), color=p["color"], lw=1.0, ls=":" if never else "-", alpha=0.8,
                label=f"{p['label']}: {rep.label(p['config'])}" + ("  (never cheapest)" if never else ""))
        if positive:
            excess = 100.0 * (cost(p, n) / envelope - 1.0)
            rel.plot(n, excess, color=p["color"], lw=1.4, ls=":" if never else "-")
            excess_top = max(excess_top, float(np.max(excess)))
    for it in rep.intervals:
        p = by_key[_config_key(it["config"])]
        a, b = max(it["from_calls"], lo), min(it["to_calls"], hi)
        if b > a:
            seg = np.logspace(math.log10(a), math.log10(b), 100)
            ax.plot(seg, cost(p, seg), color=p["color"], lw=4.0, alpha=0.9, solid_capstyle="butt")
            rel.plot([a, b], [0, 0], color=p["color"], lw=6.0, solid_capstyle="butt")
    if rep.default is not None and _config_key(rep.default["config"]) not in by_key:
        ax.plot(n, cost(rep.default, n), color="#555555", lw=1.0, ls="--", label="default config (not on the front)")
        if positive:
            excess = 100.0 * (cost(rep.default, n) / envelope - 1.0)
            rel.plot(n, excess, color="#555555", lw=1.0, ls="--")
            excess_top = max(excess_top, float(np.max(excess)))
    # The crossovers: where the cheapest config changes.
    for prev, it in zip(rep.intervals, rep.intervals[1:]):
        x = it["from_calls"]
        if not lo <= x <= hi:
            continue
        y = cost(by_key[_config_key(it["config"])], x)
        for panel in (ax, rel):
            panel.axvline(x, color="#444444", lw=0.8, ls="--", alpha=0.6)
        ax.scatter([x], [y], s=60, color="white", edgecolor="black", zorder=5)
        pa, pb = by_key[_config_key(prev["config"])]["label"], by_key[_config_key(it["config"])]["label"]
        ax.annotate(f"{pa}→{pb}\nN≈{format_calls(x)}", (x, y), xytext=(6, -26), textcoords="offset points",
                    fontsize=8.5, bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#999999", "alpha": 0.9})
    for panel in (ax, rel):
        panel.axvline(obj.expected_calls, color="goldenrod", lw=1.5, ls="-.",
                      label=f"expected_calls = {format_calls(obj.expected_calls)}" if panel is ax else None)
    if rep.chosen is not None and obj.expected_calls > 0:
        ax.scatter([obj.expected_calls], [cost(rep.chosen, obj.expected_calls)], s=260, marker="*",
                   facecolor="gold", edgecolor="black", zorder=6, label="chosen")
    ax.set_xscale("log")
    if positive:
        ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylabel("cost (s, log)" if obj.compile_weight == obj.runtime_weight == 1 else "weighted cost (log)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left", framealpha=0.9)
    top = min(max(excess_top, 1.0), 60.0)
    rel.set_ylim(-0.04 * top, top * 1.05)
    rel.set_ylabel("% above cheapest" + (" (clipped)" if excess_top > top else ""), fontsize=9)
    rel.set_xlabel("expected calls N per compile (log)")
    rel.grid(True, which="major", alpha=0.3)
    fig.savefig(path)
    return path


def _effective_unroll(choice: dict[str, Any], length: int) -> int:
    return int(length) if choice.get("repr") == "for" else int(choice.get("unroll", 1))


def figure_sites(rep: StudyReport, path: str) -> str:
    """Per tunable loop site: compile and run time against the unroll factor and repr."""
    import numpy as np

    sites = rep.tunable_sites
    rows = max(1, len(sites))
    fig = _new_figure(9.0, 2.9 * rows + 0.6)
    axes = fig.subplots(rows, 2, squeeze=False)
    fig.suptitle(f"Per loop site: unroll factor and representation vs time — {rep.function_key}\n"
                 "each point is one measured trial (other sites vary too); lines join the medians; "
                 "'for' = fully unrolled", fontsize=10)
    measured = [t for t in rep.trials if t.outcome == "complete" and t.compile_s is not None and t.run_s is not None]
    if not sites or not measured:
        for ax in axes[0]:
            _empty(ax, "no tunable loop site" if not sites else "no measured trial")
        fig.savefig(path)
        return path
    ck, cu = _time_unit([t.compile_s for t in measured] + [rep.chosen["compile_s"]] * bool(rep.chosen))
    rk, ru = _time_unit([t.run_s for t in measured] + [rep.chosen["run_s"]] * bool(rep.chosen))
    markers = {"scan": "o", "fori": "s", "for": "^"}
    colors = {"scan": "#1f77b4", "fori": "#2ca02c", "for": "#d62728"}
    chosen = rep.chosen["config"] if rep.chosen else {}
    for row, site in enumerate(sites):
        sid, length = site["id"], int(site["length"])
        default = rep.default_config.get(sid, {"repr": "scan", "unroll": 1})
        for col, (metric, k, unit, what) in enumerate((("compile_s", ck, cu, "compile"), ("run_s", rk, ru, "run"))):
            ax = axes[row][col]
            for rep_name in ("scan", "fori", "for"):
                pts = [(t, t.config.get(sid, default)) for t in measured]
                pts = [(t, c) for t, c in pts if c.get("repr", "scan") == rep_name]
                if not pts:
                    continue
                x = np.array([_effective_unroll(c, length) for _, c in pts], dtype=float)
                y = np.array([getattr(t, metric) * k for t, _ in pts])
                jitter = np.exp(np.linspace(-0.06, 0.06, len(x))) if len(x) > 1 else np.ones(1)
                ax.scatter(x * jitter, y, marker=markers[rep_name], color=colors[rep_name], alpha=0.7, s=26,
                           label=rep_name if rep_name != "for" else f"for (= unroll {length})")
                xs = sorted(set(x))
                if len(xs) > 1:
                    ax.plot(xs, [float(np.median(y[x == v])) for v in xs], color=colors[rep_name], lw=1.0, alpha=0.8)
            pick = chosen.get(sid)
            if pick is not None:
                ax.scatter([_effective_unroll(pick, length)], [rep.chosen[metric] * k], s=260, marker="*",
                           facecolor="gold", edgecolor="black", zorder=5,
                           label="chosen config" + (" (confirmed median)" if rep.confirmed else ""))
            ax.set_xscale("log", base=2)
            ticks = sorted({1, length} | {2 ** i for i in range(1, max(1, int(math.log2(max(length, 2)))) + 1)
                                          if 2 ** i < length})
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(v) if v != length else f"{v}\n(for)" for v in ticks], fontsize=8)
            ax.set_xlim(ticks[0] / 1.5, ticks[-1] * 1.5)
            ax.set_ylabel(f"{what} time ({unit})")
            ax.set_xlabel("unroll factor (iterations per rolled step)")
            ax.grid(True, alpha=0.25)
            ax.set_title(f"{site_label(site)}  [{site.get('kind')}, length {length}, depth {site.get('depth', 0)}]"
                         f" — {what}", fontsize=9)
            if row == 0 and col == 1:
                ax.legend(fontsize=7.5, loc="best", framealpha=0.9)
    fig.savefig(path)
    return path


def figure_history(rep: StudyReport, path: str) -> str:
    """Trial history: each trial's cost and the best so far; non-complete trials on a strip."""
    trials = sorted(rep.trials, key=lambda t: t.number)
    reasons = [t for t in trials if t.outcome not in ("complete", "duplicate") and t.reason]
    lines = [_one_line(f"#{t.number} {t.outcome}: {t.reason}", 112) for t in reasons[:6]]
    if len(reasons) > 6:
        lines.append(f"... and {len(reasons) - 6} more: see the report's trial table")
    notes = 0.2 + 0.16 * len(lines) if lines else 0.0
    fig = _new_figure(8.5, 6.2 + notes)
    if lines:
        ax, strip, text = fig.subplots(3, 1, gridspec_kw={"height_ratios": [3, 1.3, notes * 0.8]})
        strip.sharex(ax)
        text.axis("off")
        note = text.text(0.0, 1.0, "\n".join(lines), transform=text.transAxes, ha="left", va="top", fontsize=7,
                         family="monospace", bbox={"boxstyle": "round,pad=0.4", "fc": "#fff8e1", "ec": "#cccccc"})
        note.set_in_layout(False)
    else:
        ax, strip = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    obj = rep.objective
    counts = rep.outcome_counts()
    fig.suptitle(f"Trial history — {rep.function_key}\n"
                 + ", ".join(f"{n} {o}" for o, n in sorted(counts.items(), key=lambda kv: -kv[1]))
                 + f"; cost for {format_calls(obj.expected_calls)} calls", fontsize=10)
    scored = [t for t in trials if t.outcome == "complete" and t.cost is not None]
    if scored:
        ax.scatter([t.number for t in scored], [t.cost for t in scored], s=30, color="#1f77b4", zorder=3,
                   label="complete trial")
        xs, ys, best = [], [], math.inf
        for t in scored:
            best = min(best, t.cost)
            xs.append(t.number)
            ys.append(best)
        xs.append(trials[-1].number + 0.5)
        ys.append(best)
        ax.step(xs, ys, where="post", color="#d62728", lw=2.0, label="best so far (single measurements)", zorder=2)
        if rep.chosen is not None:
            ax.axhline(rep.chosen["cost"], color="goldenrod", lw=1.2, ls="-.",
                       label=f"chosen after confirmation: {rep.chosen['cost']:.4g}")
        if rep.default is not None:
            ax.axhline(rep.default["cost"], color="#555555", lw=1.0, ls=":", label=f"default: {rep.default['cost']:.4g}")
        shown = [t.cost for t in scored] + [r["cost"] for r in (rep.chosen, rep.default) if r is not None]
        log = _wants_log(shown, 10.0)
        if log:
            ax.set_yscale("log")
        ax.set_ylim(*_padded(shown, log))
        ax.legend(fontsize=8, loc="best", framealpha=0.9)
    else:
        _empty(ax, "no complete trial")
    ax.set_ylabel("cost (s)" if obj.compile_weight == obj.runtime_weight == 1 else "weighted cost")
    ax.grid(True, alpha=0.25)

    outcomes = [o for o in OUTCOME_STYLE if o in counts] + sorted(o for o in counts if o not in OUTCOME_STYLE)
    for yi, outcome in enumerate(outcomes):
        marker, color = OUTCOME_STYLE.get(outcome, ("o", "#7f7f7f"))
        pts = [t.number for t in trials if t.outcome == outcome]
        strip.scatter(pts, [yi] * len(pts), marker=marker, color=color, s=46)
        if outcome not in ("complete", "duplicate"):
            for t in trials:
                if t.outcome == outcome:
                    strip.annotate(f"#{t.number}", (t.number, yi), xytext=(0, 6), textcoords="offset points",
                                   ha="center", fontsize=7, color=color)
    strip.set_yticks(range(len(outcomes)))
    strip.set_yticklabels([f"{o} ({counts[o]})" for o in outcomes], fontsize=8)
    strip.set_ylim(-0.7, len(outcomes) - 0.3)
    strip.set_xlabel("trial number")
    strip.grid(True, axis="x", alpha=0.25)
    if trials:
        strip.set_xlim(trials[0].number - 0.7, trials[-1].number + 0.7)
    fig.savefig(path)
    return path


def _one_line(text: str | None, limit: int) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


FIGURE_MAKERS: dict[str, Callable[[StudyReport, str], str]] = {
    "tradeoff": figure_tradeoff, "crossover": figure_crossover, "sites": figure_sites, "history": figure_history,
}

CAPTIONS = {
    "tradeoff": "Each measured trial's compile time (trace + lower + compile, paid once per input signature) "
                "against its median run time per call. The Pareto front (lettered) holds the configs no other beats "
                "on both; the star is the config chosen for the expected call count, the dotted curve the configs "
                "that would cost the same.",
    "crossover": "Total cost against how many times the compiled function runs, one line per Pareto config. "
                 "Each config is cheapest where its line is thick; the circles mark the call counts where the winner "
                 "flips. The dash-dot line is the objective's expected_calls.",
    "sites": "For each loop site, the compile and run time of every measured trial against that site's unroll factor "
             "and representation (a Python-style 'for' is the full unroll). Other sites vary between the points.",
    "history": "The cost of each complete trial in order and the best so far. The strip below shows every trial's "
               "outcome (failed, rejected by the correctness guard, pruned, duplicate...); reasons are listed in the "
               "trial table.",
}


# ---------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{font-size:1.5em} h2{font-size:1.25em;border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:2em}
h3{font-size:1.05em;margin-top:1.4em} table{border-collapse:collapse;margin:8px 0;font-size:0.88em}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top} th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums} .swatch{display:inline-block;width:11px;height:11px;
border-radius:2px;margin-right:4px;vertical-align:middle} figure{margin:12px 0} figure img{max-width:100%;
border:1px solid #eee} figcaption{font-size:0.85em;color:#555;max-width:900px} code{font-size:0.9em}
.muted{color:#777} .bad{color:#b71c1c} tr.chosen td{background:#fff8e1} .reason{max-width:520px;white-space:pre-wrap;
font-family:ui-monospace,monospace;font-size:0.85em}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(x: float | None, scale: float = 1.0, digits: int = 4) -> str:
    return "-" if x is None else f"{x * scale:.{digits}g}"


def _interval_text(p: dict[str, Any]) -> str:
    if not p.get("optimal"):
        return "never cheapest"
    return "; ".join(f"[{format_calls(a)}, {format_calls(b)})" for a, b in p["optimal"])


def _study_html(rep: StudyReport, images: dict[str, str]) -> str:
    obj = rep.objective
    counts = rep.outcome_counts()
    chosen_key = _config_key(rep.chosen["config"]) if rep.chosen else None
    default_key = _config_key(rep.default_config)
    parts = [f'<h2 id="{_e(rep.slug)}">{_e(rep.function_key)}</h2>',
             "<table>",
             f"<tr><th>study</th><td><code>{_e(rep.study_name)}</code></td></tr>",
             f"<tr><th>storage</th><td><code>{_e(rep.storage)}</code></td></tr>",
             f"<tr><th>device</th><td>{_e(rep.device.get('platform', '?'))} / {_e(rep.device.get('device_kind', '?'))}"
             f" ×{_e(rep.device.get('device_count', '?'))}, jax {_e(rep.device.get('jax', '?'))}</td></tr>",
             f"<tr><th>search</th><td>{_e(rep.search)}"
             f"{' (NSGA-II on compile and run seconds)' if rep.search == 'pareto' else ' (weighted cost)'}</td></tr>",
             f"<tr><th>objective</th><td>cost = {obj.compile_weight:g}·compile + {obj.runtime_weight:g}·"
             f"{format_calls(obj.expected_calls)}·run"
             + ("" if rep.study_objective.get("expected_calls") in (None, obj.expected_calls)
                else f" <span class='muted'>(re-scored; the study was tuned for "
                     f"{format_calls(float(rep.study_objective['expected_calls']))} calls)</span>")
             + "</td></tr>",
             "<tr><th>trials</th><td>" + ", ".join(f"{n} {_e(o)}" for o, n in sorted(counts.items(), key=lambda kv: -kv[1]))
             + "</td></tr>"]
    if rep.chosen:
        speed = ""
        if rep.default and rep.chosen["cost"] > 0:
            speed = f" — {rep.default['cost'] / rep.chosen['cost']:.2f}× cheaper than the default ({rep.default['cost']:.4g})"
        parts.append(f"<tr><th>chosen</th><td><b>{_e(rep.label(rep.chosen['config']))}</b>, cost "
                     f"{rep.chosen['cost']:.4g}{_e(speed)}</td></tr>")
    parts.append("</table>")

    parts.append("<h3>Which config for how many calls</h3>")
    if rep.pareto:
        parts.append("<table><tr><th></th><th>config</th><th>compile s</th><th>run µs</th>"
                     f"<th>cost at {_e(format_calls(obj.expected_calls))} calls</th><th>cheapest for calls in</th></tr>")
        for p in rep.pareto:
            key = _config_key(p["config"])
            tags = (" ★ chosen" if key == chosen_key else "") + (" (default)" if key == default_key else "") + \
                   ("" if p.get("confirmed") else " <span class='muted'>(single trial)</span>")
            row_class = " class='chosen'" if key == chosen_key else ""
            parts.append(
                f"<tr{row_class}><td><span class='swatch' style='background:"
                f"{_e(p['color'])}'></span><b>{_e(p['label'])}</b></td><td>{_e(rep.label(p['config']))}{tags}</td>"
                f"<td class='num'>{_num(p['compile_s'])}</td><td class='num'>{_num(p['run_s'], 1e6)}</td>"
                f"<td class='num'>{_num(obj.cost_of(p['compile_s'], p['run_s']))}</td>"
                f"<td>{_e(_interval_text(p))}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p class='bad'>No complete trial: no Pareto set.</p>")

    for name in FIGURES:
        if name in images:
            parts.append(f"<figure><img alt='{_e(name)} figure' src='data:image/png;base64,{images[name]}'>"
                         f"<figcaption>{_e(CAPTIONS[name])}</figcaption></figure>")

    if rep.confirmed:
        parts.append("<h3>Confirmation (interleaved re-measurement; medians)</h3><table><tr><th>config</th>"
                     "<th>rounds</th><th>compile s</th><th>run µs</th><th>cost</th></tr>")
        for c in sorted(rep.confirmed, key=lambda c: c["cost"]):
            parts.append(f"<tr><td>{_e(rep.label(c['config']))}</td><td class='num'>{_e(c.get('rounds', '-'))}</td>"
                         f"<td class='num'>{_num(c['compile_s'])}</td><td class='num'>{_num(c['run_s'], 1e6)}</td>"
                         f"<td class='num'>{_num(c['cost'])}</td></tr>")
        parts.append("</table>")

    if rep.tunable_sites:
        parts.append("<h3>Loop sites</h3><table><tr><th>site id</th><th>kind</th><th>length</th><th>depth</th>"
                     "<th>source</th><th>default</th><th>chosen</th></tr>")
        for s in rep.tunable_sites:
            pick = (rep.chosen or {}).get("config", {}).get(s["id"])
            parts.append(f"<tr><td><code>{_e(s['id'])}</code></td><td>{_e(s.get('kind'))}</td>"
                         f"<td class='num'>{_e(s.get('length'))}</td><td class='num'>{_e(s.get('depth', 0))}</td>"
                         f"<td>{_e(s.get('source') or '-')}</td><td>{_e(choice_label(s.get('default') or {}))}</td>"
                         f"<td>{_e(choice_label(pick) if pick else '-')}</td></tr>")
        parts.append("</table>")

    parts.append("<h3>Trials</h3><table><tr><th>#</th><th>outcome</th><th>config</th><th>compile s</th>"
                 "<th>run µs</th><th>cost</th><th>reason</th></tr>")
    for t in sorted(rep.trials, key=lambda t: t.number):
        cls = " class='bad'" if t.outcome not in ("complete", "duplicate") else ""
        parts.append(f"<tr><td class='num'>{t.number}</td><td{cls}>{_e(t.outcome)}</td><td>{_e(rep.label(t.config))}</td>"
                     f"<td class='num'>{_num(t.compile_s)}</td><td class='num'>{_num(t.run_s, 1e6)}</td>"
                     f"<td class='num'>{_num(t.cost)}</td><td class='reason'>{_e(t.reason or '')}</td></tr>")
    parts.append("</table>")
    return "\n".join(parts)


def render_html(reports: Sequence[StudyReport], images: dict[str, dict[str, str]], title: str) -> str:
    """One self-contained page: inline CSS, figures as base64 PNG, no script, no external resource."""
    toc = ""
    if len(reports) > 1:
        toc = "<ul>" + "".join(f"<li><a href='#{_e(r.slug)}'>{_e(r.function_key)}</a> "
                               f"<span class='muted'>{_e(r.study_name)}</span></li>" for r in reports) + "</ul>"
    body = "\n".join(_study_html(r, images.get(r.slug, {})) for r in reports)
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{_e(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"
            "<p class='muted'>cost = compile_weight·(trace + lower + compile) + runtime_weight·expected_calls·run. "
            "Generated by jax-autotune from the study's stored trials; nothing was re-measured.</p>"
            f"{toc}{body}</body></html>\n")


# ---------------------------------------------------------------------------- driver


@dataclass
class ReportFiles:
    """What :func:`write_report` wrote."""

    html: str
    figures: list[str]
    data: str
    reports: list[StudyReport]


def write_report(reports: Sequence[StudyReport], out_dir: str, *, title: str | None = None,
                 progress: bool = False) -> ReportFiles:
    """Write ``report.html``, ``report.json`` and four PNG figures per study into ``out_dir``.

    Arguments:
        reports: from :func:`load_study_report`.
        out_dir: created if missing; files of the same names are replaced.
        title: the page title (default names the studies' functions).
        progress: show a rich progress bar on stderr.

    Returns:
        A :class:`ReportFiles` with the paths.
    """
    if not reports:
        raise StudyError("Nothing to report: no study was given.")
    os.makedirs(out_dir, exist_ok=True)
    images: dict[str, dict[str, str]] = {}
    written: list[str] = []
    bar = _progress(progress, len(reports) * len(FIGURES))
    try:
        for rep in reports:
            images[rep.slug] = {}
            for name in FIGURES:
                if bar is not None:
                    bar.update(bar.task_ids[0], description=f"{rep.function_key}: {name}")
                path = os.path.join(out_dir, f"{rep.slug}_{name}.png")
                FIGURE_MAKERS[name](rep, path)
                with open(path, "rb") as f:
                    images[rep.slug][name] = base64.b64encode(f.read()).decode("ascii")
                rep.figures[name] = os.path.basename(path)
                written.append(path)
                if bar is not None:
                    bar.advance(bar.task_ids[0])
    finally:
        if bar is not None:
            bar.stop()
    title = title or ("autotune report: " + ", ".join(dict.fromkeys(r.function_key for r in reports)))
    html_path = os.path.join(out_dir, "report.html")
    with open(html_path, "w", encoding="utf-8") as f:
        f.write(render_html(reports, images, title))
    data_path = os.path.join(out_dir, "report.json")
    with open(data_path, "w", encoding="utf-8") as f:
        json.dump([r.to_dict() for r in reports], f, indent=2, allow_nan=False)
    return ReportFiles(html=html_path, figures=written, data=data_path, reports=list(reports))


def _progress(enabled: bool, total: int):
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("[bold]report[/bold] {task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=Console(stderr=True), transient=True)
    bar.add_task("figures", total=total)
    bar.start()
    return bar


def report(out_dir: str, *, study_names: Sequence[str] | None = None, file: str | None = None,
           storage: str | None = None, cache: str | None = None, expected_calls: float | None = None,
           all_programs: bool = False, progress: bool = False) -> ReportFiles:
    """Write a report of some studies: by name, or those of a study file's functions.

    Arguments:
        out_dir: the folder to write ``report.html``, ``report.json`` and the PNGs into.
        study_names: the studies to report on; or
        file: a study file (``studies/*.py``): the studies of its functions (see :func:`studies_for_file`).
        storage: the Optuna storage; default the one ``tune`` uses beside ``cache``.
        cache: the cache location that default is derived from (default ``$AUTOTUNE_CACHE``...).
        expected_calls: re-score for this call count (default: each study's own).
        all_programs: with ``file``, also studies of older versions of its functions.
        progress: show progress on stderr.
    """
    from ._paths import default_storage_url, storage_url

    url = storage_url(storage) if storage else default_storage_url(cache)
    if (study_names is None) == (file is None):
        raise StudyError("Report on either a study file or study names, not both or neither.")
    if file is not None:
        study_names = studies_for_file(file, url, all_programs=all_programs)
        if not study_names:
            raise StudyError(f"No study of the functions in {file} in {url}: run `autotune tune {file}` first "
                             "(with the same --cache/--storage), or pass --storage.")
    else:
        study_summaries(url)  # a clear error for a missing storage
    reports = [load_study_report(name, url, expected_calls=expected_calls) for name in study_names]
    return write_report(reports, out_dir, progress=progress)
