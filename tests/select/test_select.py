"""_select: the one home of the winner rule, the re-pick by call count and the honest range (the crossovers:
test_front.py)."""

from __future__ import annotations

import json
import math

import pytest
from _points import FOR, SCAN, THREE, UNROLL, C, point, pt

import autotune as at
from autotune import _display
from autotune import select as _select
from autotune.select import Point, crossover_intervals, format_calls, intervals_json


def test_format_and_json_helpers():
    assert [format_calls(x) for x in (0.0, 37.5, 1250.4, math.inf)] == ["0", "37.5", "1,250", "∞"]
    as_json = json.loads(json.dumps(intervals_json(crossover_intervals(THREE))))
    assert as_json[-1]["to_calls"] is None and as_json[-1]["config"] == FOR.to_dict()
    assert [_select.json_bound(x) for x in (math.inf, None, 3.0)] == [None, None, 3.0]


# --------------------------------------------------------------- the paired winner rule

DEFAULT = C({"l": {"repr": "scan", "unroll": 1}})
OTHER = C({"l": {"repr": "for", "unroll": 1}})


def test_a_challenger_must_beat_the_default_on_the_median_and_in_most_rounds():
    obj = at.Objective(expected_calls=0)  # cost = compile seconds: easy to read
    # Lower median, but it won only one paired round of three: noise, the default stays.
    noisy = [point(DEFAULT, [(0.9, 0), (1.0, 0), (1.3, 0)]), point(OTHER, [(0.95, 0), (1.1, 0), (0.7, 0)])]
    assert _select.winner(noisy, obj, DEFAULT).config == DEFAULT
    # Without the default the same points are the plain lower envelope.
    assert _select.winner(noisy, obj).config == OTHER
    clear = [point(DEFAULT, [(1.0, 0), (1.1, 0), (0.9, 0)]), point(OTHER, [(0.5, 0), (0.6, 0), (0.4, 0)])]
    assert _select.winner(clear, obj, DEFAULT).config == OTHER
    choice = _select.choose(clear, obj, default=DEFAULT)
    assert choice.config == OTHER and choice.cost == 0.5 and choice.in_range


def test_a_challenger_needs_the_rounds_a_coin_would_seldom_win():
    obj = at.Objective(expected_calls=0)
    d3 = point(DEFAULT, [(1.0, 0), (1.0, 0), (1.0, 0)])
    # Two of three paired rounds and a lower median: a challenger exactly as good as the
    # default does this half of the time, so it is not enough.
    two = point(OTHER, [(0.9, 0), (0.9, 0), (1.1, 0)])
    assert _select.winner([d3, two], obj, DEFAULT).config == DEFAULT
    three = point(OTHER, [(0.99, 0), (0.99, 0), (0.99, 0)])
    assert _select.winner([d3, three], obj, DEFAULT).config == OTHER
    # Across two processes (6 rounds): 5 wins are enough (a coin: 7 in 64), 4 are not (22 in 64).
    d6 = point(DEFAULT, [(1.0, 0)] * 6)
    five = point(OTHER, [(0.9, 0)] * 5 + [(1.2, 0)])
    four = point(OTHER, [(0.9, 0)] * 4 + [(1.2, 0)] * 2)
    assert _select.winner([d6, five], obj, DEFAULT).config == OTHER
    assert _select.winner([d6, four], obj, DEFAULT).config == DEFAULT
    # The same rule decides every call count: the intervals give the default all of them.
    assert [it["config"] for it in crossover_intervals([d6, four], default=DEFAULT)] == [DEFAULT]
    assert [_select.wins_needed(n) for n in range(1, 10)] == [1, 2, 3, 4, 5, 5, 6, 7, 7]
    for n in range(1, 40):  # the fewest wins a fair coin reaches at most 1 time in 8 (or all n)
        w = _select.wins_needed(n)
        tail = sum(math.comb(n, k) for k in range(w, n + 1)) / 2**n
        assert tail <= 1 / 8 or w == n
        assert w == 1 or sum(math.comb(n, k) for k in range(w - 1, n + 1)) / 2**n > 1 / 8


def test_the_tuned_count_and_its_neighbours_give_the_tuned_winner_unless_a_crossover_lies_between():
    # scan wins below 512 calls, unroll above (exact binary seconds, three identical rounds each).
    scan = point(SCAN, [(1.0, 2.0**-7)] * 3)
    unroll = point(UNROLL, [(3.0, 2.0**-8)] * 3)
    pts = [scan, unroll]
    for n in (1000, 999, 1001):
        assert _select.winner(pts, at.Objective(n), SCAN).config == UNROLL
    assert _select.winner(pts, at.Objective(511), SCAN).config == SCAN
    assert _select.winner(pts, at.Objective(512), SCAN).config == UNROLL  # the stretch it starts


def test_cost_is_the_median_of_the_round_costs():
    p = point(SCAN, [(1.0, 0.001), (2.0, 0.0), (3.0, 0.003)])
    # round costs at 1000 calls: 2.0, 2.0, 6.0
    assert _select.cost(p, at.Objective(expected_calls=1000)) == 2.0
    assert _select.cost(pt(SCAN, 1.0, 0.001), at.Objective(expected_calls=10)) == 1.01


# --------------------------------------------------------------- the honest range


def test_a_grid_with_stopped_configs_is_complete_only_up_to_where_they_could_win():
    pts = [point(SCAN, [(1.0, 2.0**-7)] * 3), point(UNROLL, [(3.0, 2.0**-8)] * 3)]
    obj = at.Objective(expected_calls=1000)
    # A config pruned after 8 s of compiling might run in no time: it beats the winner
    # (3 + N/256) once that costs more than 8 s, at N = 1280.
    r = _select.complete_range(pts, obj, default=SCAN, stopped=[(FOR, 8.0)])
    assert r["from_calls"] == 0.0 and r["to_calls"] == pytest.approx(1280.0)
    assert _select.in_range(r, 1280) and not _select.in_range(r, 1281)
    assert _display.range_text(r) == "[0, 1,280]"
    # Nothing stopped, everything measured: every call count.
    full = _select.complete_range(pts, obj, default=SCAN)
    assert full["to_calls"] == math.inf and _display.range_text(full) == "[0, ∞)"
    # The tuned count is always covered, even when noise put the bound below it.
    low = _select.complete_range(pts, obj, default=SCAN, stopped=[(FOR, 2.0)])
    assert low["to_calls"] == 1000
    # A sampled search that never measured some configs decides only its own call count.
    sampled = _select.complete_range(pts, obj, default=SCAN, unmeasured=5)
    assert (sampled["from_calls"], sampled["to_calls"]) == (1000, 1000) and "never measured" in sampled["why"]
    choice = _select.choose(pts, at.Objective(expected_calls=10**6), default=SCAN, complete=r)
    assert choice.config == UNROLL and not choice.in_range
    assert json.loads(json.dumps(_select.range_json(full)))["to_calls"] is None


def test_beats_is_the_winner_rule_with_the_holder_in_the_defaults_place():
    from autotune import select as _select

    goal = at.Objective(expected_calls=0)
    holder = pt({"l": {"repr": "scan", "unroll": 1}}, 2.5, 0.0, [[1.0, 0.0], [3.0, 0.0], [2.5, 0.0]])
    lucky = pt({"l": {"repr": "scan", "unroll": 2}}, 2.0, 0.0, [[1.1, 0.0], [3.1, 0.0], [2.0, 0.0]])  # 1 of 3 rounds
    clear = pt({"l": {"repr": "for", "unroll": 1}}, 0.5, 0.0, [[0.5, 0.0], [0.6, 0.0], [0.4, 0.0]])
    assert not _select.beats(lucky, holder, goal) and _select.beats(clear, holder, goal)
    assert not _select.beats(holder, clear, goal) and not _select.beats(holder, holder, goal)


# --------------------------------------------------------------- the point value and the rules it carries


def test_a_point_round_trips_through_json_and_reads_the_older_spelling():
    p = pt(SCAN, 1.5, 0.25, rounds=[(1.0, 0.2), (2.0, 0.3)])
    p = p.replace(confirmed=True, equivalent=(UNROLL,), worker_processes=2, compiles=3)
    assert Point.from_json(json.loads(json.dumps(p.to_json()))) == p
    # What entries and studies of older versions stored: compile_s / run_s for the charged seconds.
    old = {"config": SCAN.to_dict(), "compile_s": 1.5, "run_s": 0.25, "rounds": [[1.0, 0.2], [2.0, 0.3]]}
    assert Point.from_json(old) == pt(SCAN, 1.5, 0.25, rounds=[(1.0, 0.2), (2.0, 0.3)])
    assert p.holds(UNROLL) and p.holds(SCAN) and not p.holds(FOR)
    assert _select.point_of([pt(FOR, 1, 1), p], UNROLL) is p
    with pytest.raises(TypeError, match="Config"):
        Point(SCAN.to_dict(), 1.0, 1.0)
    with pytest.raises(ValueError, match="run_cost_s"):
        pt(SCAN, 1.0, math.nan)


def test_ranked_orders_by_cost_then_canonical_config_text():
    twin = pt(UNROLL, 1.0, 2.0**-7)  # the same seconds as SCAN's point: the smaller JSON text first
    order = _select.ranked([THREE[2], twin, THREE[0], THREE[1]], at.Objective(expected_calls=10))
    assert [p.config for p in order] == [SCAN, UNROLL, UNROLL, FOR]
    assert SCAN.to_json() < UNROLL.to_json() and order[0] is THREE[0]


def test_the_cost_formula_and_its_weights_are_checked_in_one_place():
    # Objective.line is the formula both Objective.cost_of and the winner rule use: exact lines in N.
    obj = at.Objective(expected_calls=100, compile_weight=0.5, runtime_weight=2.0)
    assert obj.cost_of(2.0, 0.01) == _select.cost(pt(SCAN, 2.0, 0.01), obj) == 0.5 * 2.0 + 2.0 * 100 * 0.01
    for bad in (math.nan, -1.0, math.inf):
        with pytest.raises(at.ConfigError, match="compile_weight"):
            at.Objective(compile_weight=bad)
        with pytest.raises(at.ConfigError, match="compile_weight"):
            crossover_intervals(THREE, compile_weight=bad)
