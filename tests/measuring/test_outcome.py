"""One rule for counted trials: ``measuring._outcome.counts_toward_trials``, which a study's view of a
trial (the search's budget), a result's record and the tally of both apply alike."""

from __future__ import annotations

import pytest

from autotune.measuring._outcome import Outcome, counted, counts_toward_trials
from autotune.program._config import Config
from autotune.study._result import TrialRecord
from autotune.study._trials import TrialView


def _view(state: str, outcome: Outcome | None, skipped: bool) -> TrialView:
    attrs = {"predicted_compile_s": 12.0} if skipped else {}
    return TrialView(0, 0, state, outcome, "{}", None, None, None, attrs)


def _record(outcome: Outcome | None, skipped: bool) -> TrialRecord:
    return TrialRecord(
        0, Config(), "running" if outcome is None else outcome.value, predicted_compile_s=12.0 if skipped else None
    )


@pytest.mark.parametrize("skipped", [False, True])
@pytest.mark.parametrize("outcome", list(Outcome))
def test_a_view_a_record_and_the_tally_agree_on_every_outcome(outcome, skipped):
    rule = counts_toward_trials(outcome, skipped)
    state = "COMPLETE" if outcome.counts else "PRUNED"
    view, record = _view(state, outcome, skipped), _record(outcome, skipped)
    assert view.counted == record.counted == rule
    assert counted([view]) == counted([record]) == int(rule)
    assert rule == (not outcome.releases and not skipped)


def test_a_trial_in_flight_counts_for_the_budget_only_while_running():
    assert counts_toward_trials(None, False, running=True)
    assert _view("RUNNING", None, False).counted  # its config is taken
    assert not _view("WAITING", None, False).counted  # queued, never taken
    assert not _record(None, False).counted  # a result counts ended trials only
    assert counted([_view("RUNNING", None, False), _view("WAITING", None, False), _record(None, False)]) == 1
