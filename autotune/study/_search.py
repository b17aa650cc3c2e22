"""The trial loop: propose a config no trial holds, measure it, check it, record it.

Decisions here rest on robust figures: the default is trial 0 and is measured
:data:`REFERENCE_ROUNDS` times (median), and the compile budget that prunes a trial is
the best cost so far plus a margin for compile noise (at least :data:`BUDGET_MARGIN`, more
when the default's own compile samples spread wider), so one optimistic sample cannot
prune a config that would have won.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune import select as _select
from autotune._errors import StudyError
from autotune._interrupt import Interrupted
from autotune._options import TuneOptions
from autotune.measuring._measurement import Measurement, median_of
from autotune.measuring._oom import default_out_of_memory
from autotune.measuring._outcome import counted
from autotune.measuring._runner import Outcome, RunnerBase, TrialFailed
from autotune.program._config import Config
from autotune.select import Point
from autotune.select._objective import Objective
from autotune.study._contenders import CUTOFF, contenders, serves
from autotune.study._guard import compare_outputs
from autotune.study._optuna import Study
from autotune.study._predict import MARGIN, CompilePredictor
from autotune.study._result import TrialRecord
from autotune.study._trials import TrialView, memory_attrs, over_budget

REFERENCE_ROUNDS = 3
"""How many times the default is measured before its cost sets the compile budget."""

REFERENCE_COMPILES = 1
"""How many of the default's reference rounds compile it: the rest re-time its executable (its
runtime is what moves most between samples; its compile, charged in CPU seconds, moves less, and
the compile budget keeps :data:`BUDGET_MARGIN` over it). Measured: docs/results/tuning-wall.md."""

BUDGET_MARGIN = 0.10
"""The least relative margin added to the best cost when it becomes a compile budget."""


def record_of(view: TrialView, objective: Objective) -> TrialRecord:
    """A trial as the study's result shows it (its cost from the one selection rule)."""
    config = view.config or Config()
    if view.outcome is None:  # another worker's trial, still in flight
        return TrialRecord(
            view.number, config, "running", None, view.reason or "being measured by another worker", view.measurement
        )
    at_least, predicted = view.attrs.get("compile_s_at_least"), view.attrs.get("predicted_compile_s")
    record = TrialRecord(
        view.number, config, view.outcome.value, None, view.reason, view.measurement, at_least, predicted
    )
    point = record.point()
    if point is None:
        return record
    return dataclasses.replace(record, cost=_select.cost(point, objective))


@dataclass(frozen=True)
class Watch:
    """Who follows a search between its trials: the progress display it updates
    (``_progress.Progress``) and the interrupt latch it checks
    (:class:`autotune._interrupt.InterruptLatch`)."""

    progress: Any
    latch: Any


class Search:
    """One process's share of a study's trials.

    Arguments:
        study, space, runner, objective: the study the trials go into, the configs they may
            take, what measures them and what a measurement costs.
        proposer, device_key: what proposes the next config, and the device's key.
        options: the run's :class:`autotune.TuneOptions` (``search``, ``rtol``, ``atol``,
            ``confirm_top`` are read).
        watch: the progress display and interrupt latch (:class:`Watch`).
        unrewritable: (config that failed) -> {site id: why} for the sites it changes that
            cannot be re-emitted.
    """

    def __init__(
        self,
        study: Study,
        space,
        runner,
        objective: Objective,
        proposer,
        device_key: str,
        *,
        options: TuneOptions,
        watch: Watch,
        unrewritable: Callable[[Config], dict[str, str]] | None = None,
    ):
        self.study, self.space, self.runner, self.objective = study, space, runner, objective
        self.unrewritable = unrewritable
        self.search, self.proposer, self.device_key = options.search, proposer, device_key
        self.rtol, self.atol, self.progress, self.latch = options.rtol, options.atol, watch.progress, watch.latch
        self.default = space.default()
        self.memory_gb = options.trial_memory_gb
        self.keep_top = options.confirm_top  # contenders kept for confirmation
        self.reference: Any = None
        self.predictor = CompilePredictor(space)
        self._observed: set[int] = set()

    # -- what the study knows ---------------------------------------------------------------
    def records(self) -> list[TrialRecord]:
        return [record_of(v, self.objective) for v in self.study.trials(self.space)]

    def points(self, records: list[TrialRecord] | None = None) -> list[Point]:
        """One point per measured config (the first trial that measured it), with its
        program's hash in ``program`` (confirmation takes one contender per program)."""
        out: dict[Config, Point] = {}
        for r in records if records is not None else self.records():
            p = r.point()
            if p is not None:
                out.setdefault(r.config, p)
        return list(out.values())

    def budget(self, points: list[Point]) -> float | None:
        """Compile seconds past which a config cannot win: best cost so far, plus noise margin, in
        the wall seconds a runner's budget counts (stretched by the default's wall/CPU ratio: load)."""
        if self.search != "cost" or self.objective.compile_weight <= 0 or not points:
            return None
        best = _select.choose(points, self.objective, default=self.default)
        margin = BUDGET_MARGIN
        d = next((p for p in points if p.config == self.default), None)
        if d is not None and d.rounds:
            compiles = [c for c, _ in d.rounds]
            margin = max(margin, (max(compiles) - min(compiles)) / max(statistics.median(compiles), 1e-9))
        stretch = 1.0
        if d is not None and d.compile_cost_s > 0 and d.measurement is not None:
            stretch = max(1.0, d.measurement.compile_total_s / d.compile_cost_s)
        return best.cost * (1 + margin) * stretch / self.objective.compile_weight

    def ceiling(self, points: list[Point], got: Config) -> float | None:
        """The seconds a call of ``got`` may take before its timing stops early (:data:`CUTOFF`), or
        None: never for the default (the reference), a Pareto or a tier-up search, or before a best."""
        if self.search != "cost" or got == self.default or self.objective.tier_up or not points:
            return None
        best = _select.choose(points, self.objective, default=self.default)
        return self.objective.run_ceiling(CUTOFF * best.cost)

    def _learn(self, records: list[TrialRecord]) -> None:
        for r in records:
            if r.number not in self._observed and r.state == Outcome.COMPLETE.value and r.measurement:
                self._observed.add(r.number)
                self.predictor.observe(r.config, Measurement.from_dict(r.measurement).compile_cost_s)

    # -- trials -------------------------------------------------------------------------
    def _value(self, m: Measurement, rounds: list[list[float]] | None = None) -> Any:
        if self.search == "pareto":
            return [m.compile_cost_s, m.run_cost_s]
        point = Point(Config(), m.compile_cost_s, m.run_cost_s, rounds=tuple(rounds or ()))
        return _select.cost(point, self.objective)

    def _measure_default(self) -> list[Measurement]:
        """The default, measured REFERENCE_ROUNDS times: its medians are trial 0's figures. The first
        :data:`REFERENCE_COMPILES` compile it; the others re-time its kept executable, carrying the
        last compile (a runner that kept none compiles again)."""
        ms = [self.runner.measure(self.default)]
        self.reference = ms[0].outputs
        while len(ms) < REFERENCE_ROUNDS:
            self.latch.check()
            try:
                again = self.runner.retime(self.default) if len(ms) >= REFERENCE_COMPILES else None
                ms.append(again if again is not None else self.runner.measure(self.default))
            except TrialFailed:
                break
        return ms

    def reference_outputs(self, records: list[TrialRecord]) -> None:
        """The default's outputs for the guard: measured now when the study already has its trial."""
        if self.reference is None and any(r.config == self.default and r.point() is not None for r in records):
            try:
                self.reference = self.runner.measure(self.default).outputs
            except Exception:  # the guard then compares with the first config that runs
                self.reference = None

    def open(self, views: list[TrialView], taken: set[str]) -> tuple[Any, Config] | None:
        """The next trial, opened (call under the study's proposal lock): the default first, then
        any config queued through Optuna (oldest first), then the proposer's; None when every
        config is taken."""
        if self.default.to_json() not in taken:
            return self.study.open(self.default, self.space, self.device_key)
        if any(v.state == "WAITING" for v in views):
            return self.study.pop_queued(self.space, self.device_key)
        config = self._leanest_next(views, taken) or self.proposer.propose(taken)
        return None if config is None else self.study.open(config, self.space, self.device_key)

    def _leanest_next(self, views: list[TrialView], taken: set[str]) -> Config | None:
        """The leanest config (`Space.leanest`) where the default is over the memory budget and no
        trial took it yet: a sampler learns what fits only from trials that fit, so the config
        likeliest to fit is measured right after the default."""
        budget, default = self.objective.budget_bytes, self.default.to_json()
        lean = self.space.leanest() if budget is not None else None
        if lean is None or lean.to_json() in taken or lean == self.default:
            return None
        d = next((v for v in views if v.config_json == default and v.measurement is not None), None)
        return lean if d is not None and d.attrs.get("memory_over_bytes", 0) > 0 else None

    def ahead(self, got: Config, taken: set[str], budget_s: float | None) -> list[Config]:
        """The configs the grid will propose after ``got`` (one per builder the runner has, none
        for a sampler whose next draw depends on this one's result), less those predicted over
        the compile budget: the runner compiles them while it measures ``got``."""
        n = int(getattr(self.runner, "lookahead", 0) or 0)
        upcoming = getattr(self.proposer, "upcoming", None)
        if n <= 0 or upcoming is None:
            return []
        return [c for c in upcoming(taken | {got.to_json()}, n) if self.predictor.over_budget(c, budget_s) is None]

    def step(
        self, trial: Any, got: Config, budget_s: float | None, ahead: list[Config] = (), ceiling: float | None = None
    ) -> None:
        """Measure the config of an opened trial and close the trial with what happened; ``ahead``:
        the configs to prepare meanwhile (a runner with ``prefetch`` builds them in parallel);
        ``ceiling``: the seconds a call may take before its timing stops early (:meth:`ceiling`)."""
        owner = self.study.owner_of(got.to_json(), trial.number, self.space)
        if owner is not None:
            self.study.finish(
                trial,
                Outcome.DUPLICATE,
                reason=f"same config as trial {owner} (another worker drew it at the same moment); not measured twice",
            )
            return
        predicted = self.predictor.over_budget(got, budget_s) if got != self.default else None
        if predicted is not None:
            self.study.finish(
                trial,
                Outcome.PRUNED,
                predicted_compile_s=predicted,
                compile_s_at_least=predicted / MARGIN,
                reason=(
                    f"skipped before compiling: its predicted compile time {predicted:.3g} s (fit on "
                    f"{self.predictor.trials(got)} trials) is over {MARGIN:g}x the compile budget of "
                    f"{budget_s:.3g} s, so it cannot win"
                ),
            )
            return
        prefetch = getattr(self.runner, "prefetch", None)  # a runner without it measures as it always did
        self.progress.update(status=f"measuring {got.label(self.space.sites)}")
        shared: dict[str, Any] = {}

        def on_lowered(program_hash: str) -> Measurement | None:
            hit = self._by_hash.get(program_hash)
            if hit is not None:
                shared["from"] = hit[0]
                return hit[1]
            return None

        try:
            if prefetch is not None:
                prefetch([got, *ahead])
            if got == self.default and self.reference is None:
                ms = self._measure_default()
                m, rounds = median_of(ms), [[x.compile_cost_s, x.run_cost_s] for x in ms]
            else:
                more = {"run_ceiling_s": ceiling} if ceiling is not None and isinstance(self.runner, RunnerBase) else {}
                m = self.runner.measure(got, compile_budget_s=budget_s, on_lowered=on_lowered, **more)
                rounds = None
        except TrialFailed as exc:
            reason = exc.reason + (self._pin(got) if exc.outcome == Outcome.ERROR else "")
            stops = got == self.default and exc.outcome == Outcome.OOM  # nothing left to compare configs with
            more = {"frees_config": True} if stops else {}
            self.study.finish(trial, exc.outcome, reason=reason, compile_s_at_least=exc.compile_s_at_least, **more)
            if stops:
                raise StudyError(default_out_of_memory(exc.reason, self.memory_gb)) from None
            return
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: close this trial, keep the others
            name = exc.name if isinstance(exc, Interrupted) else "SIGINT"
            self.study.finish(trial, Outcome.INTERRUPTED, reason=f"interrupted ({name}) while being measured")
            raise
        except Exception as exc:  # a config that does not compile or run is a result, not a crash
            self.study.finish(trial, Outcome.ERROR, reason=f"{type(exc).__name__}: {exc}{self._pin(got)}")
            return
        if self.reference is None:
            self.reference = m.outputs
        why = compare_outputs(self.reference, m.outputs, self.rtol, self.atol) if m.outputs is not None else None
        measurement = m.to_dict()
        if rounds:
            measurement["rounds"] = rounds
        if why is not None:
            self.study.finish(trial, Outcome.REJECTED, reason=f"correctness guard: {why}", measurement=measurement)
            return
        outcome = Outcome.SHARED if shared else Outcome.COMPLETE
        reason = (
            f"lowered to the same program as trial {shared['from']}: its compile and run figures are shared"
            if shared
            else _stopped_reason(m, ceiling)
        )
        over = over_budget(m.memory_bytes, self.objective.budget_bytes)
        self.study.finish(
            trial,
            outcome,
            value=self._value(m, rounds),
            reason="; ".join(r for r in (reason, over) if r) or None,
            measurement=measurement,
            program_hash=m.program_hash,
            shared_with=shared.get("from"),
            **memory_attrs(m.memory_bytes, self.objective.budget_bytes),
        )
        if m.program_hash and not shared:
            self._by_hash[m.program_hash] = (trial.number, m)

    def _pin(self, got: Config) -> str:
        """After a config failed: the sites it changes that cannot be re-emitted for any choice are
        recorded in the study (``unrewritable``: site id -> why) and held at their default from
        then on; the text says so, for the trial's reason ("" when no site is to blame)."""
        if self.unrewritable is None or got == self.default:
            return ""
        try:
            found = self.unrewritable(got)
        except Exception:  # the diagnosis is best effort: the trial stays an ordinary error
            return ""
        if not found:
            return ""
        with self.study.proposal_lock():
            known = dict(self.study.attrs.get("unrewritable") or {})
            self.study.set_attrs(unrewritable={**found, **known})
        names = ", ".join(repr(k) for k in found)
        return (
            f"; site{'s' if len(found) > 1 else ''} {names} cannot be rewritten for any choice (the loop could "
            "not be re-traced), so the study leaves it at its default from now on"
        )

    def run(self, budget: int, deadline: float | None) -> None:
        """Trials until the study holds ``budget`` counted trials, the deadline passes, or
        every config is taken; then no trial is left queued."""
        try:
            self._search(budget, deadline)
        finally:
            prefetch = getattr(self.runner, "prefetch", None)
            if prefetch is not None:
                prefetch([])  # nothing more ahead: builds still running are stopped
        self.study.drain_waiting(self.space, self.device_key)

    def _search(self, budget: int, deadline: float | None) -> None:
        self._by_hash: dict[str, tuple[int, Measurement]] = {}
        self.reference_outputs([record_of(v, self.objective) for v in self.study.trials(self.space)])
        first = True
        while True:
            self.latch.check()
            if not first and deadline is not None and time.monotonic() > deadline:
                return
            first = False
            self.study.reclaim_abandoned()
            with self.study.proposal_lock():
                views = self.study.trials(self.space)
                if counted(views) >= budget:
                    return
                records = [record_of(v, self.objective) for v in views]
                self._learn(records)
                for v in views:
                    m = v.measurement
                    if v.outcome == Outcome.COMPLETE and m and m.get("program_hash"):
                        self._by_hash.setdefault(m["program_hash"], (v.number, Measurement.from_dict(m)))
                known = self.points(records)
                budget_s = self.budget(known)
                if hasattr(self.proposer, "pin"):  # sites found unrewritable, by any worker of the study
                    self.proposer.pin(self.study.attrs.get("unrewritable") or {})
                taken = {v.config_json for v in views if v.takes_config}
                opened = self.open(views, taken)
                ahead = self.ahead(opened[1], taken, budget_s) if opened is not None else []
            if opened is None:
                return
            self.step(*opened, budget_s, ahead, self.ceiling(known, opened[1]))
            views = self.study.trials(self.space)
            points = self.points([record_of(v, self.objective) for v in views])
            # Keep the contenders' executables in the warm worker: confirmation re-times them without compiling.
            serve = serves(self.search, self.space.product_size(), budget)  # as the budget will leave it
            self.runner.retain(contenders(points, self.default, self.objective, self.keep_top, serve=serve))
            if self.progress.shown:
                self.progress.update(completed=min(budget, counted(views)), best=self.best_text(points), status="")

    def best_text(self, points: list[Point]) -> str:
        """The progress bar's standing text: the best cost of ``points`` (the one selection rule)."""
        if not points:
            return "no measured config yet"
        if self.search == "pareto":
            return f"front of {len(_select.pareto_front(points))}"
        best = _select.choose(points, self.objective, default=self.default)
        return f"best {best.cost:.4g} s: {best.config.label(self.space.sites)}"


def _stopped_reason(m: Measurement, ceiling: float | None) -> str | None:
    """Why a trial's timing stopped early (None when it did not)."""
    if not m.stopped_early or ceiling is None:
        return None
    return (
        f"timing stopped after {m.reps} calls: {m.run_s * 1e6:.4g} µs a call, over the {ceiling * 1e6:.4g} µs past "
        f"which its calls alone cost {CUTOFF:g}x the best config's whole cost, so it cannot win"
    )
