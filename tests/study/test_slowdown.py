"""autotune.study._slowdown: a study tuned for tier-up measures the slowdown of the default's calls
beside a compile and keeps it on the default's point, where the rule, the cache and the tables read it."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from _presets import STEADY

import autotune as at
from autotune.measuring._runner import InProcessRunner
from autotune.program._config import Config
from autotune.select import Point, point_of
from autotune.select._objective import Objective
from autotune.select._tiered import tiers
from autotune.study._slowdown import measure_slowdown

DEFAULT, FOR = Config(), Config({"l": {"repr": "for"}})


def body(c, _):
    for _ in range(12):  # a long body: written out 8 times (`for`), it compiles several times longer
        c = jnp.sin(c) * 0.9 + 0.1 * jnp.cos(c * 1.1)
    return c, None


def smooth(x):
    return at.loop(body, x, length=8, name="l")[0]


def tuned(tmp_path, tier_up: bool):
    fn = at.autotuned(cache=str(tmp_path / "cache.db"), key="slow:smooth", tier_up=tier_up, expected_calls=1000)(smooth)
    # the whole grid (7 configs) confirmed in one round, so `for` is among the confirmed points
    return fn, fn.tune(jnp.ones(8), confirm_top=16, confirm_rounds=1, progress=False, timing={"target_s": 0.02})


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_tier_up_study_measures_the_slowdown_and_the_cache_keeps_it(tmp_path):
    fn, r = tuned(tmp_path, tier_up=True)
    theirs = point_of(r.confirmed, r.default_config)
    assert any(tiers(p, theirs, r.objective) for p in r.confirmed)  # `for` qualifies for tier-up
    assert theirs.slowdown is not None and theirs.slowdown >= 1.0
    assert theirs.compile_slowdown is not None and theirs.compile_slowdown >= 1.0
    assert [p.config for p in r.confirmed if p.slowdown is not None] == [r.default_config]
    assert [p.config for p in r.confirmed if p.compile_slowdown is not None] == [r.default_config]
    lookup = fn.config_for(jnp.ones(8))  # the stored entry, read back from the SQLite file
    assert lookup.source == "cache" and lookup.entry.default_point.slowdown == pytest.approx(theirs.slowdown)
    assert lookup.entry.default_point.compile_slowdown == pytest.approx(theirs.compile_slowdown)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_study_without_tier_up_measures_none(tmp_path):
    _, r = tuned(tmp_path, tier_up=False)
    assert all(p.slowdown is None and p.compile_slowdown is None for p in r.confirmed)


def measured_runner():
    runner = InProcessRunner(at.Call(smooth, (jnp.ones(8),)), STEADY)
    runner.measure(DEFAULT)
    return runner


POINTS = [Point(DEFAULT, 0.01, 1e-5), Point(FOR, 0.5, 1e-6)]  # `for` qualifies: 50x the compile, +0.49 s


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_the_slowdown_is_measured_on_the_defaults_kept_executable():
    with measured_runner() as runner:
        points, notes = measure_slowdown(runner, POINTS, DEFAULT, Objective(1000, tier_up=True))
    assert notes == [] and points[0].slowdown >= 1.0 and points[1] == POINTS[1] and points[1].slowdown is None
    assert points[0].compile_slowdown >= 1.0 and points[1].compile_slowdown is None


def test_nothing_is_measured_without_tier_up_or_a_point_that_qualifies():
    with measured_runner() as runner:
        assert measure_slowdown(runner, POINTS, DEFAULT, Objective(1000)) == (POINTS, [])
        close = [POINTS[0], Point(FOR, 0.02, 1e-6)]  # compiles 10 ms longer: tier-up would not apply
        assert measure_slowdown(runner, close, DEFAULT, Objective(1000, tier_up=True)) == (close, [])


def test_a_default_no_longer_kept_leaves_the_points_as_they_are_and_says_why():
    with InProcessRunner(at.Call(smooth, (jnp.ones(8),)), STEADY) as runner:  # nothing measured, nothing kept
        points, notes = measure_slowdown(runner, POINTS, DEFAULT, Objective(1000, tier_up=True))
    assert points == POINTS and len(notes) == 1 and "1.6 is charged" in notes[0]


def test_a_runner_whose_retime_takes_no_beside_is_charged_the_default_figure_with_a_note():
    from _fake_runner import FakeRunner

    runner = FakeRunner(smooth, (jnp.ones(8),), {"l=for": (0.5, 1e-6), "*": (0.01, 1e-5)})
    runner.measure(DEFAULT)
    points, notes = measure_slowdown(runner, POINTS, DEFAULT, Objective(1000, tier_up=True))
    assert points == POINTS and len(notes) == 1 and "takes no beside=" in notes[0] and "1.6 is charged" in notes[0]


def test_a_tier_up_tune_through_such_a_runner_warns_once_and_still_picks(tmp_path):
    from _fake_runner import FakeRunner

    costs = {"l=for": (0.5, 1e-6), "*": (0.01, 1e-5)}
    runner = FakeRunner(smooth, (jnp.ones(8),), costs)
    options = {"sampler": "grid", "xla": False, "progress": False, "confirm_top": 16, "confirm_rounds": 1}
    with pytest.warns(RuntimeWarning, match="takes no beside=") as caught:
        r = at.tune(
            smooth,
            jnp.ones(8),
            runner=runner,
            storage=str(tmp_path / "studies.db"),
            expected_calls=100_000,
            tier_up=True,
            **options,
        )
    assert len([w for w in caught if "beside" in str(w.message)]) == 1
    assert r.best_config == FOR  # 1e-6 s a call over 100,000 calls: `for` wins, tiered or not


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_failed_timing_beside_a_compile_leaves_the_points_and_says_why(monkeypatch):
    from autotune.measuring import _beside, _stages

    def broken(k):
        raise ValueError("no compiler here")

    monkeypatch.setattr(_beside, "_stand_in", broken)
    # The calls go on until a stand-in has compiled beside them, at most BESIDE_CALLS_S (30 s): none
    # ever does here, so the test waits that long; 1 s ends the same way.
    monkeypatch.setattr(_stages, "BESIDE_CALLS_S", 1.0)
    with measured_runner() as runner:
        points, notes = measure_slowdown(runner, POINTS, DEFAULT, Objective(1000, tier_up=True))
    assert points == POINTS and len(notes) == 1 and "no compiler here" in notes[0] and "1.6 is charged" in notes[0]
