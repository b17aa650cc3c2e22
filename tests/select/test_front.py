"""_front: the Pareto front and the crossover intervals, the winner rule over every call count, exactly."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from _points import FOR, SCAN, THREE, UNROLL, C, point, pt

import autotune as at
from autotune import select as _select
from autotune.select import best_at, crossover_intervals, pareto_front
from autotune.select._front import stretches
from autotune.select._rule import default_line, lines_of, winner_line


def best_for(points, calls, cw=1.0, rw=1.0):
    return _select.winner(points, at.Objective(calls, cw, rw))


def test_crossovers_match_the_hand_computed_example():
    assert crossover_intervals(THREE) == [
        {"config": SCAN, "from_calls": 0.0, "to_calls": 512.0},
        {"config": UNROLL, "from_calls": 512.0, "to_calls": 4096.0},
        {"config": FOR, "from_calls": 4096.0, "to_calls": math.inf},
    ]


def test_crossovers_scale_with_the_weights_and_ignore_input_order():
    # compile counts double: every crossover N doubles; runtime counts double: every N halves.
    shuffled = THREE[:]
    random.Random(3).shuffle(shuffled)
    assert [(i["from_calls"], i["to_calls"]) for i in crossover_intervals(shuffled, compile_weight=2.0)] == [
        (0.0, 1024.0),
        (1024.0, 8192.0),
        (8192.0, math.inf),
    ]
    assert [(i["from_calls"], i["to_calls"]) for i in crossover_intervals(shuffled, runtime_weight=2.0)] == [
        (0.0, 256.0),
        (256.0, 2048.0),
        (2048.0, math.inf),
    ]


def test_decimal_seconds_give_the_crossovers_to_rounding():
    pts = [pt("a", 0.5, 1e-3), pt("b", 10.0, 1e-4)]
    (a, b) = crossover_intervals(pts)
    assert a["config"] == pts[0].config and b["config"] == pts[1].config
    assert a["to_calls"] == b["from_calls"] == pytest.approx(9.5 / 9e-4, rel=1e-12)


def test_a_front_config_above_the_envelope_never_wins_and_ties_are_deterministic():
    # MID is on the Pareto front (between UNROLL and FOR on both axes) but its line passes
    # exactly through the UNROLL/FOR crossover: 7 + 4096 * 3/1024 = 19 = 3 + 16 = 11 + 8.
    mid = pt({"l": {"repr": "scan", "unroll": 2}}, 7.0, 3 * 2.0**-10)
    front = pareto_front(THREE + [mid])
    assert mid in front
    got = crossover_intervals(front)
    assert [i["config"] for i in got] == [SCAN, UNROLL, FOR]
    assert got[2]["from_calls"] == 4096.0
    # Two configs with the same seconds: the one with the smaller canonical JSON wins, as in best_for.
    twin = pt({"l": {"repr": "fori", "unroll": 1}}, 1.0, 2.0**-7)
    for order in ([twin] + THREE, THREE + [twin]):
        first = crossover_intervals(order)[0]["config"]
        assert first == twin.config  # '{"l":{"repr":"fori"...' < '{"l":{"repr":"scan"...'
        assert best_for(order, 10).config == first


def test_dominated_points_get_no_interval_and_edge_cases():
    dominated = pt("slow", 12.0, 0.01)
    assert [i["config"] for i in crossover_intervals(THREE + [dominated])] == [SCAN, UNROLL, FOR]
    assert crossover_intervals([]) == []
    assert crossover_intervals(THREE[:1]) == [{"config": SCAN, "from_calls": 0.0, "to_calls": math.inf}]
    # Only runtime counts: the fastest runner wins from 0 calls on; only compile counts: the fastest compiler.
    assert crossover_intervals(THREE, compile_weight=0) == [{"config": FOR, "from_calls": 0.0, "to_calls": math.inf}]
    assert crossover_intervals(THREE, runtime_weight=0) == [{"config": SCAN, "from_calls": 0.0, "to_calls": math.inf}]
    # The public entry point reads dicts once (Point.from_json): a bad one is a clear error.
    with pytest.raises(ValueError, match="compile_cost_s"):
        crossover_intervals([{"config": {}, "run_s": 1.0}])
    with pytest.raises(ValueError, match="run_cost_s"):
        crossover_intervals([{"config": {}, "compile_s": 1.0, "run_s": -1.0}])
    with pytest.raises(ValueError, match="compile_weight"):
        crossover_intervals(THREE, compile_weight=math.nan)


def test_intervals_agree_with_best_for_and_rescore_between_crossovers():
    rnd = random.Random(7)
    for _ in range(50):
        pts = [
            pt({"l": {"repr": "scan", "unroll": k}}, rnd.uniform(0.01, 20), rnd.uniform(1e-6, 1e-2))
            for k in range(1, 9)
        ]
        cw, rw = rnd.choice([0.5, 1.0, 3.0]), rnd.choice([0.25, 1.0, 2.0])
        intervals = crossover_intervals(pts, cw, rw)
        assert intervals[0]["from_calls"] == 0.0 and intervals[-1]["to_calls"] == math.inf
        for left, right in zip(intervals, intervals[1:]):
            assert left["to_calls"] == right["from_calls"] > left["from_calls"]
        for it in intervals:
            b = it["to_calls"] if it["to_calls"] < math.inf else it["from_calls"] * 10 + 10
            probe = math.sqrt(max(it["from_calls"], 1e-3) * b) if it["from_calls"] > 0 else b / 2
            assert best_for(pts, probe, cw, rw).config == it["config"] == best_at(intervals, probe)


def test_pareto_front_is_one_function_everywhere():
    assert pareto_front is at.pareto_front
    assert at.crossover_intervals is crossover_intervals
    pts = [pt("b", 2.0, 1.0), pt("a", 2.0, 1.0), pt("c", 1.0, 3.0), pt("d", 3.0, 1.5)]
    assert [p.config for p in pareto_front(pts)] == [C({"c": {}}), C({"a": {}})]
    # The public function also takes dicts (older or newer key spellings), read once as Points.
    as_dicts = [
        {"config": {"b": {}}, "compile_s": 2.0, "run_s": 1.0},
        {"config": {"c": {}}, "compile_cost_s": 1.0, "run_cost_s": 3.0},
    ]
    assert [p.config for p in pareto_front(as_dicts)] == [C({"c": {}}), C({"b": {}})]


def test_choose_and_the_intervals_agree_everywhere_and_at_every_boundary():
    rnd = random.Random(11)
    for _ in range(40):
        pts = []
        for k in range(rnd.randint(1, 5)):
            c0, r0 = rnd.uniform(0.1, 3), rnd.uniform(1e-5, 1e-3)
            pts.append(
                point(
                    {"l": {"repr": "scan", "unroll": k + 1}},
                    [(c0 * rnd.uniform(1, 1.3), r0 * rnd.uniform(1, 1.3)) for _ in range(rnd.choice([1, 3, 4, 5]))],
                )
            )
        default = pts[0].config
        intervals = crossover_intervals(pts, default=default)
        for it in intervals:  # a boundary belongs to the stretch it starts, for choose() too
            assert _select.winner(pts, at.Objective(it["from_calls"]), default).config == it["config"]
        for _ in range(20):
            n = rnd.choice([rnd.uniform(0, 10), rnd.uniform(0, 1e4), rnd.uniform(0, 1e7)])
            assert _select.winner(pts, at.Objective(n), default).config == best_at(intervals, n)


# --------------------------------------------------------------- exact, and asked only where the winner may change


def every_crossing(points, objective, default=None):
    """The rule's winner judged at every call count where it could change: where any two round lines
    of any points cross (or one crosses the mean of two of a point's, an even count's median), and
    where a tiered round bends; ``[(from N, config)]`` where the winner changes."""
    lines = lines_of(points, objective, default)
    dflt = default_line(lines, default)
    xs, flat = {Fraction(0)}, set()
    for ln in lines:
        rounds = ln.pieces()
        mine = [piece for r in rounds for _, piece in r]
        xs.update(start for r in rounds for start, _ in r)
        flat.update(mine)
        if len(rounds) % 2 == 0:
            flat.update(((a + c) / 2, (b + d) / 2) for i, (a, b) in enumerate(mine) for c, d in mine[i + 1 :])
    flat = sorted(flat)
    for i, (a, b) in enumerate(flat):
        xs.update(x for c, d in flat[i + 1 :] if b != d and (x := (c - a) / (b - d)) > 0)
    out = []
    for x in sorted(xs):
        w = winner_line(lines, dflt, x).point.config
        if not out or out[-1][1] != w:
            out.append((x, w))
    return out


def swept(points, objective, default=None):
    lines = lines_of(points, objective, default)
    out = []
    for x, w in stretches(lines, default_line(lines, default)):
        if not out or out[-1][1] != w.point.config:
            out.append((x, w.point.config))
    return out


def random_points(rnd, n, rounds, tiered=False):
    """``n`` points of one site; with ``rounds`` (a list of counts to draw from), each round a
    jittered copy of the medians; with ``tiered``, the first (the default) compiles fast."""
    out = []
    for k in range(n):
        c = (0.05 if k == 0 else rnd.uniform(0.2, 4.0)) if tiered else rnd.uniform(0.01, 3.0)
        r = rnd.choice([0.0, rnd.uniform(1e-4, 2e-2), rnd.uniform(1e-4, 2e-2)])
        jitter = [(c * rnd.uniform(0.8, 1.2), r * rnd.choice([1.0, rnd.uniform(0.8, 1.2)])) for _ in range(max(rounds))]
        config = C({"l": {"repr": "scan", "unroll": k + 1}})
        if rounds == [0]:
            out.append(pt(config, c, r))
        else:
            out.append(point(config, jitter[: rnd.choice(rounds)]))
        out[-1] = out[-1].replace(load_cost_s=c / rnd.randint(2, 9), slowdown=rnd.choice([None, 1.0, 1.5]))
    return out


@pytest.mark.parametrize(
    "rounds, tiered",
    [([0], False), ([3], False), ([4], False), ([1, 2, 3, 4], False), ([3], True), ([2], True), ([1, 2, 3], True)],
)
def test_the_sweep_names_the_winner_the_rule_names_at_every_crossing(rounds, tiered):
    rnd = random.Random(len(rounds) * 10 + max(rounds) + tiered)
    for _ in range(12):
        points = random_points(rnd, rnd.randint(1, 4), rounds, tiered)
        objective = at.Objective(
            compile_weight=rnd.choice([1.0, 0.5]),
            processes=rnd.choice([1, 3]),
            compilation_cache=rnd.random() < 0.5,
            tier_up=tiered,
        )
        for default in (None, points[0].config):
            assert swept(points, objective, default) == every_crossing(points, objective, default)


def test_a_boundary_is_the_rules_pick_from_it_on_and_the_previous_one_just_below_it():
    rnd = random.Random(5)
    for rounds, tiered in [([0], False), ([3, 5], False), ([2, 4, 6], False), ([3], True)]:
        for _ in range(15):
            points = random_points(rnd, rnd.randint(2, 5), rounds, tiered)
            default = points[0].config
            intervals = crossover_intervals(points, default=default, tier_up=tiered)
            for before, it in zip(intervals, intervals[1:]):
                goal = at.Objective(expected_calls=it["from_calls"], tier_up=tiered)
                assert _select.winner(points, goal, default).config == it["config"]
                below = math.nextafter(it["from_calls"], 0)
                if before["from_calls"] < below:
                    goal = at.Objective(expected_calls=below, tier_up=tiered)
                    assert _select.winner(points, goal, default).config == before["config"]


def test_a_near_tie_floats_cannot_tell_apart_is_judged_exactly():
    # 1.0 + 1e-17 rounds to 1.0: in floats the two cost the same at every call count up to ~1e16,
    # and the smaller config text (fori) would win the tie; exactly, scan is cheaper from 0 on.
    fori = pt(C({"l": {"repr": "fori", "unroll": 1}}), 1.0, 1e-17)
    scan = pt(SCAN, 1.0, 0.0)
    assert 1.0 + 1e-17 == 1.0 and fori.config.to_json() < scan.config.to_json()
    assert crossover_intervals([fori, scan]) == [{"config": SCAN, "from_calls": 0.0, "to_calls": math.inf}]
    assert _select.winner([fori, scan], at.Objective(expected_calls=1)).config == SCAN
    paired = [point(SCAN, [(1.0, 0.0)] * 3), point(fori.config, [(1.0 - 1e-16, 1e-17)] * 3)]
    # fori is cheaper (3 of 3 rounds) until its 1e-17 s a call make up the ~1e-16 s it compiles faster
    intervals = crossover_intervals(paired, default=SCAN)
    assert [it["config"] for it in intervals] == [fori.config, SCAN]
    assert intervals[0]["to_calls"] == float((1 - Fraction(1.0 - 1e-16)) / Fraction(1e-17)) == 11.102230246251565


def test_a_stretch_too_short_for_floats_is_judged_exactly():
    # Four rounds each: the medians (the mean of the middle two) of these two cross just below the
    # float 714.2857142857142, and two more round lines cross between it and the next float. Judged
    # in floats, that last stretch went to scan×1 and the intervals said scan×1 at 714.2857142857142,
    # where the rule (choose) says scan×3.
    rounds1 = [(0.6875, 0.000875), (0.6875, 0.0007875), (0.5625, 0.0009625000000000001), (0.625, 0.0009709975477956671)]
    rounds3 = [(1.0, 0.00041250000000000005), (1.0, 0.000375), (0.8871178826859817, 0.0003375), (1.1, 0.0003375)]
    scan1 = pt(SCAN, 0.625, 0.000875, rounds=rounds1)
    scan3 = pt(C({"l": {"repr": "scan", "unroll": 3}}), 1.0, 0.000375, rounds=rounds3)
    intervals = crossover_intervals([scan1, scan3])
    assert [(it["config"], it["from_calls"]) for it in intervals] == [(SCAN, 0.0), (scan3.config, 714.2857142857142)]
    for n in (714.2857142857141, 714.2857142857142, 714.2857142857143):
        assert _select.winner([scan1, scan3], at.Objective(expected_calls=n)).config == best_at(intervals, n), n


def test_the_rule_is_asked_only_where_the_winner_may_change():
    rnd = random.Random(2)
    points = random_points(rnd, 150, [5, 6, 7])
    objective = at.Objective()
    lines = lines_of(points, objective, points[0].config)
    asked = stretches(lines, default_line(lines, points[0].config))
    round_lines = sum(len(p.rounds) for p in points)
    # every two round lines may cross (about 500,000 call counts); the winner is judged at a few dozen
    assert len(asked) < 200 < round_lines**2 / 2
    assert [x for x, _ in asked] == sorted({x for x, _ in asked})
