"""What a study returns: one record per trial and the result of the whole search."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

from autotune import select as _select
from autotune.measuring._measurement import Measurement, device_memory
from autotune.measuring._outcome import Outcome, counts_toward_trials, tally
from autotune.measuring._wall import WallReport
from autotune.program._config import Config
from autotune.select import Point
from autotune.select._objective import Objective
from autotune.study._neighbours import Seeding


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a study: the config, what happened, and what it measured.

    Attributes:
        state: the :class:`autotune.Outcome` value (``"complete"``, ``"shared"``,
            ``"pruned"``, ``"rejected"``, ``"timeout"``, ...).
        cost: the single-trial cost under the study's objective (counted trials only).
        compile_s_at_least: for a stopped trial (pruned, timed out), the compile seconds it
            had spent or was predicted at (a lower bound).
        predicted_compile_s: for a config skipped before compiling, the compile time predicted
            for it (such a trial is no measurement and does not count toward ``n_trials``).
    """

    number: int
    config: Config
    state: str
    cost: float | None = None
    reason: str | None = None
    measurement: dict[str, Any] | None = None
    compile_s_at_least: float | None = None
    predicted_compile_s: float | None = None

    @property
    def skipped(self) -> bool:
        """Closed on its predicted compile time before compiling: no measurement."""
        return self.predicted_compile_s is not None

    @property
    def memory_bytes(self) -> int | None:
        """The config's device memory as measured (:attr:`Measurement.memory_bytes`), or None."""
        return None if not self.measurement else device_memory(self.measurement.get("memory"))

    @property
    def outcome(self) -> Outcome | None:
        """The :class:`Outcome`, or None for a trial another worker is still measuring."""
        try:
            return Outcome(self.state)
        except ValueError:
            return None

    @property
    def counted(self) -> bool:
        """Whether the trial ended and counts toward ``n_trials``
        (:func:`autotune.measuring._outcome.counts_toward_trials`)."""
        return counts_toward_trials(self.outcome, self.skipped)

    def point(self) -> Point | None:
        """The trial as a selection point (counted trials only): the seconds the objective
        charges, the default's reference rounds where it has them, its program's hash."""
        m = self.measurement
        if self.outcome is None or not self.outcome.counts or not m:
            return None
        charged = Measurement.from_dict(m)
        return Point(
            self.config,
            charged.compile_cost_s,
            charged.run_cost_s,
            rounds=tuple(m.get("rounds") or ()),
            program=charged.program_hash,
            measurement=charged,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "config": self.config.to_dict(),
            "state": self.state,
            "cost": self.cost,
            "reason": self.reason,
            "measurement": self.measurement,
            "memory_bytes": self.memory_bytes,
            "compile_s_at_least": self.compile_s_at_least,
            "predicted_compile_s": self.predicted_compile_s,
        }


@dataclass(repr=False)
class TuneResult:
    """What a study found.

    Attributes:
        best_config: the winner (:func:`autotune.select.winner` over the confirmed points:
            a challenger beats the default only on its median cost *and* in enough paired rounds:
            3 of 3, 5 of 6, see :func:`autotune.select.wins_needed`).
        best_cost: its cost under ``objective``; ``best`` its confirmed measurement.
        default_cost: the default config's confirmed cost.
        trials: one :class:`TrialRecord` per trial of the study, resumed ones included.
        confirmed: every confirmed :class:`autotune.select.Point` (``config``, ``compile_cost_s``,
            ``run_cost_s``, ``rounds``), the default's among them; ``pareto`` the non-dominated ones.
        complete_range: the call counts over which the measurements are complete
            (:func:`autotune.select.complete_range`): outside it a config the study did not
            measure (or stopped) could be cheaper.
        finished: the study already held its trials and a confirmation of exactly them, so
            nothing was measured: every figure is the stored confirmation's (``reconfirm=True``
            re-times anyway). ``new_trials``: the trials this run added that count toward ``n_trials`` (a
            trial pruned on its measured compile counts; a skipped or duplicate one does not).
        stored: ``"written"`` or ``"kept"`` once ``fn.tune`` stored it (the cache keeps an
            entry of the same study unless this run's paired rounds beat it), else None.
        unrewritable: the sites the rewrite could not re-emit for any choice (``{site id:
            why}``): each cost the study one error trial and stayed at its default after it.
        load_notes: with several processes and the compilation cache on, the contenders whose load
            from the cache was not measured (estimated as trace + lower) or missed the cache, and why.
        wall: where the run's wall-clock seconds went (:class:`autotune.measuring._wall.WallReport`:
            process starts, trace + lower, compile, load, timing and the rest, per part of the run).
        seeding: how the study was seeded from the cache's configs of the same function at other
            input signatures (:class:`autotune.study._neighbours.Seeding`: the neighbours, the configs
            measured after the default, whether the search stopped after them and why); None when
            it was not (``neighbours=False``, ``at.tune``, no neighbour whose configs fit).
    """

    best_config: Config
    best_cost: float
    best: Measurement
    default_cost: float
    default: Measurement
    trials: list[TrialRecord]
    objective: Objective
    sites: list[Any]
    fingerprint: str
    signature: str
    device: dict[str, Any]
    study_name: str
    storage: str
    sampler: str
    space_size: int
    confirmed: list[Point] = field(default_factory=list)
    default_config: Config = field(default_factory=Config)
    complete_range: dict[str, Any] | None = None
    wall_s: float = 0.0
    search: str = "cost"  # "cost" (one weighted objective) | "pareto" (NSGA-II on compile_cost_s, run_cost_s)
    finished: bool = False  # the study had nothing new to measure: no trial, no confirmation ran
    new_trials: int = 0  # trials this run added that count toward n_trials (any worker)
    stored: str | None = None  # what the cache did: "written", "kept" (see Autotuned.tune), None: not stored
    unrewritable: dict[str, str] = field(default_factory=dict)  # site id -> why it stayed at its default
    load_notes: list[str] = field(default_factory=list)  # loads from a compilation cache not measured, or missed
    wall: WallReport | None = None
    seeding: Seeding | None = None

    @property
    def pareto(self) -> list[Point]:
        """The confirmed points no other beats on both compile and run seconds, by compile time."""
        return _select.pareto_front(self.confirmed)

    @property
    def speedup(self) -> float:
        return self.default_cost / self.best_cost if self.best_cost > 0 else math.inf

    def choose(self, objective: Objective) -> _select.Choice:
        """The winner for another objective, from the confirmed points, without measuring again."""
        return _select.choose(self.confirmed, objective, default=self.default_config, complete=self.complete_range)

    def rescore(self, objective: Objective) -> tuple[Config, float]:
        """(config, cost) of :meth:`choose`."""
        choice = self.choose(objective)
        return choice.config, choice.cost

    def __repr__(self) -> str:
        """One line, never the trials: the winner, its gain over the default, cost and trials.

        Example: ``TuneResult(best: body=scan×4, 1.83× the default, cost 0.42 s, 24 trials)``.
        """
        return (
            f"TuneResult(best: {self._winner_text()}, {self._gain_text()} the default, "
            f"cost {self.best_cost:.4g} s, {len(self.trials)} trials)"
        )

    def _repr_html_(self) -> str:
        """A small table for notebooks (the same facts as :meth:`__repr__`, plus the study)."""
        rows = (
            ("best config", self._winner_text()),
            ("gain over the default", self._gain_text()),
            ("cost", f"{self.best_cost:.4g} s (default {self.default_cost:.4g} s)"),
            ("trials", str(len(self.trials))),
            ("study", self.study_name),
        )
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
        return f"<table><caption>TuneResult</caption>{body}</table>"

    def _winner_text(self) -> str:
        text = self.best_config.label(self.sites)
        return text if len(text) <= 80 else text[:79] + "…"  # a config of many sites: the repr stays one line

    def _gain_text(self) -> str:
        return "∞×" if math.isinf(self.speedup) else f"{self.speedup:.3g}×"

    def over_budget(self, most: int = 3) -> list[TrialRecord]:
        """The cheapest ``most`` trials measured over the memory budget that confirmation left out."""
        limit, held = self.objective.budget_bytes, {p.config for p in self.confirmed}
        over = [r for r in self.trials if r.point() is not None and r.cost is not None and not _select.fits(r, limit)]
        return sorted((r for r in over if r.config not in held), key=lambda r: r.cost)[:most]

    def counts(self) -> dict[str, int]:
        """How many trials came to each outcome."""
        return tally(t.state for t in self.trials)
