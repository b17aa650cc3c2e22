"""autotune/report/_data.py: a report's data, read through the study adapter, decided by `_select`."""

from __future__ import annotations

import collections
import json

import jax.numpy as jnp
import optuna
import pytest
from _report_study import CONFIRMED, DEFAULT, FAST, FOR, FORI, forged_study, tiny_study
from jax import lax

import autotune as at
from autotune import select as _select
from autotune.measuring._runner import InProcessRunner
from autotune.report import load_study_report, report, studies_for_file
from autotune.report._figures import FIGURES


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return tiny_study(tmp_path_factory)


@pytest.fixture(scope="module")
def forged(tmp_path_factory):
    return forged_study(tmp_path_factory)


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_the_report_names_what_tune_decided(study):
    result = study["result"]
    rep = load_study_report(result.study_name, study["storage"])
    counts = rep.outcome_counts()
    assert counts["error"] == 1 and counts["rejected"] == 1 and counts["timeout"] == 1
    # Every other config once: measured, shared (lowered to an earlier program) or, on a loaded
    # machine, pruned because its compile alone could not win.
    assert counts.get("complete", 0) + counts.get("shared", 0) + counts.get("pruned", 0) == 5
    # The report counts exactly what tune() recorded (plus the timeout another worker wrote).
    recorded = collections.Counter(t.state for t in result.trials) + collections.Counter({"timeout": 1})
    assert counts == dict(recorded)
    key = lambda p: (json.dumps(p["config"], sort_keys=True), p["compile_cost_s"], p["run_cost_s"])  # noqa: E731
    assert sorted(map(key, rep.pareto)) == sorted(key(p.to_json()) for p in result.pareto)
    assert at.Config.from_dict(rep.chosen["config"]) == result.best_config
    assert rep.chosen["cost"] == pytest.approx(result.best_cost) and rep.chosen["in_range"]
    assert rep.intervals == _select.crossover_intervals(result.confirmed, default=result.default_config)
    assert rep.default["config"] == result.default.config.to_dict() == {"smooth": {"repr": "scan", "unroll": 1}}
    assert rep.complete_range == _select.range_json(result.complete_range)
    # Every cost shown is the one rule's cost (the median of the round costs).
    for p in rep.shown:
        assert rep.cost_of(p) == p["cost"] == _select.cost(_select.Point.from_json(p), result.objective)
    # Re-scored for another call count: the pick comes from the same rule, as the decorator does.
    rep1 = load_study_report(result.study_name, study["storage"], expected_calls=1)
    assert rep1.chosen["config"] == result.choose(at.Objective(expected_calls=1)).config.to_dict()
    assert rep1.objective.expected_calls == 1


def test_a_dominated_default_that_wins_is_shown_with_its_interval(forged):
    rep = load_study_report(forged["name"], forged["storage"])
    assert rep.chosen["config"] == DEFAULT  # FORI's medians are lower, but it loses two of three rounds
    # The study recorded its confirmation in the older spelling (compile_s, run_s): it reads as it did.
    assert [p["config"] for p in rep.shown] == [FORI, DEFAULT, FOR]  # by compile time
    assert [p.config for p in rep.shown_points] == [at.Config(c) for c in (FORI, DEFAULT, FOR)]
    shown = {json.dumps(p["config"], sort_keys=True): p for p in rep.shown}
    d, fori = shown[json.dumps(DEFAULT, sort_keys=True)], shown[json.dumps(FORI, sort_keys=True)]
    assert not d["on_front"] and d["optimal"] and fori["on_front"] and fori["optimal"] == []
    assert [p["config"] for p in rep.pareto] == [FORI, FOR]
    assert rep.intervals == _select.crossover_intervals(CONFIRMED, default=DEFAULT)
    assert [p["label"] for p in rep.shown] == ["A", "B", "C"]


def test_outside_the_complete_range_the_report_says_so_and_gives_the_command(forged):
    inside = load_study_report(forged["name"], forged["storage"])
    assert inside.in_range and inside.to_dict()["retune_command"] is None
    outside = load_study_report(forged["name"], forged["storage"], expected_calls=5000)
    assert not outside.in_range and not outside.chosen["in_range"]
    data = outside.to_dict()
    assert data["in_range"] is False and data["complete_range"]["to_calls"] == 2000.0
    assert data["retune_command"] == "autotune tune /studies/forged.py --expected-calls 5000"
    json.dumps(data, allow_nan=False)


def test_studies_for_file_finds_the_study_of_its_function(study):
    assert studies_for_file(study["file"], study["storage"]) == [study["result"].study_name]


def test_a_study_where_nothing_ran_still_reports(tmp_path):
    class Broken(InProcessRunner):
        def measure(self, config, **options):
            raise RuntimeError("no backend")

    fn = lambda x: at.loop(lambda c, _: (c + 1.0, None), x, length=4, name="l")[0]  # noqa: E731
    storage = str(tmp_path / "s.db")
    with pytest.raises(at.StudyError):
        at.tune(
            fn,
            jnp.zeros(2),
            function_key="m:broken",
            storage=storage,
            sampler="grid",
            progress=False,
            runner=Broken(at.Call(fn, (jnp.zeros(2),)), FAST),
        )
    (name,) = optuna.study.get_all_study_names(storage="sqlite:///" + storage)
    rep = load_study_report(name, storage)
    assert rep.pareto == [] and rep.shown == [] and rep.chosen is None
    assert {t.outcome for t in rep.trials} == {"error"} and all(t.failed for t in rep.trials)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_while_loop_study_reports_its_dynamic_length(tmp_path):
    def fn(x):
        return lax.while_loop(lambda s: s[1] < 6, lambda s: (s[0] * 0.9 + 0.1, s[1] + 1), (x, 0))[0]

    storage = str(tmp_path / "w.db")
    result = at.tune(
        fn,
        jnp.ones(4),
        function_key="m:whiles",
        storage=storage,
        sampler="grid",
        n_trials=3,
        timing=FAST,
        runner=InProcessRunner(at.Call(fn, (jnp.ones(4),)), FAST),
        confirm_rounds=1,
        progress=False,
    )
    rep = load_study_report(result.study_name, storage)
    (site,) = rep.sites
    assert site["kind"] == "while" and site["length"] is None and rep.tunable_sites == [site]
    assert rep.default_config == {site["id"]: {"repr": "while", "unroll": 1}}
    files = report(str(tmp_path / "out"), study_names=[result.study_name], storage=storage)
    assert len(files.figures) == len(FIGURES)


def test_a_missing_storage_is_one_clear_error_and_no_new_file(tmp_path):
    missing = tmp_path / "missing.db"
    with pytest.raises(at.StudyError, match="autotune tune"):
        load_study_report("s", str(missing))
    assert not missing.exists()


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_budgeted_study_reports_each_trials_memory_and_chooses_as_tune_did(tmp_path):
    def rollout(x, w):
        return lax.scan(lambda c, _: (jnp.tanh(c @ w), jnp.outer(c[0], c[0])), x, None, length=16)

    args = (jnp.ones((8, 128)), jnp.ones((128, 128)))
    storage = f"sqlite:///{tmp_path / 's.db'}"
    free = at.tune(rollout, *args, sampler="grid", storage=storage, isolate=False, progress=False, timing=FAST)
    sizes = sorted({t.memory_bytes for t in free.trials if t.memory_bytes is not None})
    assert len(sizes) > 1  # the premise: the configs differ in memory
    budget = sizes[0]  # only the leanest configs fit
    kept = at.tune(
        rollout, *args, sampler="grid", storage=storage, isolate=False, progress=False, timing=FAST, max_memory=budget
    )
    rep = load_study_report(kept.study_name, storage)
    assert rep.objective.max_memory == budget
    assert {t.number: t.memory_bytes for t in rep.trials if t.counts} == {
        t.number: t.memory_bytes
        for t in kept.trials
        if t.memory_bytes is not None and t.state in ("complete", "shared")
    }
    assert rep.chosen["config"] == kept.best_config.to_dict() and kept.best.memory_bytes <= budget
