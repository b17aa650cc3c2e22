"""The Pareto set, the exact crossover intervals, `autotune best` with them, and NSGA-II tuning."""

from __future__ import annotations

import inspect
import json
import math
import random

import jax.numpy as jnp
import optuna
import pytest

import autotune as at
from autotune import cli
from autotune._pareto import best_at, crossover_intervals, format_calls, intervals_json, pareto_front
from autotune.cache import Cache, CacheEntry, best_for

FAST = {"target_s": 0.01, "min_reps": 3, "warmup": 1}

# Three configs with binary-exact seconds, so the crossovers are exact by hand:
#   cost(N) = compile + N * run
#   SCAN:   1 + N/128        UNROLL: 3 + N/256        FOR: 11 + N/512
#   SCAN = UNROLL at 2 = N/256          -> N = 512
#   UNROLL = FOR  at 8 = N/512          -> N = 4096
#   (SCAN = FOR at 10 = 3N/512 -> N = 1706.67, inside UNROLL's interval: not a crossover)
SCAN = {"l": {"repr": "scan", "unroll": 1}}
UNROLL = {"l": {"repr": "scan", "unroll": 4}}
FOR = {"l": {"repr": "for", "unroll": 1}}
THREE = [
    {"config": SCAN, "compile_s": 1.0, "run_s": 2.0 ** -7},
    {"config": UNROLL, "compile_s": 3.0, "run_s": 2.0 ** -8},
    {"config": FOR, "compile_s": 11.0, "run_s": 2.0 ** -9},
]


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
        (0.0, 1024.0), (1024.0, 8192.0), (8192.0, math.inf)]
    assert [(i["from_calls"], i["to_calls"]) for i in crossover_intervals(shuffled, runtime_weight=2.0)] == [
        (0.0, 256.0), (256.0, 2048.0), (2048.0, math.inf)]


def test_decimal_seconds_give_the_crossovers_to_rounding():
    pts = [{"config": "a", "compile_s": 0.5, "run_s": 1e-3}, {"config": "b", "compile_s": 10.0, "run_s": 1e-4}]
    (a, b) = crossover_intervals(pts)
    assert a["config"] == "a" and b["config"] == "b"
    assert a["to_calls"] == b["from_calls"] == pytest.approx(9.5 / 9e-4, rel=1e-12)


def test_a_front_config_above_the_envelope_never_wins_and_ties_are_deterministic():
    # MID is on the Pareto front (between UNROLL and FOR on both axes) but its line passes
    # exactly through the UNROLL/FOR crossover: 7 + 4096 * 3/1024 = 19 = 3 + 16 = 11 + 8.
    mid = {"config": {"l": {"repr": "scan", "unroll": 2}}, "compile_s": 7.0, "run_s": 3 * 2.0 ** -10}
    front = pareto_front(THREE + [mid])
    assert mid in front
    got = crossover_intervals(front)
    assert [i["config"] for i in got] == [SCAN, UNROLL, FOR]
    assert got[2]["from_calls"] == 4096.0
    # Two configs with the same seconds: the one with the smaller canonical JSON wins, as in best_for.
    twin = {"config": {"l": {"repr": "fori", "unroll": 1}}, "compile_s": 1.0, "run_s": 2.0 ** -7}
    for order in ([twin] + THREE, THREE + [twin]):
        first = crossover_intervals(order)[0]["config"]
        assert first == twin["config"]  # '{"l":{"repr":"fori"...' < '{"l":{"repr":"scan"...'
        assert best_for(order, 10)["config"] == first


def test_dominated_points_get_no_interval_and_edge_cases():
    dominated = {"config": "slow", "compile_s": 12.0, "run_s": 0.01}
    assert [i["config"] for i in crossover_intervals(THREE + [dominated])] == [SCAN, UNROLL, FOR]
    assert crossover_intervals([]) == []
    assert crossover_intervals(THREE[:1]) == [{"config": SCAN, "from_calls": 0.0, "to_calls": math.inf}]
    # Only runtime counts: the fastest runner wins from 0 calls on; only compile counts: the fastest compiler.
    assert crossover_intervals(THREE, compile_weight=0) == [{"config": FOR, "from_calls": 0.0, "to_calls": math.inf}]
    assert crossover_intervals(THREE, runtime_weight=0) == [{"config": SCAN, "from_calls": 0.0, "to_calls": math.inf}]
    with pytest.raises(ValueError, match="compile_s"):
        crossover_intervals([{"config": "x", "run_s": 1.0}])
    with pytest.raises(ValueError, match="run_s"):
        crossover_intervals([{"config": "x", "compile_s": 1.0, "run_s": -1.0}])
    with pytest.raises(ValueError, match="compile_weight"):
        crossover_intervals(THREE, compile_weight=math.nan)


def test_intervals_agree_with_best_for_and_rescore_between_crossovers():
    rnd = random.Random(7)
    for _ in range(50):
        pts = [{"config": {"l": {"repr": "scan", "unroll": k}}, "compile_s": rnd.uniform(0.01, 20),
                "run_s": rnd.uniform(1e-6, 1e-2)} for k in range(1, 9)]
        cw, rw = rnd.choice([0.5, 1.0, 3.0]), rnd.choice([0.25, 1.0, 2.0])
        intervals = crossover_intervals(pts, cw, rw)
        assert intervals[0]["from_calls"] == 0.0 and intervals[-1]["to_calls"] == math.inf
        for left, right in zip(intervals, intervals[1:]):
            assert left["to_calls"] == right["from_calls"] > left["from_calls"]
        for it in intervals:
            b = it["to_calls"] if it["to_calls"] < math.inf else it["from_calls"] * 10 + 10
            probe = math.sqrt(max(it["from_calls"], 1e-3) * b) if it["from_calls"] > 0 else b / 2
            assert best_for(pts, probe, cw, rw)["config"] == it["config"] == best_at(intervals, probe)


def test_pareto_front_is_one_function_everywhere():
    from autotune import _study

    assert _study.pareto_front is pareto_front is at.pareto_front
    assert at.crossover_intervals is crossover_intervals
    pts = [{"config": "b", "compile_s": 2.0, "run_s": 1.0}, {"config": "a", "compile_s": 2.0, "run_s": 1.0},
           {"config": "c", "compile_s": 1.0, "run_s": 3.0}, {"config": "d", "compile_s": 3.0, "run_s": 1.5}]
    assert [p["config"] for p in pareto_front(pts)] == ["c", "a"]


def test_format_and_json_helpers():
    assert [format_calls(x) for x in (0.0, 37.5, 1250.4, math.inf)] == ["0", "37.5", "1,250", "∞"]
    assert json.loads(json.dumps(intervals_json(crossover_intervals(THREE))))[-1]["to_calls"] is None


# --------------------------------------------------------------- `autotune best`

SITES = {"l": {"kind": "loop", "length": 8, "has_ys": False}}
CPU = {"platform": "cpu", "device_kind": "cpu", "device_count": 1, "jax": "0.10.2", "jaxlib": "0.10.2"}


def put_entry(path) -> None:
    Cache(str(path)).put(CacheEntry(
        function_key="mod:step", fingerprint="f00d", signature="(f32[8],)", device=CPU, config=UNROLL,
        sites=SITES, measurements={"trace_s": 1.0, "lower_s": 1.0, "compile_s": 1.0, "run_s": 2.0 ** -8},
        objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0}, cost=3 + 1000 / 256,
        pareto=THREE,
    ))


def test_best_json_includes_the_crossovers(tmp_path, capsys):
    put_entry(tmp_path / "c.db")
    assert cli.main(["best", "--cache", str(tmp_path / "c.db"), "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["crossovers"] == [
        {"config": SCAN, "from_calls": 0.0, "to_calls": 512.0},
        {"config": UNROLL, "from_calls": 512.0, "to_calls": 4096.0},
        {"config": FOR, "from_calls": 4096.0, "to_calls": None},
    ]
    # Re-picked for another call count: the config flips, the crossovers stay.
    assert cli.main(["best", "--cache", str(tmp_path / "c.db"), "--json", "--expected-calls", "100000"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["config"] == FOR and entry["crossovers"][2]["from_calls"] == 4096.0


def test_best_table_shows_the_intervals(tmp_path, capsys):
    put_entry(tmp_path / "c.db")
    assert cli.main(["best", "--cache", str(tmp_path / "c.db")]) == 0
    text = capsys.readouterr().out
    assert "cheapest for calls" in text
    for span in ("[0, 512)", "[512, 4,096)", "[4,096, ∞)"):
        assert span in text
    assert "l=scan×4 ★" in text  # the chosen config is marked in the Pareto sub-table


# --------------------------------------------------------------- NSGA-II tuning


def smooth(x):
    return at.loop(lambda c, _: (jnp.sin(0.5 * c) + 1.0, None), x, length=8, name="smooth")[0]


def test_pareto_search_with_nsga2(tmp_path):
    storage = str(tmp_path / "s.db")
    fast = {"timing": FAST, "confirm_rounds": 1}
    if "isolate" in inspect.signature(at.tune).parameters:
        fast["isolate"] = False  # in-process (where trials may run in worker processes): a tiny study, quickly
    r = at.tune(smooth, jnp.zeros(16), objective="pareto", n_trials=6, storage=storage, expected_calls=1000, **fast)
    assert (r.search, r.sampler) == ("pareto", "nsga2")
    assert r.study_name.endswith("/pareto")
    study = optuna.load_study(study_name=r.study_name, storage="sqlite:///" + storage)
    assert len(study.directions) == 2
    assert study.user_attrs["search"] == "pareto"
    complete = [t for t in study.get_trials() if t.state.name == "COMPLETE"]
    assert len(study.get_trials()) == 6 and complete
    for t in complete:  # both objectives: total compile seconds and run seconds
        m = t.user_attrs["measurement"]
        assert t.values == pytest.approx([m["trace_s"] + m["lower_s"] + m["compile_s"], m["run_s"]])
    # The winner is the confirmed config cheapest for expected_calls; the trials have costs.
    assert r.best_cost == min(c["cost"] for c in r.confirmed)
    assert r.best_cost == pytest.approx(r.objective.cost_of(r.best.compile_total_s, r.best.run_s))
    assert all(t.cost is not None for t in r.trials if t.state == "complete")
    assert r.pareto and r.default_cost >= r.best_cost

    # Another call count re-uses the same study (its name has no call count) and picks from the front.
    r2 = at.tune(smooth, jnp.zeros(16), objective="pareto", n_trials=7, storage=storage, expected_calls=1, **fast)
    assert r2.study_name == r.study_name and len(r2.trials) == 7
    # A cost search of the same function is a different study.
    assert at.tune(smooth, jnp.zeros(16), n_trials=2, storage=storage, sampler="random", confirm_top=1,
                   **fast).study_name != r.study_name
    with pytest.raises(at.StudyError, match="objective"):
        at.tune(smooth, jnp.zeros(16), objective="fastest", storage=storage)


STUDY_FILE = '''
import jax.numpy as jnp
import autotune as at

@at.autotuned(expected_calls=100)
def smooth(x):
    return at.loop(lambda c, _: (jnp.sin(0.5 * c) + 1.0, None), x, length=4, name="smooth")[0]

def examples():
    return [(smooth, (jnp.zeros(8),))]
'''


def test_cli_tune_objective_pareto_stores_a_pareto_entry(tmp_path, capsys):
    study_file = tmp_path / "at_pareto_cli_study.py"
    study_file.write_text(STUDY_FILE)
    cache = str(tmp_path / "cache.db")
    argv = ["tune", str(study_file), "--objective", "pareto", "--trials", "3", "--cache", cache, "--json"]
    try:  # shorter runtime sampling, where the CLI offers it
        cli.build_parser().parse_args(argv + ["--run-seconds", "0.01"])
        argv += ["--run-seconds", "0.01"]
    except SystemExit:
        pass
    assert cli.main(argv) == 0
    (res,) = json.loads(capsys.readouterr().out)
    assert res["study"].endswith("/pareto") and res["pareto"]
    (entry,) = Cache(cache).entries()
    assert entry.study_name == res["study"] and entry.pareto and entry.config == res["best_config"]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    names = optuna.study.get_all_study_names(storage="sqlite:///" + str(tmp_path / "studies.db"))
    assert names == [res["study"]]
