"""Confirmation: one contender per program, measured side by side; only paired figures decide."""

from __future__ import annotations

import statistics

import jax.numpy as jnp
import pytest
from _presets import FAST

import autotune as at
from autotune import _select
from autotune._measure import compile_config
from autotune._runner import InProcessRunner
from autotune._select import Point
from autotune.study._confirm import by_program, confirm, contenders, second_process, simplest_key

DEFAULT = at.Config({})
UNROLL2 = at.Config({"l": {"repr": "scan", "unroll": 2}})
FOR = at.Config({"l": {"repr": "for"}})
FORI1 = at.Config({"l": {"repr": "fori", "unroll": 1}})  # lowers to the default's program
RUNTIME = at.Objective(expected_calls=1e6)  # runtime decides: compile seconds are noise here


def P(config, compile_s, run_s, rounds=(), program=None):
    """A point as the search leaves it (charged compile and run seconds, optional rounds)."""
    return Point(config, compile_s, run_s, rounds=rounds, program=program)


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


def search_points(runner: CountingRunner, default_s: float, rival_s: float) -> list[Point]:
    """What a search leaves: the default's three reference rounds and one sample of a rival,
    with pinned compile figures (far above the real ones, so a test can tell them apart)."""
    d, r = runner.measure(DEFAULT), runner.measure(UNROLL2)
    runner.measured.clear()
    return [P(DEFAULT, default_s, d.run_cost_s, [[default_s, d.run_cost_s]] * 3), P(UNROLL2, rival_s, r.run_cost_s)]


def from_confirmation(point) -> bool:
    """Every round's compile is a real one from confirmation, none a pinned search figure."""
    return all(c < 0.5 for c, _ in point.rounds)


def test_round_one_compiles_every_contender_side_by_side_and_later_rounds_carry_that_compile():
    # A million calls and runtimes 20% apart: compile seconds cannot flip anything, so rounds 2
    # and 3 only re-time.
    runner = ScriptedRuntimes({DEFAULT: [1e-3] * 20, UNROLL2: [0.8e-3] * 20})
    confirmed = confirm(runner, search_points(runner, 1.0, 1.6), DEFAULT, RUNTIME, top=3, rounds=3)
    assert sorted(map(str, runner.measured)) == sorted(map(str, [DEFAULT, UNROLL2])) and len(runner.retimed) == 4
    for p in confirmed:
        compiles = [c for c, _ in p.rounds]
        # The search's figures (1.0, 1.6, taken minutes earlier) never enter; each side's later
        # rounds carry its own round-1 compile, taken side by side with the other's.
        assert from_confirmation(p) and len(set(compiles)) == 1 and p.compiles == 1
        assert compiles[0] == pytest.approx(
            p.measurement.trace_cpu_s + p.measurement.lower_cpu_s + p.measurement.compile_cpu_s
        )


class EqualFirstCompiles(CountingRunner):
    """The real runner, whose first two measurements since ``measured`` was last cleared (the
    search points', then confirmation's round 1) carry the same pinned 0.1 CPU s of compile,
    whatever the load makes of the real ones; every later compile is real."""

    def measure(self, config, **kw):
        m = super().measure(config, **kw)
        if len(self.measured) > 2:
            return m
        return m.replace(trace_cpu_s=0.02, lower_cpu_s=0.02, compile_cpu_s=0.06)


def test_a_margin_within_compile_noise_compiles_every_contender_in_every_round():
    runner = EqualFirstCompiles()
    # At 0 calls the cost is compile time alone: round 1's equal compiles are within COMPILE_NOISE.
    # (Real ones are not equal: under load the two configs' compiles drift more than 15% apart.)
    confirmed = confirm(
        runner, search_points(runner, 1.0, 1.0), DEFAULT, at.Objective(expected_calls=0), top=3, rounds=3
    )
    assert runner.retimed == [] and len(runner.measured) == 6
    assert runner.measured[2:4] == runner.measured[0:2][::-1] and runner.measured[4:6] == runner.measured[0:2]
    by = {p.config: p for p in confirmed}
    assert from_confirmation(by[DEFAULT]) and from_confirmation(by[UNROLL2])
    assert all(len(p.rounds) == 3 and p.compiles == 3 for p in confirmed)
    # Each round takes its own compile: three real samples, not one carried.
    assert len({c for c, _ in by[DEFAULT].rounds}) == 3


class ScriptedRuntimes(CountingRunner):
    """The real runner, with each config's runtime per sample scripted (compiles stay real), so a
    test can say what the later rounds see."""

    def __init__(self, run_s: dict[at.Config, list[float]]):
        super().__init__()
        self.run_s, self.seen = run_s, {c: 0 for c in run_s}

    def _set(self, m):
        if m is None:
            return None
        i, self.seen[m.config] = self.seen[m.config], self.seen[m.config] + 1
        run_s = self.run_s[m.config][min(i, len(self.run_s[m.config]) - 1)]
        return m.replace(run_s=run_s, run_p10_s=run_s)

    def measure(self, config, **kw):
        return self._set(super().measure(config, **kw))

    def retime(self, config):
        return self._set(super().retime(config))


class EvenLater(CountingRunner):
    """The real runner at 100 calls: round 1 has UNROLL2 run in half the default's 1 ms; its
    re-timed rounds make the two cost the same to the nanosecond once each carries its round-1
    compile (so the medians differ by less than any compile noise)."""

    def __init__(self):
        super().__init__()
        self.first: dict[at.Config, float] = {}

    def measure(self, config, **kw):
        m = super().measure(config, **kw)
        self.first.setdefault(m.config, m.compile_cost_s)
        run_s = 0.5e-3 if m.config == UNROLL2 and len(self.first) <= 2 else 1e-3
        return m.replace(run_s=run_s, run_p10_s=run_s)

    def retime(self, config):
        m = super().retime(config)
        gap = (self.first[DEFAULT] - self.first[UNROLL2]) / 100 if m.config == UNROLL2 else 0.0
        return m.replace(run_s=1e-3 + gap, run_p10_s=1e-3 + gap)


def test_re_timed_rounds_that_come_within_compile_noise_are_compiled_again_in_every_round():
    runner = EvenLater()
    points = search_points(runner, 1.0, 1.6)
    runner.first.clear()
    confirmed = confirm(runner, points, DEFAULT, at.Objective(expected_calls=100), top=3, rounds=3)
    # Round 1 compiles both (50 ms apart: far beyond compile noise); rounds 2-3 re-time (4) and
    # bring them level, so rounds 2-3 are measured again in full (4 more compiles).
    assert len(runner.retimed) == 4 and len(runner.measured) == 6
    for p in confirmed:
        assert p.compiles == 3 and from_confirmation(p) and len({c for c, _ in p.rounds}) == 3


class SlowerAfterSearch(InProcessRunner):
    """The real in-process runner on a 16-step loop, whose compiles get slower after the search:
    from ``slow_down()`` on, each measure also compiles its config twice more, really, and counts
    that time (wall and CPU) in its compile stage, as a loaded or throttled machine would."""

    def __init__(self):
        super().__init__(loop16, (jnp.ones(4),), {}, {}, FAST)
        self.extra = 0

    def slow_down(self):
        self.extra = 2

    def measure(self, config, **kw):
        m = super().measure(config, **kw)
        for _ in range(self.extra):
            st = compile_config(self.fn, self.args, self.kwargs, config)
            m = m.replace(
                compile_s=m.compile_s + st.trace_s + st.lower_s + st.compile_s,
                compile_cpu_s=m.compile_cpu_s + st.trace_cpu_s + st.lower_cpu_s + st.compile_cpu_s,
            )
        return m


def loop16(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=16, name="l")[0]


def test_a_challenger_never_wins_on_its_search_compile_set_against_the_defaults_slower_confirmation_compiles():
    # Issue 21's training step: the search left the default's reference rounds, a config close to
    # the default (here fori×1, its very program, recorded without the hash as an older study
    # would) and a fully unrolled loop that compiles more slowly than either. Then compiles got
    # slower. Judged on its search compile against the default's confirmation compiles, the
    # unrolled loop would "win"; on paired figures it cannot.
    runner, objective = SlowerAfterSearch(), at.Objective(expected_calls=0)  # compile seconds alone decide
    reference = [runner.measure(DEFAULT) for _ in range(3)]
    close, rival = runner.measure(FORI1), runner.measure(FOR)
    d_s = statistics.median(m.compile_cost_s for m in reference)
    points = [
        P(DEFAULT, d_s, reference[1].run_cost_s, [[m.compile_cost_s, m.run_cost_s] for m in reference]),
        P(FORI1, 0.95 * d_s, close.run_cost_s),
        P(FOR, rival.compile_cost_s, rival.run_cost_s),
    ]
    runner.slow_down()  # from here on a compile takes three times as long
    confirmed = confirm(runner, points, DEFAULT, objective, top=3, rounds=3)
    by = {p.config: p for p in confirmed}
    mixed = [by[DEFAULT], points[2]]  # the rival's search figure against the default's confirmation compiles
    assert _select.winner(mixed, objective, DEFAULT).config == FOR
    # Paired figures only: every compile in the rival's rounds is a slow one from confirmation...
    assert all(c > 2 * rival.compile_cost_s for c, _ in by[FOR].rounds)
    # ...and the default's program stays (fori×1 lowers to it, so it may tie its way in).
    chosen = _select.winner(confirmed, objective, DEFAULT)
    assert chosen.measurement.program_hash == reference[0].program_hash


def test_configs_that_lower_to_one_program_are_one_contender_named_by_the_simplest():
    runner = CountingRunner()
    fori2 = at.Config({"l": {"repr": "fori", "unroll": 2}})
    points = []
    for config in (DEFAULT, fori2, UNROLL2):  # fori×2 measured first; scan×2 lowers to the same program
        m = runner.measure(config)
        points.append(P(config, m.compile_cost_s, m.run_cost_s, program=m.program_hash))
    assert points[1].program == points[2].program
    runner.measured.clear()
    assert contenders(points, DEFAULT, RUNTIME, top=3) in ([UNROLL2, DEFAULT], [DEFAULT, UNROLL2])
    confirmed = confirm(runner, points, DEFAULT, RUNTIME, top=3, rounds=3)
    assert fori2 not in runner.measured + runner.retimed
    by = {p.config: p for p in confirmed}
    assert set(by) == {DEFAULT, UNROLL2} and by[UNROLL2].equivalent == (fori2,)
    assert simplest_key(UNROLL2) < simplest_key(fori2) < simplest_key(FOR)
    # A group holding the default is named by the default (what jax.jit runs).
    grouped = by_program(
        [points[0].replace(program="p"), P(FORI1, 0.1, 1e-3, program="p")],
        DEFAULT,
    )
    assert [g.config for g in grouped] == [DEFAULT] and grouped[0].equivalent == (FORI1,)


def test_the_default_is_always_a_contender_and_the_cheapest_come_first():
    points = [P(UNROLL2, 0.1, 1e-3), P(FOR, 0.5, 1e-4)]
    got = contenders(points, DEFAULT, at.Objective(expected_calls=10), top=1)
    assert got[0] == UNROLL2 and got[-1] == DEFAULT and FOR in got  # FOR is cheapest above 444 calls


def test_a_front_point_that_is_never_cheapest_is_not_confirmed_except_for_a_pareto_search():
    mid = at.Config({"l": {"repr": "scan", "unroll": 4}})
    points = [P(UNROLL2, 0.1, 1e-3), P(mid, 0.4, 6e-4), P(FOR, 0.5, 1e-4)]  # mid: on the front, above the envelope
    assert mid in [p.config for p in _select.pareto_front(points)]
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
        run_s = table.get(m.config, table.get("others", m.run_s))
        return m.replace(run_s=run_s, run_p10_s=run_s)

    def measure(self, config, **kw):
        return self._set(super().measure(config, **kw))

    def retime(self, config):
        return self._set(super().retime(config))


def runtime_points(runner, lead: float) -> list[Point]:
    d, r = runner.measure(DEFAULT), runner.measure(UNROLL2)
    runner.measured.clear()
    return [
        P(DEFAULT, d.compile_cost_s, 1e-3, [[d.compile_cost_s, 1e-3]] * 3),
        P(UNROLL2, r.compile_cost_s, 1e-3 * (1 - lead)),
    ]


def test_a_lead_must_hold_in_a_second_process_or_the_default_stays():
    runner = TwoProcessRunner([{DEFAULT: 1e-3, UNROLL2: 0.95e-3}, {DEFAULT: 1e-3, UNROLL2: 1.1e-3}])
    confirmed = confirm(runner, runtime_points(runner, 0.05), DEFAULT, RUNTIME, top=3, rounds=3)
    assert runner.renewed == 1
    by = {p.config: p for p in confirmed}
    # Three more rounds each, from the second process, paired by index after the first three.
    assert [r for _, r in by[UNROLL2].rounds] == [0.95e-3] * 3 + [1.1e-3] * 3
    assert [r for _, r in by[DEFAULT].rounds] == [1e-3] * 6
    assert by[UNROLL2].worker_processes == by[DEFAULT].worker_processes == 2
    # Ahead in three of six paired rounds (5 are needed): the default stays.
    assert _select.winner(confirmed, RUNTIME, DEFAULT).config == DEFAULT


def test_a_large_lead_in_one_process_that_reverses_in_the_next_keeps_the_default():
    """The loaded-machine case: 30% ahead in the first worker, 20% behind in a fresh one."""
    runner = TwoProcessRunner([{DEFAULT: 1e-3, UNROLL2: 0.7e-3}, {DEFAULT: 1e-3, UNROLL2: 1.2e-3}])
    confirmed = confirm(runner, runtime_points(runner, 0.3), DEFAULT, RUNTIME, top=3, rounds=3)
    assert runner.renewed == 1
    assert all(p.worker_processes == 2 and len(p.rounds) == 6 for p in confirmed)
    assert _select.winner(confirmed, RUNTIME, DEFAULT).config == DEFAULT


def test_a_lead_that_holds_in_the_second_process_wins():
    runner = TwoProcessRunner([{DEFAULT: 1e-3, UNROLL2: 0.95e-3}, {DEFAULT: 1e-3, UNROLL2: 0.96e-3}])
    confirmed = confirm(runner, runtime_points(runner, 0.05), DEFAULT, RUNTIME, top=3, rounds=3)
    assert runner.renewed == 1
    winner = _select.winner(confirmed, RUNTIME, DEFAULT)
    assert winner.config == UNROLL2 and len(winner.rounds) == 6


def test_a_default_winner_needs_no_second_process():
    lost = TwoProcessRunner([{DEFAULT: 1e-3, UNROLL2: 1.05e-3}, {DEFAULT: 1e-3, UNROLL2: 0.5e-3}])
    confirmed = confirm(lost, runtime_points(lost, -0.05), DEFAULT, RUNTIME, top=3, rounds=3)
    assert lost.renewed == 0 and all(len(p.rounds) == 3 and p.worker_processes == 1 for p in confirmed)


def test_second_process_names_every_contender_that_beats_the_default_whatever_the_lead():
    def pt(config, run_s):
        return P(config, 0.1, run_s, [[0.1, run_s]] * 3)

    close = [pt(DEFAULT, 1e-3), pt(UNROLL2, 0.9e-3), pt(FOR, 0.95e-3)]
    assert second_process(close, DEFAULT, RUNTIME) == [UNROLL2, FOR]
    clear = [pt(DEFAULT, 1e-3), pt(UNROLL2, 0.5e-3), pt(FOR, 1.1e-3)]
    assert second_process(clear, DEFAULT, RUNTIME) == [UNROLL2]
    assert second_process([pt(DEFAULT, 1e-3), pt(UNROLL2, 1.2e-3)], DEFAULT, RUNTIME) == []


def test_an_in_process_runner_has_no_second_process():
    runner = CountingRunner()
    assert runner.renew() is False
    confirmed = confirm(runner, runtime_points(runner, 0.01), DEFAULT, RUNTIME, top=3, rounds=3)
    assert all(len(p.rounds) == 3 for p in confirmed)


def test_a_tune_confirms_one_contender_per_program_and_lists_the_others_as_equivalent(tmp_path):
    r = at.tune(
        loop8,
        jnp.ones(4),
        expected_calls=1000,
        sampler="grid",
        storage=str(tmp_path / "s.db"),
        isolate=False,
        timing=FAST,
        progress=False,
    )
    shared = [t for t in r.trials if t.state == "shared"]
    assert shared  # fori×k lowers to scan×k's program (and fori×1 to the default's)
    confirmed = {p.config: p for p in r.confirmed}
    named = {e for p in r.confirmed for e in p.equivalent}
    assert not named & set(confirmed)  # an equivalent config is never a contender of its own
    default = confirmed[r.default_config]  # the default names its program
    assert default.equivalent == (FORI1,)


def test_compile_noise_counts_the_compiles_the_objective_charges():
    """A gap within one compile's noise stays within it when eight processes each compile."""
    from autotune.study._confirm import compile_could_flip

    points = [P(DEFAULT, 1.0, 1e-3, [[1.0, 1e-3]] * 3), P(UNROLL2, 1.0, 0.9e-3, [[1.0, 0.9e-3]] * 3)]
    one = at.Objective(expected_calls=2500)  # run gap 0.25 s against a margin of 0.15 x 2 s
    assert compile_could_flip(points, DEFAULT, one)
    assert compile_could_flip(points, DEFAULT, one.overridden(processes=8))  # gap and margin both x8
    far = at.Objective(expected_calls=5000)  # gap 0.5 s: outside the margin, whatever the processes
    assert not compile_could_flip(points, DEFAULT, far)
    assert not compile_could_flip(points, DEFAULT, far.overridden(processes=8))
