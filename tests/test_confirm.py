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


def search_points(runner: CountingRunner, default_s: float, rival_s: float) -> list[dict]:
    """What a search leaves: the default's three reference rounds and one sample of a rival,
    with pinned compile figures (far above the real ones, so a test can tell them apart)."""
    d, r = runner.measure(DEFAULT), runner.measure(UNROLL2)
    runner.measured.clear()
    return [{"config": DEFAULT.to_dict(), "compile_s": default_s, "run_s": d.run_s,
             "rounds": [[default_s, d.run_s]] * 3},
            {"config": UNROLL2.to_dict(), "compile_s": rival_s, "run_s": r.run_s}]


def fresh(point) -> bool:
    """Every round's compile is a real one from confirmation, none a pinned search figure."""
    return all(c < 0.5 for c, _ in point["rounds"])


def test_a_margin_within_compile_noise_is_decided_on_compiles_taken_side_by_side():
    runner = CountingRunner()
    # At 0 calls the cost is compile time alone, and the search gave both the same compile
    # figure: the margin (0) is within COMPILE_NOISE, so every round compiles both afresh.
    confirmed = confirm(runner, search_points(runner, 1.0, 1.0), DEFAULT, at.Objective(expected_calls=0),
                        top=3, rounds=3)
    assert runner.measured == [UNROLL2, DEFAULT, DEFAULT, UNROLL2, UNROLL2, DEFAULT]  # interleaved
    assert runner.retimed == []
    by = {at.Config.from_dict(p["config"]): p for p in confirmed}
    # The search's figures (taken earlier, the default's first of all) do not enter the decision.
    assert fresh(by[DEFAULT]) and fresh(by[UNROLL2]) and all(len(p["rounds"]) == 3 for p in confirmed)
    assert by[DEFAULT]["measurement"]["compile_s"] < 0.5 and "recompiled" not in by[DEFAULT]


def test_a_margin_beyond_compile_noise_compiles_nothing():
    runner = CountingRunner()
    points = search_points(runner, 1.0, 1.0 * (1 + 4 * COMPILE_NOISE))  # far beyond the noise at 0 calls
    confirmed = confirm(runner, points, DEFAULT, at.Objective(expected_calls=0), top=3, rounds=3)
    assert runner.measured == [] and len(runner.retimed) == 6
    by = {at.Config.from_dict(p["config"]): p for p in confirmed}  # re-timed rounds keep the search's compiles
    assert [c for c, _ in by[DEFAULT]["rounds"]] == [1.0] * 3 and [c for c, _ in by[UNROLL2]["rounds"]] == [1.6] * 3


def test_a_margin_that_falls_within_noise_on_re_timing_tops_up_fresh_compiles_to_the_rounds():
    runner = CountingRunner()
    points = search_points(runner, 1.0, 1.6)  # beyond the noise on the search's figures
    runner.store.clear()  # as after a worker was replaced: nothing left to re-time
    confirmed = confirm(runner, points, DEFAULT, at.Objective(expected_calls=0), top=3, rounds=3)
    # Round 1's re-times find nothing, so both are measured in full (which keeps their
    # executables); rounds 2 and 3 re-time them.
    assert runner.measured[:2] == [DEFAULT, UNROLL2] and len(runner.retimed) == 6
    # Their medians (1.0 of [1, 1, 1, fresh]; 0.8 of [1.6, fresh]) now lie within the noise,
    # so each gets two more fresh compiles, interleaved, to hold three from confirmation.
    assert runner.measured[2:] == [DEFAULT, UNROLL2, DEFAULT, UNROLL2]
    by = {at.Config.from_dict(p["config"]): p for p in confirmed}
    assert by[DEFAULT]["recompiled"] == 2 and by[UNROLL2]["recompiled"] == 2
    assert fresh(by[DEFAULT]) and fresh(by[UNROLL2])


def test_the_default_is_always_a_contender_and_the_cheapest_come_first():
    points = [{"config": UNROLL2.to_dict(), "compile_s": 0.1, "run_s": 1e-3},
              {"config": FOR.to_dict(), "compile_s": 0.5, "run_s": 1e-4}]
    got = contenders(points, DEFAULT, at.Objective(expected_calls=10), top=1)
    assert got[0] == UNROLL2 and got[-1] == DEFAULT and FOR in got  # FOR is on the Pareto front
