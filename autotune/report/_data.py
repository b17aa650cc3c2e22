"""What a report shows about a study, read through the study adapter (``study._optuna``).

Every cost, winner, interval and range here comes from :mod:`autotune.select`, over the
points ``tune()`` confirmed (the default's among them); a study that never got to its
confirmation falls back to its trials' single measurements.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any

from autotune import _display
from autotune import select as _select
from autotune._errors import StudyError
from autotune._paths import redact
from autotune.cache._entry import fill_retune
from autotune.measuring._measurement import Measurement, compile_total, device_memory
from autotune.measuring._outcome import Outcome, tally
from autotune.program._config import Config, config_label
from autotune.select import Point
from autotune.select._objective import Objective

WAITING_STATES = ("running", "waiting")
"""What a trial without an outcome shows: another worker is measuring it, or it is queued."""
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


@dataclass
class TrialRow:
    """One trial as a report shows it (seconds are None where nothing was measured; the names
    as in :class:`Measurement`: ``compile_s`` is XLA's compile alone, ``compile_total_s`` the sum)."""

    number: int
    outcome: str
    config: dict[str, Any]
    reason: str | None = None
    trace_s: float | None = None
    lower_s: float | None = None
    compile_s: float | None = None
    run_s: float | None = None
    cost: float | None = None
    duration_s: float | None = None
    memory_bytes: int | None = None  # the config's device memory (`device_memory`)

    @property
    def compile_total_s(self) -> float | None:
        """trace + lower + compile wall seconds: everything paid once per signature."""
        return compile_total(self)

    @property
    def counts(self) -> bool:
        """Whether the trial is a measurement (complete or shared)."""
        return self.outcome in (Outcome.COMPLETE.value, Outcome.SHARED.value)

    @property
    def failed(self) -> bool:
        """Whether the trial gave no measurement for a reason worth showing (not a duplicate)."""
        return not self.counts and self.outcome != Outcome.DUPLICATE.value

    def to_dict(self) -> dict[str, Any]:
        """The row's fields and its ``compile_total_s``, as JSON data."""
        return {**dataclasses.asdict(self), "compile_total_s": self.compile_total_s}


@dataclass
class StudyReport:
    """Everything a report shows about one study.

    Attributes:
        storage: the study storage, password redacted.
        shown: the configs the by-call-count table and the figures show
            (:func:`autotune._display.listed_points`), by compile time; each has
            ``"label"`` (A, B, C...), ``"color"``, ``"on_front"`` and ``"optimal"`` (its
            ``[from, to)`` intervals), beside the point's JSON (``Point.to_json``) and ``"cost"``.
        pareto: the ``shown`` points on the (compile_cost_s, run_cost_s) Pareto front.
        points: what the report decides on (:class:`autotune.select.Point`): the confirmed
            points, or (a study that never got to its confirmation) its trials' measurements.
        confirmed: the confirmed points as rows (``Point.to_json`` without the measurement, and ``"cost"``),
            cheapest first (:func:`autotune.select.ranked`).
        intervals: :func:`autotune.select.crossover_intervals` of every point, the default's included.
        chosen: :func:`autotune.select.choose` for ``objective`` (``config``, ``compile_cost_s``,
            ``run_cost_s``, ``cost``, ``in_range``), the same config the cache entry names.
        default: the default config's point as a row with its cost, or None.
        complete_range: the call counts over which the study's measurements are complete.
        retune: the command that re-tunes the study, ``{calls}`` standing for the call count.
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
    points: list[Point]
    confirmed: list[dict[str, Any]]
    pareto: list[dict[str, Any]]
    intervals: list[dict[str, Any]]
    chosen: dict[str, Any] | None
    default: dict[str, Any] | None
    default_config: dict[str, Any]
    shown: list[dict[str, Any]] = field(default_factory=list)
    complete_range: dict[str, Any] | None = None
    retune: str | None = None
    slug: str = ""
    figures: dict[str, str] = field(default_factory=dict)

    @property
    def tunable_sites(self) -> list[dict[str, Any]]:
        """Sites a config can change: a while loop (length unknown) or more than one step."""
        return [s for s in self.sites if s.get("length") is None or int(s["length"]) > 1]

    @property
    def site_names(self) -> dict[str, str]:
        """``{site id: short name}`` by the one rule the CLI uses (:func:`autotune._display.site_names`)."""
        return _display.site_names(self.sites)

    def label(self, config: dict[str, Any]) -> str:
        """A short readable form of a config with the CLI's site names: ``algo_iters=for, s1=scan×2``."""
        return config_label(config, [{"id": sid, "name": short} for sid, short in self.site_names.items()])

    def outcome_counts(self) -> dict[str, int]:
        return tally(t.outcome for t in self.trials)

    @property
    def in_range(self) -> bool:
        """Whether ``objective.expected_calls`` lies in the study's complete range."""
        return _select.in_range(self.complete_range, self.objective.expected_calls)

    def retune_command(self, calls: float | None = None) -> str | None:
        """The command that re-tunes for ``calls`` (default: the report's call count)."""
        return fill_retune(self.retune, self.objective.expected_calls if calls is None else calls)

    def cost_of(self, point: Point | dict[str, Any], calls: float | None = None) -> float:
        """A point's cost (a :class:`Point` or one of the report's rows) under the report's
        objective (or at another call count), by ``_select.cost``."""
        obj = self.objective if calls is None else self.objective.overridden(expected_calls=calls)
        return _select.cost(Point.from_json(point), obj)

    @property
    def shown_points(self) -> list[Point]:
        """The ``shown`` rows as :class:`Point` values (what the CLI's crossover table takes)."""
        by_config = {p.config: p for p in self.points}
        return [by_config[Config.from_dict(row["config"])] for row in self.shown]

    def to_dict(self) -> dict[str, Any]:
        """The report's data as strict JSON-able dicts (an unbounded interval ends at null)."""
        return {
            "study_name": self.study_name,
            "storage": self.storage,
            "function_key": self.function_key,
            "device": self.device,
            "objective": self.objective.to_dict(),
            "study_objective": self.study_objective,
            "search": self.search,
            "fingerprint": self.fingerprint,
            "sites": self.sites,
            "default_config": self.default_config,
            "chosen": self.chosen,
            "default": self.default,
            "complete_range": _select.range_json(self.complete_range),
            "in_range": self.in_range,
            "retune_command": None if self.in_range else self.retune_command(),
            "pareto": [_shown_json(p) for p in self.pareto],
            "shown": [_shown_json(p) for p in self.shown],
            "crossovers": _select.intervals_json(self.intervals),
            "confirmed": self.confirmed,
            "trials": [t.to_dict() for t in self.trials],
            "figures": self.figures,
        }


def _shown_json(p: dict[str, Any]) -> dict[str, Any]:
    return {**p, "optimal": [[a, _select.json_bound(b)] for a, b in p.get("optimal", [])]}


def _row(point: Point, objective: Objective) -> dict[str, Any]:
    """A point as the report's rows show it: its JSON (without the measurement) and its cost."""
    return {**point.replace(measurement=None).to_json(), "cost": _select.cost(point, objective)}


def _float(x: Any) -> float | None:
    try:
        return v if math.isfinite(v := float(x)) else None
    except (TypeError, ValueError):
        return None


def _slug(function_key: str, study_name: str) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", "_", function_key.split(":")[-1]).strip("_")[:40] or "study"
    return f"{base}-{hashlib.sha1(study_name.encode()).hexdigest()[:6]}"


def letter(i: int) -> str:
    """A, B, ..., Z, AA, AB, ...: the label of the i-th shown config."""
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def _trial_row(view, frozen, objective: Objective) -> TrialRow:
    try:
        config = view.config.to_dict() if view.config_json else {}
    except Exception:  # a hand-edited or foreign trial: show it without a config
        config = {}
    outcome = view.outcome.value if view.outcome is not None else view.state.lower()
    m = view.measurement or {}
    row = TrialRow(
        number=view.number,
        outcome=outcome,
        config=config,
        reason=view.reason,
        trace_s=_float(m.get("trace_s")),
        lower_s=_float(m.get("lower_s")),
        compile_s=_float(m.get("compile_s")),
        run_s=_float(m.get("run_s")),
        memory_bytes=device_memory(m.get("memory")),
    )
    if frozen is not None and frozen.datetime_start is not None and frozen.datetime_complete is not None:
        row.duration_s = (frozen.datetime_complete - frozen.datetime_start).total_seconds()
    if row.compile_total_s is not None and row.run_s is not None:
        try:  # the figures the objective charges (CPU compile, fast-call runtime), as the study's points
            charged = Measurement.from_dict(m)
            row.cost = objective.cost(charged)
        except (KeyError, TypeError, ValueError):  # an older or partial record: its wall figures
            row.cost = objective.cost_of(row.compile_total_s, row.run_s)
    return row


def _default_config(attrs: dict[str, Any], sites: list[dict[str, Any]]) -> dict[str, Any]:
    if attrs.get("default_config") is not None:
        return dict(attrs["default_config"])
    return {
        s["id"]: dict(s.get("default") or {"repr": "scan", "unroll": 1})
        for s in sites
        if s.get("length") is None or int(s["length"]) > 1
    }


def load_study_report(
    study_name: str,
    storage: str,
    *,
    expected_calls: float | None = None,
    compile_weight: float | None = None,
    runtime_weight: float | None = None,
) -> StudyReport:
    """Read one study and compute its shown configs, crossovers and chosen config.

    Arguments:
        study_name: the Optuna study's name.
        storage: its storage URL (or a SQLite file path).
        expected_calls, compile_weight, runtime_weight: re-score for this objective;
            None keeps the study's own (its ``objective`` user attribute).

    Returns:
        A :class:`StudyReport`.
    """
    from autotune._paths import storage_url
    from autotune.study import load_study as load
    from autotune.study import study_summaries as summaries

    url = storage_url(storage)
    summaries(url)  # a clear error, and no new file, for a storage that does not exist
    study = load(study_name, url)
    try:
        attrs = study.attrs
        frozen = {t.number: t for t in study.frozen_trials()}
        views = study.trials()
        directions = study.directions
    finally:
        study.close()
    own = dict(attrs.get("objective") or {})
    objective = Objective.from_dict(own).overridden(expected_calls, compile_weight, runtime_weight)
    sites = [dict(s) for s in attrs.get("sites") or []]
    default_config = _default_config(attrs, sites)
    trials = [_trial_row(v, frozen.get(v.number), objective) for v in views]

    # Exactly what tune() decided on: the confirmed points (with their paired rounds), judged
    # by the one selection rule; a study without confirmation falls back to its trials.
    confirmed = [Point.from_json(c) for c in attrs.get("confirmed") or []]
    points = confirmed or [
        Point(Config.from_dict(t.config), t.compile_total_s, t.run_s, memory_bytes=t.memory_bytes)
        for t in trials
        if t.counts and t.compile_total_s is not None and t.run_s is not None
    ]
    default_arg = Config.from_dict(default_config) if confirmed else None
    intervals = _select.crossover_intervals(points, default=default_arg, **objective.line_figures())
    complete = attrs.get("complete_range")
    choice = _select.choose(points, objective, default=default_arg, complete=complete)
    chosen = (
        None
        if choice is None
        else {
            "config": choice.config.to_dict(),
            "compile_cost_s": choice.compile_cost_s,
            "run_cost_s": choice.run_cost_s,
            "cost": choice.cost,
            "in_range": choice.in_range,
        }
    )
    front = {p.config for p in _select.pareto_front(points)}
    shown = []
    for i, p in enumerate(_display.listed_points(points, intervals, choice and choice.config)):
        shown.append(
            {
                **_row(p, objective),
                "label": letter(i),
                "color": PALETTE[i % len(PALETTE)],
                "on_front": p.config in front,
                "optimal": [[it["from_calls"], it["to_calls"]] for it in intervals if it["config"] == p.config],
            }
        )
    default_cfg = Config.from_dict(default_config)
    default = next((_row(p, objective) for p in points if p.config == default_cfg), None)
    return StudyReport(
        study_name=study_name,
        storage=redact(url),
        function_key=str(attrs.get("function_key", "?")),
        device=dict(attrs.get("device") or {}),
        objective=objective,
        study_objective=own,
        search=str(attrs.get("search", "pareto" if directions > 1 else "cost")),
        fingerprint=attrs.get("fingerprint"),
        sites=sites,
        trials=trials,
        points=points,
        confirmed=[_row(p, objective) for p in _select.ranked(confirmed, objective)],
        pareto=[p for p in shown if p["on_front"]],
        intervals=intervals,
        chosen=chosen,
        default=default,
        default_config=default_config,
        shown=shown,
        complete_range=complete,
        retune=attrs.get("retune"),
        slug=_slug(str(attrs.get("function_key", "study")), study_name),
    )


def studies_for_file(path: str, storage: str, *, all_programs: bool = False) -> list[str]:
    """The studies in ``storage`` of the functions a study file tunes.

    A study belongs to a function when its ``function_key`` user attribute is the
    function's key. Of those, the studies of the current program (same fingerprint)
    are returned, the one :func:`autotune.program._keys.study_name` derives for the
    decorator's objective first; studies of older versions of the function only when
    there are no current ones or ``all_programs`` is set.
    """
    from autotune._paths import storage_url
    from autotune.program._keys import device_info, program_key, study_name
    from autotune.record._studyfile import load_examples
    from autotune.study import study_summaries as summaries

    wanted: dict[str, set[str]] = {}
    preferred: list[str] = []
    device = device_info()
    for ex in load_examples(path):
        with ex.traced():
            program, signature = program_key(ex.fn.fun, ex.args, ex.kwargs, ex.fn.jit_kwargs)
        wanted.setdefault(ex.fn.key, set()).add(program.fingerprint)
        tier_up = bool(getattr(ex.fn, "tier_up", False))
        obj = Objective(ex.fn.expected_calls, ex.fn.compile_weight, ex.fn.runtime_weight, tier_up=tier_up)
        for search in ("cost", "pareto"):
            preferred.append(study_name(ex.fn.key, program.fingerprint, signature, device, obj, search))
    found = summaries(storage_url(storage))
    matches = [s for s in found if s["attrs"].get("function_key") in wanted]
    current = [s for s in matches if s["attrs"].get("fingerprint") in wanted[s["attrs"]["function_key"]]]
    chosen = matches if (all_programs or not current) else current
    rank = {name: i for i, name in enumerate(preferred)}
    return [s["name"] for s in sorted(chosen, key=lambda s: (rank.get(s["name"], len(rank)), s["name"]))]


def no_study_error(file: str, url: str) -> StudyError:
    return StudyError(
        f"No study of the functions in {file} in {redact(url)}: run `autotune tune {file}` first "
        "(with the same --cache/--storage), or pass --storage."
    )
