"""A study's trials as autotune reads them: the attributes each trial keeps, and one trial's view.

Optuna-free (it reads a frozen trial's attributes, never imports Optuna), so the study's
storage (:mod:`autotune.study._optuna`, the only Optuna importer) stays small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.measuring._outcome import Outcome, counts_toward_trials
from autotune.program._config import Config

TRIAL_ATTRS = (
    "config",
    "device",
    "outcome",
    "reason",
    "measurement",
    "program_hash",
    "shared_with",
    "compile_s_at_least",
    "predicted_compile_s",
    "owner",
    "lease_until",
)
"""User attributes of a trial: its config (canonical JSON), device key, :class:`Outcome`, reason,
measurement (``Measurement.to_dict()``), lowered-program hash, the trial whose measurement it
shares, a compile-time lower bound when stopped, a predicted compile time when skipped, and its lease."""


@dataclass(frozen=True)
class TrialView:
    """One trial as autotune reads it."""

    number: int
    trial_id: int
    state: str  # Optuna's state name: WAITING, RUNNING, COMPLETE, PRUNED, FAIL
    outcome: Outcome | None  # None while running or waiting
    config_json: str | None
    reason: str | None
    measurement: dict[str, Any] | None
    values: tuple[float, ...] | None
    attrs: dict[str, Any]

    @property
    def config(self) -> Config | None:
        return None if self.config_json is None else Config.from_json(self.config_json)

    @property
    def takes_config(self) -> bool:
        """Whether this trial holds its config (so no other trial measures it). A default that ran
        out of memory stopped its study and frees its config (``frees_config``): a run with more
        memory measures it again."""
        if self.config_json is None or self.attrs.get("frees_config"):
            return False
        return self.outcome is None or not self.outcome.releases

    @property
    def skipped(self) -> bool:
        """Closed on its predicted compile time before compiling: no measurement."""
        return self.attrs.get("predicted_compile_s") is not None

    @property
    def counted(self) -> bool:
        """Whether the trial counts toward the search's budget (:func:`counts_toward_trials`):
        one still running does (its config is taken), a queued one does not."""
        return counts_toward_trials(self.outcome, self.skipped, running=self.state == "RUNNING")


def view(t: Any, space=None) -> TrialView:
    attrs = dict(t.user_attrs)
    config = attrs.get("config")
    if config is None and space is not None and "fixed_params" in t.system_attrs:  # enqueued, not yet labelled
        config = space.from_params(t.system_attrs["fixed_params"]).to_json()
    outcome = attrs.get("outcome")
    if outcome == "fail":  # studies written before the Outcome enum
        outcome = "error"
    try:
        outcome = Outcome(outcome) if outcome else (Outcome.COMPLETE if t.state.name == "COMPLETE" else None)
    except ValueError:
        outcome = Outcome.ERROR
    if outcome is None and t.state.name in ("FAIL", "PRUNED"):
        outcome = Outcome.ERROR if t.state.name == "FAIL" else Outcome.PRUNED
    values = tuple(t.values) if t.values else None
    return TrialView(
        t.number,
        t._trial_id,
        t.state.name,
        outcome,
        config,
        attrs.get("reason"),
        attrs.get("measurement"),
        values,
        attrs,
    )
