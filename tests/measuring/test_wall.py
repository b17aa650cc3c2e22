"""Where a run's wall goes (`autotune.measuring._wall`): parts and stages add up to the wall, the
runners charge their measurements' own figures, and a tuning run reports its breakdown."""

from __future__ import annotations

import time

import jax.numpy as jnp
import pytest
from _presets import FAST

import autotune as at
from autotune.measuring import _wall
from autotune.measuring._wall import OTHER, STAGES, Wall, WallReport, charge, part


def test_parts_and_stages_add_up_to_the_wall_and_other_takes_the_rest():
    with Wall() as wall:
        time.sleep(0.02)
        with part("search"):
            charge("compile", 0.01)
            charge("timing", 0.005)
            time.sleep(0.03)
        charge("load", 0.001)
    report = wall.report()
    assert list(report.parts) == ["setup", "search"]
    assert report.total_s == pytest.approx(sum(report.parts.values()), rel=1e-6)
    for name, stages in report.by_part.items():
        assert set(stages) == {*STAGES, OTHER}
        assert sum(stages.values()) == pytest.approx(report.parts[name], rel=1e-6)
    assert report.by_part["search"]["compile"] == 0.01 and report.by_part["search"]["timing"] == 0.005
    assert report.by_part["setup"]["load"] == 0.001  # charged after the part closed: to the part open then
    assert report.by_stage["compile"] == 0.01
    assert WallReport.from_json(report.to_json()).to_json() == report.to_json()


def test_the_json_adds_up_as_shown_and_reads_back_to_itself():
    """Two parts whose unrounded stage seconds sum to a figure that rounds the other way: the
    JSON's ``by_stage`` is the sum of the ``by_part`` figures it shows (the CI failure of
    a8a06ef: 0.0204 + 0.0152 rounded 0.036 as a sum, 0.035 from the shown parts)."""
    stages = {s: 0.0 for s in STAGES}
    by_part = {"a": {**stages, OTHER: 0.0204}, "b": {**stages, OTHER: 0.0152}}
    report = WallReport(0.0356, {"a": 0.0204, "b": 0.0152}, by_part)
    shown = report.to_json()
    assert shown["by_stage"][OTHER] == 0.035 == shown["by_part"]["a"][OTHER] + shown["by_part"]["b"][OTHER]
    assert WallReport.from_json(shown).to_json() == shown


def test_charges_outside_an_open_wall_go_nowhere():
    charge("compile", 1.0)  # no wall open: nothing to raise, nothing kept
    with Wall() as wall:
        pass
    assert wall.report().by_stage["compile"] == 0.0
    assert _wall.charged("compile") == 0.0


def test_a_measurement_is_split_into_its_own_figures_and_the_wait_for_its_compile():
    m = at.Measurement(trace_s=0.1, lower_s=0.2, compile_s=9.0, run_s=1e-3, run_iqr_s=0.0, reps=5, sampled_s=0.5)
    with Wall() as wall:
        _wall.account(m, 2.0, compiled=True)
        _wall.account(m.replace(loaded_s=0.25), 0.0, compiled=False)  # a re-time: its sampling and load only
    stages = wall.report().by_stage
    assert stages["trace+lower"] == pytest.approx(0.3)
    assert stages["timing"] == pytest.approx(1.0)
    assert stages["load"] == pytest.approx(0.25)
    assert stages["compile"] == pytest.approx(2.0 - 0.3 - 0.5)  # the rest of the wait, not the worker's 9 s


@pytest.mark.parametrize("mode", ["steady", "blocking"])
def test_the_sampling_reports_its_own_wall(mode):
    m = at.measure(lambda x: jnp.sin(x) * 2.0, (jnp.ones(8),), target_s=0.05, warmup=1, timing_mode=mode)
    assert m.timing == mode and m.sampled_s is not None and 0.0 < m.sampled_s < 30.0
    assert at.Measurement.from_dict(m.to_dict()).sampled_s == m.sampled_s


def test_a_tuning_run_reports_where_its_wall_went(tmp_path):
    def f(x):
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=8, name="l")[0]

    r = at.tune(
        f, jnp.ones(4), n_trials=3, sampler="grid", isolate=False, progress=False, timing=FAST,
        confirm_rounds=1, storage=f"sqlite:///{tmp_path / 's.db'}",
    )  # fmt: skip
    wall = r.wall
    assert wall is not None and {"setup", "search", "confirmation", "finish"} <= set(wall.parts)
    assert wall.total_s == pytest.approx(r.wall_s, rel=0.1, abs=0.5)
    search = wall.by_part["search"]
    assert search["timing"] > 0 and search["compile"] > 0 and search["trace+lower"] > 0
    assert search["process starts"] == 0.0  # in-process: no worker
    for name, stages in wall.by_part.items():
        assert sum(stages.values()) == pytest.approx(wall.parts[name], rel=1e-6), name


@pytest.mark.slow  # a worker process
def test_the_wait_for_a_worker_to_start_is_charged_as_a_process_start():
    """Nothing overlaps the worker's start here, so this process waits for it (a tuning run starts
    its worker first and traces meanwhile: there the wait, and the charge, can be nil)."""
    from autotune.measuring.process import WorkerRunner

    call = at.Call(lambda x: jnp.sin(x) * 2.0, (jnp.ones(4),))
    with Wall() as wall, WorkerRunner(call, FAST) as runner:
        runner.measure(None)
    stages = wall.report().by_stage
    assert stages["process starts"] > 0.2  # importing JAX in a fresh process takes longer than that
    assert stages["compile"] > 0 and stages["timing"] > 0
