"""Confirmation: contenders re-timed side by side, compiled again only where compile noise matters."""

from __future__ import annotations

import jax.numpy as jnp

import autotune as at
from autotune._runner import InProcessRunner
from autotune.study._confirm import COMPILE_NOISE, confirm, contenders

FAST = {"target_s": 0.01, "min_reps": 3, "warmup": 1}
DEFAULT = at.Config({})
UNROLL2 = at.Config({"l": {"repr": "scan", "unroll": 2}})
FOR = at.Config({"l": {"repr": "for"}})


def loop8(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=8, name="l")[0]


class CountingRunner(InProcessRunner):
    """The real in-process runner, counting what confirmation asks of it."""

    def __init__(self):
        super().__init__(loop8, (jnp.ones(4),), {}, {}, FAST)
        self.measured: list[at.Config] = []
        self.retimed: list[at.Config] = []

    def measure(self, config, **kw):
        self.measured.append(at.Config.from_dict(config))
        return super().measure(config, **kw)

    def retime(self, config):
        self.retimed.append(at.Config.from_dict(config))
        return super().retime(config)


def search_points(runner: CountingRunner, compile_s: float) -> list[dict]:
    """What a search leaves: the default's three reference rounds and one sample of a rival,
    with compile figures pinned so that only compile noise separates them."""
    d, r = runner.measure(DEFAULT), runner.measure(UNROLL2)
    runner.measured.clear()
    return [{"config": DEFAULT.to_dict(), "compile_s": compile_s, "run_s": d.run_s,
             "rounds": [[compile_s, d.run_s]] * 3},
            {"config": UNROLL2.to_dict(), "compile_s": compile_s, "run_s": r.run_s}]


def test_a_margin_within_compile_noise_tops_up_only_the_missing_compile_samples():
    runner = CountingRunner()
    # At 0 calls the cost is compile time alone, and both configs hold the same compile
    # figures: the margin (0) is within COMPILE_NOISE, so compiles are taken again.
    goal = at.Objective(expected_calls=0)
    confirmed = confirm(runner, search_points(runner, 1.0), DEFAULT, goal, top=3, rounds=3)
    # The default's three reference rounds already make three samples; the rival had one.
    assert runner.measured == [UNROLL2, UNROLL2]
    assert sorted(runner.retimed, key=str) == sorted([DEFAULT, UNROLL2] * 3, key=str)
    by = {at.Config.from_dict(p["config"]): p for p in confirmed}
    assert "recompiled" not in by[DEFAULT] and by[UNROLL2]["recompiled"] == 2
    # The rival's re-timed rounds now take the median of its three compile samples (the
    # pinned 1.0 and two real compiles far below it); the default's stay at its reference.
    assert all(c == 1.0 for c, _ in by[DEFAULT]["rounds"])
    assert all(c < 1.0 for c, _ in by[UNROLL2]["rounds"]) and len(by[UNROLL2]["rounds"]) == 3


def test_a_margin_beyond_compile_noise_compiles_nothing():
    runner = CountingRunner()
    points = search_points(runner, 1.0)
    points[1]["compile_s"] = 1.0 * (1 + 4 * COMPILE_NOISE)  # far beyond the noise at 0 calls
    confirm(runner, points, DEFAULT, at.Objective(expected_calls=0), top=3, rounds=3)
    assert runner.measured == [] and len(runner.retimed) == 6


def test_a_contender_whose_executable_is_gone_is_measured_in_full_once_and_that_compile_counts():
    runner = CountingRunner()
    points = search_points(runner, 1.0)
    runner.store.clear()  # as after a worker was replaced: nothing left to re-time
    confirmed = confirm(runner, points, DEFAULT, at.Objective(expected_calls=0), top=3, rounds=3)
    by = {at.Config.from_dict(p["config"]): p for p in confirmed}
    # Round 1 measures both in full (keeping the executables); rounds 2 and 3 re-time them.
    assert runner.measured[:2] == [UNROLL2, DEFAULT] and len(runner.retimed) == 6
    # The fresh compile counts: the default holds 4 samples and never compiles again; the
    # rival holds 2, so at most one more when its margin is within noise.
    assert runner.measured[2:] in ([], [UNROLL2])
    assert by[UNROLL2].get("recompiled") == (1 if runner.measured[2:] else None)
    assert "recompiled" not in by[DEFAULT] and all(len(p["rounds"]) == 3 for p in confirmed)


def test_the_default_is_always_a_contender_and_the_cheapest_come_first():
    points = [{"config": UNROLL2.to_dict(), "compile_s": 0.1, "run_s": 1e-3},
              {"config": FOR.to_dict(), "compile_s": 0.5, "run_s": 1e-4}]
    got = contenders(points, DEFAULT, at.Objective(expected_calls=10), top=1)
    assert got[0] == UNROLL2 and got[-1] == DEFAULT and FOR in got  # FOR is on the Pareto front
