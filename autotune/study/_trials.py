"""A study's trials as autotune reads them: the attributes each trial keeps, and one trial's view.

Optuna-free (it reads a frozen trial's attributes, never imports Optuna), so the study's
storage (:mod:`autotune.study._optuna`, the only Optuna importer) stays small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune import _display
from autotune.measuring._outcome import Outcome, counts_toward_trials
from autotune.program._config import Config
from autotune.select._budget import within

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
    "memory_bytes",
    "memory_over_bytes",
)
"""User attributes of a trial: its config (canonical JSON), device key, :class:`Outcome`, reason,
measurement (``Measurement.to_dict()``), lowered-program hash, the trial whose measurement it
shares, a compile-time lower bound when stopped, a predicted compile time when skipped, its lease,
and its config's device memory (``memory_bytes``) with, under a memory budget, how far over it it is."""


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


def memory_attrs(used: int | None, max_memory: int | None) -> dict[str, int | None]:
    """A measured trial's memory attributes: its device memory (``memory_bytes``) and, under a
    budget, how far over it (``memory_over_bytes``, negative where it fits; a figure XLA did not
    report counts as over: the constraint Optuna's samplers read, `_optuna.make_sampler`)."""
    if max_memory is None:
        return {"memory_bytes": used}
    return {"memory_bytes": used, "memory_over_bytes": (used - max_memory) if used is not None else 1}


def over_budget(used: int | None, max_memory: int | None) -> str | None:
    """The reason a trial carries when its config is over the memory budget, or None where it fits."""
    if within(used, max_memory):
        return None
    said = "XLA reported no memory figure" if used is None else _display.memory(used)
    return f"over the memory budget ({said} > {_display.memory(max_memory)}): it cannot win"
