"""Confirmation: contenders re-timed side by side, compiled again only where compile noise matters."""

from __future__ import annotations

import jax.numpy as jnp

import autotune as at
from autotune._runner import InProcessRunner
from autotune import _select
from autotune.study._confirm import COMPILE_NOISE, PROCESS_NOISE, confirm, contenders, second_process

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
    assert got[0] == UNROLL2 and got[-1] == DEFAULT and FOR in got  # FOR is cheapest above 444 calls


def test_a_front_point_that_is_never_cheapest_is_not_confirmed_except_for_a_pareto_search():
    mid = at.Config({"l": {"repr": "scan", "unroll": 4}})
    points = [{"config": UNROLL2.to_dict(), "compile_s": 0.1, "run_s": 1e-3},
              {"config": mid.to_dict(), "compile_s": 0.4, "run_s": 6e-4},  # on the front, above the envelope
              {"config": FOR.to_dict(), "compile_s": 0.5, "run_s": 1e-4}]
    assert mid.to_dict() in [p["config"] for p in _select.pareto_front(points)]
    got = contenders(points, DEFAULT, at.Objective(expected_calls=10), top=1)
    assert got == [UNROLL2, FOR, DEFAULT]  # no call count has mid cheapest: re-timing it decides nothing
    assert mid in contenders(points, DEFAULT, at.Objective(expected_calls=10), top=1, whole_front=True)


class TwoProcessRunner(CountingRunner):
    """The real runner, its runtimes set per process (``renew`` starts process 2, which loses
    every executable as a fresh worker does), so a test can say where a challenger wins; the
    key ``"others"`` sets every config not named."""

    def __init__(self, run_s: list[dict[at.Config, float]]):
        super().__init__()
        self.run_s, self.process, self.renewed = run_s, 0, 0

    def renew(self):
        self.renewed += 1
        self.process += 1
        self.store.clear()
        return True

    def _set(self, m):
        if m is None:
            return None
        table = self.run_s[self.process]
        return m.replace(run_s=table.get(m.config, table.get("others", m.run_s)))

    def measure(self, config, **kw):
        return self._set(super().measure(config, **kw))

    def retime(self, config):
        return self._set(super().retime(config))


def runtime_points(runner, lead: float) -> list[dict]:
    d, r = runner.measure(DEFAULT), runner.measure(UNROLL2)
    runner.measured.clear()
    return [{"config": DEFAULT.to_dict(), "compile_s": d.compile_total_s, "run_s": 1e-3,
             "rounds": [[d.compile_total_s, 1e-3]] * 3},
            {"config": UNROLL2.to_dict(), "compile_s": r.compile_total_s, "run_s": 1e-3 * (1 - lead)}]


RUNTIME = at.Objective(expected_calls=1e6)  # runtime decides: compile seconds are noise here


def test_a_close_lead_must_hold_in_a_second_process_or_the_default_stays():
    runner = TwoProcessRunner([{DEFAULT: 1e-3, UNROLL2: 0.95e-3}, {DEFAULT: 1e-3, UNROLL2: 1.1e-3}])
    confirmed = confirm(runner, runtime_points(runner, 0.05), DEFAULT, RUNTIME, top=3, rounds=3)
    assert runner.renewed == 1
    by = {at.Config.from_dict(p["config"]): p for p in confirmed}
    # Three more rounds each, from the second process, paired by index after the first three.
    assert [r for _, r in by[UNROLL2]["rounds"]] == [0.95e-3] * 3 + [1.1e-3] * 3
    assert [r for _, r in by[DEFAULT]["rounds"]] == [1e-3] * 6
    assert by[UNROLL2]["processes"] == by[DEFAULT]["processes"] == 2
    # Ahead in three of six paired rounds (5 are needed): the default stays.
    assert at.Config.from_dict(_select.winner(confirmed, RUNTIME, DEFAULT.to_dict())["config"]) == DEFAULT


def test_a_close_lead_that_holds_in_the_second_process_wins():
    runner = TwoProcessRunner([{DEFAULT: 1e-3, UNROLL2: 0.95e-3}, {DEFAULT: 1e-3, UNROLL2: 0.96e-3}])
    confirmed = confirm(runner, runtime_points(runner, 0.05), DEFAULT, RUNTIME, top=3, rounds=3)
    assert runner.renewed == 1
    winner = _select.winner(confirmed, RUNTIME, DEFAULT.to_dict())
    assert at.Config.from_dict(winner["config"]) == UNROLL2 and len(winner["rounds"]) == 6


def test_a_clear_lead_or_a_default_winner_needs_no_second_process():
    clear = TwoProcessRunner([{DEFAULT: 1e-3, UNROLL2: 0.7e-3}, {DEFAULT: 1e-3, UNROLL2: 2e-3}])
    confirmed = confirm(clear, runtime_points(clear, 0.3), DEFAULT, RUNTIME, top=3, rounds=3)
    assert clear.renewed == 0 and all(len(p["rounds"]) == 3 and "processes" not in p for p in confirmed)
    lost = TwoProcessRunner([{DEFAULT: 1e-3, UNROLL2: 1.05e-3}, {DEFAULT: 1e-3, UNROLL2: 0.5e-3}])
    confirm(lost, runtime_points(lost, -0.05), DEFAULT, RUNTIME, top=3, rounds=3)
    assert lost.renewed == 0


def test_second_process_names_every_contender_that_beats_the_default_only_for_a_close_lead():
    def pt(config, run_s):
        return {"config": config.to_dict(), "compile_s": 0.1, "run_s": run_s, "rounds": [[0.1, run_s]] * 3}

    close = [pt(DEFAULT, 1e-3), pt(UNROLL2, 0.9e-3), pt(FOR, 0.95e-3)]
    assert second_process(close, DEFAULT, RUNTIME) == [UNROLL2, FOR]
    assert second_process([pt(DEFAULT, 1e-3), pt(UNROLL2, 0.8e-3), pt(FOR, 0.95e-3)], DEFAULT, RUNTIME) == []
    assert second_process([pt(DEFAULT, 1e-3), pt(UNROLL2, 1.2e-3)], DEFAULT, RUNTIME) == []
    assert PROCESS_NOISE == 0.15  # the documented margin (README, module docstring)


def test_an_in_process_runner_has_no_second_process():
    runner = CountingRunner()
    assert runner.renew() is False
    confirmed = confirm(runner, runtime_points(runner, 0.01), DEFAULT, RUNTIME, top=3, rounds=3)
    assert all(len(p["rounds"]) == 3 for p in confirmed)
