"""study/_search: what a trial is and what counts toward ``n_trials``, seen through real studies
(at.tune, in process, on CPU): every config measured once, configs that lower to one program
share its measurement, each trial's cost comes from the one selection rule, and the search ends
when the budget is spent or every config is taken."""

from __future__ import annotations

import re

import jax.numpy as jnp
import pytest
from _presets import FAST

import autotune as at
from autotune import select as _select


def smooth(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=4, name="smooth")[0]


def tune(storage, n_trials: int, sampler: str = "grid"):
    # compile_weight=0: no compile budget, so no trial is pruned on a loaded machine's timings
    # (the pruning rule has tests of its own in test_tune); what counts and what is shared stays.
    return at.tune(
        smooth,
        jnp.ones(8),
        n_trials=n_trials,
        sampler=sampler,
        storage=str(storage),
        timing=FAST,
        confirm_rounds=1,
        isolate=False,
        progress=False,
        compile_weight=0.0,
    )


@pytest.fixture(scope="module")
def everything(tmp_path_factory):
    """A grid study asked for more trials than its space holds."""
    return tune(tmp_path_factory.mktemp("search") / "studies.db", n_trials=50)


def test_the_search_ends_when_every_config_is_taken_each_measured_once(everything):
    r = everything
    configs = [t.config for t in r.trials]
    assert len(r.trials) == r.space_size == len(set(configs)) == 5
    assert configs[0] == r.default_config  # the grid starts at the default
    assert all(t.state in ("complete", "shared") for t in r.trials), [(t.state, t.reason) for t in r.trials]


def test_configs_that_lower_to_one_program_share_its_measurement(everything):
    by_number = {t.number: t for t in everything.trials}
    shared = [t for t in everything.trials if t.state == "shared"]
    assert shared, "scan and fori lower to the same program here: some trial must share"
    for t in shared:
        (source,) = re.findall(r"same program as trial (\d+)", t.reason)
        first = by_number[int(source)]
        assert first.state == "complete" and first.number < t.number
        assert t.measurement["program_hash"] == first.measurement["program_hash"]
        assert t.config != first.config
    hashes = [t.measurement["program_hash"] for t in everything.trials if t.state == "complete"]
    assert len(hashes) == len(set(hashes))  # one full measurement per program


def test_each_trials_cost_is_the_selection_rules_cost_of_its_point(everything):
    for t in everything.trials:
        assert t.cost is not None and t.cost == _select.cost(t.point(), everything.objective)


def test_n_trials_counts_distinct_configs_and_a_resumed_study_measures_only_new_ones(tmp_path):
    storage = tmp_path / "studies.db"
    first = tune(storage, n_trials=2)
    assert len(first.trials) == 2
    again = tune(storage, n_trials=4)
    assert [t.number for t in again.trials] == [0, 1, 2, 3]
    assert [t.config for t in again.trials[:2]] == [t.config for t in first.trials]
    assert len({t.config for t in again.trials}) == 4
    third = tune(storage, n_trials=4)  # the budget is spent: no new trial
    assert [(t.number, t.config) for t in third.trials] == [(t.number, t.config) for t in again.trials]


def test_a_trial_that_cannot_win_stops_timing_once_a_short_estimate_says_so():
    """The ceiling: the seconds a call may take before its calls alone cost CUTOFF times the best
    cost; never for the default (the reference), a Pareto search or before any point."""
    from autotune.select import Point
    from autotune.study._contenders import CUTOFF
    from autotune.study._search import Search

    objective = at.Objective(expected_calls=1000)
    default, other = at.Config(), at.Config({"smooth": {"repr": "for"}})
    search = Search.__new__(Search)  # only the fields the rule reads
    search.search, search.default, search.objective = "cost", default, objective
    points = [Point(default, 0.5, 1e-3)]
    assert search.ceiling(points, other) == pytest.approx(CUTOFF * (0.5 + 1000 * 1e-3) / 1000)
    assert search.ceiling(points, default) is None and search.ceiling([], other) is None
    search.search = "pareto"
    assert search.ceiling(points, other) is None


def test_the_in_process_runner_stops_a_trial_over_its_ceiling_and_says_so():
    from autotune.study._search import _stopped_reason

    # Samples of 0.02 s each: the full sampling takes about 25 of them, the stopped one min_reps (3).
    runner = at.InProcessRunner(at.Call(smooth, (jnp.ones(8),)), {"target_s": 0.5, "min_reps": 3})
    full = runner.measure(None)
    short = runner.measure(None, run_ceiling_s=1e-12)  # any call is over it
    assert short.stopped_early and not full.stopped_early and short.reps * 3 < full.reps
    assert "timing stopped after" in _stopped_reason(short, 1e-12) and _stopped_reason(full, None) is None
    assert runner.measure(None, run_ceiling_s=None).stopped_early is False  # the ceiling is per measure


QUICK = {"timing": FAST, "progress": False, "confirm_top": 1, "confirm_rounds": 1}


def one_gib_a_step(xs, w):  # each step's buffer, xs[i] @ w, is 16384 x 16384 float32: 1 GiB
    return at.loop(lambda c, x: (jnp.tanh((x @ w) @ c), None), jnp.ones(w.shape[1]), xs=xs, name="steps")[0]


@pytest.mark.slow
def test_a_default_over_the_workers_memory_stops_the_study_with_one_line(tmp_path):
    xs, w = jnp.full((2, 16384, 8), 0.01), jnp.full((8, 16384), 0.5)
    with pytest.raises(at.StudyError) as info:
        at.tune(one_gib_a_step, xs, w, trial_memory_gb=0.75, storage=str(tmp_path / "s.db"), **QUICK)
    said = str(info.value)
    assert said.startswith(
        "The default config ran out of memory, so no config can be compared with it: ran out of memory while "
        "running: the config asks for 1.00 GiB of device memory, the worker's limit is 0.75 GiB (trial_memory_gb; "
    ), said
    assert "raise trial_memory_gb above 0.75 (autotune tune --trial-memory GIB)" in said and "\n" not in said
    # Tuned again with room for it, the same study measures the default (its failed trial frees it).
    # Room: XLA's CPU runtime frees a call's temporaries only after its outputs are ready, so the
    # next call allocates its own first (two calls' 1 GiB; each call waited for, so no more).
    room = {**QUICK, "timing": {**FAST, "mode": "blocking"}, "trial_memory_gb": 3.0, "n_trials": 2}
    again = at.tune(one_gib_a_step, xs, w, storage=str(tmp_path / "s.db"), **room)
    (default,) = [t for t in again.trials if t.config == again.default.config and t.state == "complete"]
    assert default.measurement["memory"]["temp"] >= 2**30 and again.best is not None
