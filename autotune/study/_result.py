"""What a study returns: one record per trial and the result of the whole search."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .. import _select
from .._config import Config
from .._measure import Measurement
from .._objective import Objective
from .._runner import Outcome


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
    def outcome(self) -> Outcome | None:
        """The :class:`Outcome`, or None for a trial another worker is still measuring."""
        try:
            return Outcome(self.state)
        except ValueError:
            return None

    def point(self) -> dict[str, Any] | None:
        """The trial as a selection point (counted trials only)."""
        m = self.measurement
        if self.outcome is None or not self.outcome.counts or not m:
            return None
        charged = Measurement.from_dict(m)  # the seconds the objective charges
        point = {"config": self.config.to_dict(), "compile_s": charged.compile_cost_s, "run_s": charged.run_cost_s}
        if m.get("rounds"):
            point["rounds"] = m["rounds"]
        return point

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "config": self.config.to_dict(),
            "state": self.state,
            "cost": self.cost,
            "reason": self.reason,
            "measurement": self.measurement,
            "compile_s_at_least": self.compile_s_at_least,
            "predicted_compile_s": self.predicted_compile_s,
        }


@dataclass
class TuneResult:
    """What a study found.

    Attributes:
        best_config: the winner (:func:`autotune._select.winner` over the confirmed points:
            a challenger beats the default only on its median cost *and* in enough paired rounds:
            3 of 3, 5 of 6, see :func:`autotune._select.wins_needed`).
        best_cost: its cost under ``objective``; ``best`` its confirmed measurement.
        default_cost: the default config's confirmed cost.
        trials: one :class:`TrialRecord` per trial of the study, resumed ones included.
        confirmed: every confirmed point (``config``, ``compile_s``, ``run_s``, ``rounds``),
            the default's among them; ``pareto`` the non-dominated ones.
        complete_range: the call counts over which the measurements are complete
            (:func:`autotune._select.complete_range`): outside it a config the study did not
            measure (or stopped) could be cheaper.
        finished: the study already held its trials and a confirmation of exactly them, so
            nothing was measured: every figure is the stored confirmation's (``reconfirm=True``
            re-times anyway). ``new_trials``: measured trials this run added.
        stored: ``"written"`` or ``"kept"`` once ``fn.tune`` stored it (the cache keeps an
            entry of the same study unless this run's paired rounds beat it), else None.
        unrewritable: the sites the rewrite could not re-emit for any choice (``{site id:
            why}``): each cost the study one error trial and stayed at its default after it.
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
    confirmed: list[dict[str, Any]] = field(default_factory=list)
    default_config: Config = field(default_factory=Config)
    complete_range: dict[str, Any] | None = None
    wall_s: float = 0.0
    search: str = "cost"  # "cost" (one weighted objective) | "pareto" (NSGA-II on compile_s, run_s)
    finished: bool = False  # the study had nothing new to measure: no trial, no confirmation ran
    new_trials: int = 0  # measured trials this run added to the study (any worker)
    stored: str | None = None  # what the cache did: "written", "kept" (see Autotuned.tune), None: not stored
    unrewritable: dict[str, str] = field(default_factory=dict)  # site id -> why it stayed at its default

    @property
    def pareto(self) -> list[dict[str, Any]]:
        """The confirmed points no other beats on both compile and run seconds, by compile time."""
        return _select.pareto_front(self.confirmed)

    @property
    def speedup(self) -> float:
        return self.default_cost / self.best_cost if self.best_cost > 0 else math.inf

    def choose(self, objective: Objective) -> _select.Choice:
        """The winner for another objective, from the confirmed points, without measuring again."""
        return _select.choose(
            self.confirmed, objective, default=self.default_config.to_dict(), complete=self.complete_range
        )

    def rescore(self, objective: Objective) -> tuple[Config, float]:
        """(config, cost) of :meth:`choose`."""
        choice = self.choose(objective)
        return Config.from_dict(choice.config), choice.cost

    def counts(self) -> dict[str, int]:
        """How many trials came to each outcome."""
        out: dict[str, int] = {}
        for t in self.trials:
            out[t.state] = out.get(t.state, 0) + 1
        return out
