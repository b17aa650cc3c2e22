"""The tiered cost (`autotune.select._tiered`): the default serves while the winner compiles beside it."""

from __future__ import annotations

from fractions import Fraction

import pytest

from autotune._errors import ConfigError
from autotune.program._config import Config
from autotune.select import Point, choose, tiered_cost_of, winner
from autotune.select._objective import Objective
from autotune.select._tiered import TierCase, charged_at, pays, qualifies, tiered_at, tiered_cost, tiered_figures

# default: compiles in 0.1 s, 10 ms a call; winner: compiles in 2.1 s, 1 ms a call
D_C, D_R, W_C, W_R = 0.1, 0.01, 2.1, 0.001


def plain(c, r, n):
    return c + n * r


def test_the_default_serves_until_the_winner_is_ready():
    f = tiered_figures(D_C, D_R, W_C, W_R, 1000, slowdown=1.0)
    assert f.ready_s == pytest.approx(2.1)  # the winner's whole compile: no credit for overlapping the default's
    assert f.served_by_default == pytest.approx(210)
    assert f.cost == pytest.approx(D_C + 210 * D_R + 790 * W_R)


def test_slowdown_charges_the_calls_beside_the_compile():
    f = tiered_figures(D_C, D_R, W_C, W_R, 1000, slowdown=2.0)
    assert f.served_by_default == pytest.approx(105)  # each call takes 20 ms beside the compile
    assert f.cost == pytest.approx(D_C + 105 * 2 * D_R + 895 * W_R)


def test_few_calls_finish_on_the_default_then_wait_at_exit_for_the_compile():
    # 50 calls at 15 ms end 0.75 s into the 2.1 s of the compile: the process waits 1.35 s at exit
    assert tiered_cost(D_C, D_R, W_C, W_R, 50, slowdown=1.5) == pytest.approx(D_C + 50 * 1.5 * D_R + 1.35)
    assert tiered_cost(D_C, D_R, W_C, W_R, 0) == pytest.approx(D_C + W_C)  # both compiles, one after the other


@pytest.mark.parametrize("n", [0, 1, 10, 99, 100, 101, 210, 500, 10**4, 10**6])
def test_tiering_saves_the_winner_calls_the_default_serves_less_the_defaults_compile(n):
    # against the winner compiled up front: tier-up pays C_d and saves min(N, k) winner calls (k = 210)
    t = tiered_cost(D_C, D_R, W_C, W_R, n, slowdown=1.0)
    assert t - plain(W_C, W_R, n) == pytest.approx(D_C - min(n, 210) * W_R)
    assert pays(TierCase(Objective(), (D_C, D_R), (W_C, W_R), slowdown=1.0), Fraction(n)) == (n > 100)
    charged, _ = charged_at(TierCase(Objective(), (D_C, D_R), (W_C, W_R), slowdown=1.0), Fraction(n))
    assert float(charged) == pytest.approx(min(t, plain(W_C, W_R, n)))


def test_the_exact_form_charges_the_exit_wait_too():
    for n in (0, 10, 150, 200, 1000):
        value, _ = tiered_at(TierCase(Objective(), (D_C, D_R), (W_C, W_R), slowdown=1.0), Fraction(n))
        assert float(value) == pytest.approx(tiered_cost(D_C, D_R, W_C, W_R, n, slowdown=1.0))


def test_near_the_crossover_it_is_below_both():
    n = (W_C - D_C) / (D_R - W_R)  # the plain costs cross here
    t = tiered_cost(D_C, D_R, W_C, W_R, n, slowdown=1.05)
    assert t < plain(D_C, D_R, n) and t < plain(W_C, W_R, n)


def test_weights_apply_to_compile_and_calls():
    t = tiered_cost(D_C, D_R, W_C, W_R, 1000, slowdown=1.0, compile_weight=2.0, runtime_weight=3.0)
    assert t == pytest.approx(2 * D_C + 3 * (210 * D_R + 790 * W_R))


def test_a_compile_slowed_beside_the_calls_readies_the_winner_later():
    # c = 1.5: the 2.1 s compile takes 3.15 s beside the default's calls, which serve 315 of them
    f = tiered_figures(D_C, D_R, W_C, W_R, 1000, slowdown=1.0, compile_slowdown=1.5)
    assert f.ready_s == pytest.approx(3.15) and f.served_by_default == pytest.approx(315)
    assert f.cost == pytest.approx(D_C + 315 * D_R + 685 * W_R)
    # against the winner compiled up front: tier-up now also pays the (c − 1)·C_w it waits longer
    for n in (0, 50, 500, 10**5):
        t = tiered_cost(D_C, D_R, W_C, W_R, n, slowdown=1.0, compile_slowdown=1.5)
        assert t - plain(W_C, W_R, n) == pytest.approx(D_C + 0.5 * W_C - min(n, 315) * W_R)
        exact, _ = tiered_at(
            TierCase(Objective(), (D_C, D_R), (W_C, W_R), slowdown=1.0, compile_slowdown=1.5), Fraction(n)
        )
        assert float(exact) == pytest.approx(t)
    # c = 1.05 moves where tiering starts to pay from 100 calls to 205; c = 1.2 it never does
    assert [
        pays(TierCase(Objective(), (D_C, D_R), (W_C, W_R), slowdown=1.0, compile_slowdown=1.05), Fraction(n))
        for n in (200, 210)
    ] == [False, True]
    assert not any(
        pays(TierCase(Objective(), (D_C, D_R), (W_C, W_R), slowdown=1.0, compile_slowdown=1.2), Fraction(n))
        for n in (100, 10**6)
    )
    with pytest.raises(ValueError, match="compile_slowdown"):
        tiered_cost(D_C, D_R, W_C, W_R, 10, compile_slowdown=0.9)


def test_the_default_points_measured_compile_slowdown_is_the_c_the_rule_charges():
    # 35 calls: the default costs 0.45 s, the winner compiled up front 0.475 s. Tiered, the default
    # serves 30 calls while it compiles in 0.3 s (c = 1): 0.425 s; at c = 1.6, as on the 2-core CPU,
    # the compile outlasts the 35 calls and the process waits for it at exit: 0.58 s
    def pick(c):
        points = [Point(DEFAULT, 0.1, 0.01, slowdown=1.0, compile_slowdown=c), Point(UNROLLED, 0.3, 0.005)]
        return winner(points, Objective(expected_calls=35, tier_up=True), DEFAULT).config

    assert pick(1.0) == UNROLLED and pick(1.6) == DEFAULT
    assert pick(None) == UNROLLED  # an entry tuned before c was measured: DEFAULT_COMPILE_SLOWDOWN, 1
    p = Point(DEFAULT, 0.1, 0.01, compile_slowdown=1.5)
    assert p.to_json()["compile_slowdown"] == 1.5 and Point.from_json(p.to_json()) == p
    assert "compile_slowdown" not in Point(DEFAULT, 0.1, 0.01).to_json()
    with pytest.raises(ValueError, match="compile_slowdown"):
        Point(DEFAULT, 0.1, 0.01, compile_slowdown=0.5)


def test_bad_figures_are_refused():
    with pytest.raises(ValueError, match="slowdown"):
        tiered_cost(D_C, D_R, W_C, W_R, 10, slowdown=0.5)
    with pytest.raises(ValueError, match="calls"):
        tiered_cost(D_C, D_R, W_C, W_R, -1)


def test_which_winners_qualify():
    assert qualifies(0.1, 2.1)
    assert not qualifies(0.1, 0.15)  # under 2x the default's
    assert not qualifies(0.01, 0.03)  # 2x, but only 20 ms more: not worth a thread


# -- the winner rule under an objective with tier_up ------------------------------------------

DEFAULT, UNROLLED = Config(), Config({"l": {"repr": "for"}})
# the winner runs 10% faster but compiles 2 s more: a stall of 2 s costs more than it saves at 1000
# calls (11.1 s against 10.1 s), served beside the default it does not (about 10.02 s). The
# default's point says the compile ran as fast beside its calls as alone (c = 1: an accelerator's).
POINTS = [Point(DEFAULT, 0.1, 0.01, compile_slowdown=1.0), Point(UNROLLED, 2.1, 0.009)]


def test_a_tier_up_objective_charges_a_qualifying_winner_its_tiered_cost():
    plain_goal, tiered_goal = Objective(expected_calls=1000), Objective(expected_calls=1000, tier_up=True)
    assert winner(POINTS, plain_goal, DEFAULT).config == DEFAULT
    picked = choose(POINTS, tiered_goal, default=DEFAULT)
    assert picked.config == UNROLLED
    assert picked.cost == pytest.approx(tiered_cost(0.1, 0.01, 2.1, 0.009, 1000))
    assert tiered_cost_of(POINTS[1], POINTS[0], plain_goal) == pytest.approx(picked.cost)
    assert tiered_cost_of(POINTS[0], POINTS[0], plain_goal) is None  # the default itself


def test_tier_up_leaves_a_winner_that_does_not_qualify_at_its_plain_cost():
    points = [Point(DEFAULT, 0.1, 0.01), Point(UNROLLED, 0.12, 0.009)]  # 20 ms more: below MIN_SECONDS
    goal = Objective(expected_calls=1000, tier_up=True)
    assert tiered_cost_of(points[1], points[0], goal) is None
    assert choose(points, goal, default=DEFAULT).cost == pytest.approx(0.12 + 9.0)


def test_tier_up_pairs_each_round_with_the_defaults_round():
    rounds_d, rounds_w = ((0.1, 0.01),) * 3, ((2.1, 0.009), (2.1, 0.009), (2.1, 0.011))
    points = [Point(DEFAULT, 0.1, 0.01, rounds=rounds_d), Point(UNROLLED, 2.1, 0.009, rounds=rounds_w)]
    goal = Objective(expected_calls=1000, tier_up=True)
    assert winner(points, goal, DEFAULT).config == DEFAULT  # 2 of 3 paired rounds: not enough
    every = [points[0], Point(UNROLLED, 2.1, 0.009, rounds=((2.1, 0.009),) * 3)]
    assert winner(every, goal, DEFAULT).config == UNROLLED  # 3 of 3, each round tiered against its pair


def test_tiered_at_matches_the_float_formula_and_its_processes():
    goal = Objective(expected_calls=1000, compile_weight=2.0, runtime_weight=3.0)
    for n in (0, 10, 200, 5000):
        v, _ = tiered_at(TierCase(goal, (D_C, D_R), (W_C, W_R), slowdown=1.05), Fraction(n))
        want = tiered_cost(D_C, D_R, W_C, W_R, n, slowdown=1.05, compile_weight=2.0, runtime_weight=3.0)
        assert float(v) == pytest.approx(want)
    three = Objective(processes=3, compilation_cache=True)
    v, _ = tiered_at(TierCase(three, (D_C, D_R), (W_C, W_R), loads=(0.05, 0.3), slowdown=1.0), Fraction(1000))
    later = tiered_cost(0.05, D_R, 0.3, W_R, 1000, slowdown=1.0)
    assert float(v) == pytest.approx(tiered_cost(D_C, D_R, W_C, W_R, 1000, slowdown=1.0) + 2 * later)


def test_tier_up_is_kept_in_the_objectives_json_only_when_on():
    assert "tier_up" not in Objective().to_dict()
    goal = Objective(expected_calls=10, tier_up=True)
    assert goal.to_dict()["tier_up"] is True and Objective.from_dict(goal.to_dict()) == goal
    assert Objective().overridden(tier_up=True).tier_up and goal.describe() == "; tier-up"
    with pytest.raises(ConfigError, match="tier_up"):
        Objective(tier_up="yes")


def test_the_default_points_measured_slowdown_is_the_s_the_rule_charges():
    # r_w close to r_d: the calls the default serves while the winner compiles decide the pick.
    # At 100 calls, s = 1 serves 30 of them (the winner is cheaper), s = 4 only 7.5 (the default is).
    def pick(slowdown):
        points = [Point(DEFAULT, 0.1, 0.01, slowdown=slowdown), Point(UNROLLED, 0.3, 0.009)]
        return winner(points, Objective(expected_calls=100, tier_up=True), DEFAULT).config

    assert pick(1.0) == UNROLLED
    assert pick(4.0) == DEFAULT
    assert pick(None) == DEFAULT  # DEFAULT_SLOWDOWN (1.6): 18.75 calls served, 1.131 s against 1.1 s
    goal = Objective(expected_calls=100, tier_up=True)
    d = Point(DEFAULT, 0.1, 0.01, slowdown=4.0)
    # at s = 4 tiering (1.2325 s) costs more than compiling up front (1.2 s): the decorator would not tier
    assert tiered_cost(0.1, 0.01, 0.3, 0.009, 100, slowdown=4.0) == pytest.approx(1.2325)
    assert tiered_cost_of(Point(UNROLLED, 0.3, 0.009), d, goal) is None  # so no tiered cost to show
    fast = Point(DEFAULT, 0.1, 0.01, slowdown=1.0)
    assert tiered_cost_of(Point(UNROLLED, 0.3, 0.009), fast, goal) == pytest.approx(1.03)  # tiered


def test_a_slowdown_travels_with_the_point_and_a_bad_one_is_refused():
    p = Point(DEFAULT, 0.1, 0.01, slowdown=1.25)
    assert p.to_json()["slowdown"] == 1.25 and Point.from_json(p.to_json()) == p
    assert "slowdown" not in Point(DEFAULT, 0.1, 0.01).to_json()
    for bad in (0.5, float("nan"), "fast"):
        with pytest.raises(ValueError, match="slowdown"):
            Point(DEFAULT, 0.1, 0.01, slowdown=bad)


def probes(intervals):
    """Call counts inside and at the edges of every interval."""
    out = []
    for it in intervals:
        a, b = it["from_calls"], it["to_calls"]
        out += [a, a * 1.000001 + 1e-9, (a + b) / 2 if b != float("inf") else a * 2 + 10]
    return out


@pytest.mark.parametrize("slowdown", [None, 1.0, 3.0])
def test_tiered_crossover_intervals_name_the_winner_the_rule_picks_at_every_call_count(slowdown):
    from autotune.select import best_at, crossover_intervals

    scan4 = Config({"l": {"repr": "scan", "unroll": 4}})
    points = [
        Point(DEFAULT, 0.1, 0.01, slowdown=slowdown),
        Point(UNROLLED, 2.1, 0.001),  # qualifies: served by the default while it compiles
        Point(scan4, 0.15, 0.006),  # does not (50 ms more): its plain line
    ]
    tiered = crossover_intervals(points, default=DEFAULT, tier_up=True)
    plain = crossover_intervals(points, default=DEFAULT)
    if slowdown == 3.0:  # 70 calls served (70 ms of the winner's) do not repay the default's 0.1 s compile
        assert tiered == plain  # so the rule charges the up-front compile, as the decorator would do
    else:
        assert tiered != plain  # the unrolled winner takes over earlier when it need not stall
        start = {it["config"]: it["from_calls"] for it in tiered}
        assert start[UNROLLED] < {it["config"]: it["from_calls"] for it in plain}[UNROLLED]
    for n in probes(tiered) + [1, 10, 100, 150, 250, 400, 1000, 1e5]:
        goal = Objective(expected_calls=max(n, 1e-9), tier_up=True)
        assert best_at(tiered, n) == winner(points, goal, DEFAULT).config, n


def test_tiered_crossovers_follow_paired_rounds_too():
    from autotune.select import best_at, crossover_intervals

    points = [
        Point(DEFAULT, 0.1, 0.01, rounds=[(0.1, 0.01), (0.11, 0.0105), (0.09, 0.0098)]),
        Point(UNROLLED, 2.1, 0.001, rounds=[(2.0, 0.001), (2.2, 0.0011), (2.1, 0.0009)]),
    ]
    tiered = crossover_intervals(points, default=DEFAULT, tier_up=True)
    assert [it["config"] for it in tiered] == [DEFAULT, UNROLLED]
    for n in probes(tiered) + [50, 200, 300]:
        goal = Objective(expected_calls=max(n, 1e-9), tier_up=True)
        assert best_at(tiered, n) == winner(points, goal, DEFAULT).config, n


def test_the_charged_cost_switches_from_up_front_to_tiered_where_tiering_starts_to_pay():
    from autotune.select import best_at, crossover_intervals
    from autotune.select._tiered import charged_kinks

    d, w = (0.1, 0.01), (2.1, 0.005)  # k = 210 calls served; they repay the default's 0.1 s from 20 calls on
    assert [float(k) for k in charged_kinks(TierCase(Objective(), d, w, slowdown=1.0))] == pytest.approx([20, 210])
    for n, tiered in ((19, False), (21, True), (500, True)):
        assert pays(TierCase(Objective(), d, w, slowdown=1.0), Fraction(n)) is tiered
    points = [
        Point(DEFAULT, *d, slowdown=1.0),
        Point(UNROLLED, *w),
        Point(Config({"l": {"repr": "scan", "unroll": 4}}), 0.3, 0.008),
    ]
    intervals = crossover_intervals(points, default=DEFAULT, tier_up=True)
    for n in probes(intervals) + [1, 19, 20, 21, 100, 210, 211, 1000]:
        goal = Objective(expected_calls=max(n, 1e-9), tier_up=True)
        assert best_at(intervals, n) == winner(points, goal, DEFAULT).config, n
