"""Issue 23: an objective that knows the processes and the compilation cache, cost =
cw·(C + (P−1)·R) + rw·P·N·run, with R the compile again, or the load from JAX's persistent cache
(measured for real in fresh processes)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import pytest
from _presets import FAST

import autotune as at
from autotune import cli
from autotune import select as _select
from autotune._errors import ConfigError
from autotune.cache import Cache, CacheEntry
from autotune.measuring._measurement import Measurement
from autotune.select import Point
from autotune.select._objective import compilation_cache_on

SCAN = at.Config({"l": {"repr": "scan", "unroll": 1}})
FOR = at.Config({"l": {"repr": "for", "unroll": 1}})
# Binary-exact seconds: scan compiles in 0.5 s, runs 1/64 s, a later process loads it in 0.25 s;
# the unrolled loop compiles in 4 s, runs 1/1024 s, loads in 0.5 s. Per process, without a cache
# the unrolled loop pays off above 3.5 / (15/1024) = 238.9 calls; with the cache, later processes
# pay only the load: above (3.5 + 7·0.25) / (8·15/1024) = 44.8 calls for 8 processes.
POINTS = [
    Point(SCAN, 0.5, 2.0**-6, load_cost_s=0.25, load_measured=True),
    Point(FOR, 4.0, 2.0**-10, load_cost_s=0.5, load_measured=True),
]


def test_one_process_is_exactly_the_formula_of_one_process():
    for cw, rw, c, r, load in [(1.0, 1.0, 0.3, 1e-4, 0.01), (0.5, 2.0, 1.7, 3e-3, None), (0.0, 1.0, 2.0, 0.1, 0.2)]:
        want = (Fraction(cw) * Fraction(c), Fraction(rw) * Fraction(r))
        for cache in (False, True):
            assert at.Objective(10, cw, rw, processes=1, compilation_cache=cache).line(c, r, load) == want
    assert at.Objective(expected_calls=100).cost_of(compile_cost_s=2.0, run_cost_s=0.01) == 3.0
    assert at.Objective().to_dict() == {"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0}


def test_later_processes_pay_the_compile_again_or_with_the_cache_the_load():
    off, on = at.Objective(100, processes=8), at.Objective(100, processes=8, compilation_cache=True)
    assert off.cost_of(2.0, 0.01, load_cost_s=0.5) == 8 * 2.0 + 8 * 100 * 0.01  # the load does not count without it
    assert on.cost_of(2.0, 0.01, load_cost_s=0.5) == 2.0 + 7 * 0.5 + 8 * 100 * 0.01
    assert on.cost_of(2.0, 0.01) == off.cost_of(2.0, 0.01)  # an unknown load: charged the compile again
    # A line in N, each process's calls: intercept cw·(C + 7R), slope rw·8·run.
    assert on.line(2.0, 0.25, 0.5) == (Fraction(11, 2), Fraction(2))
    assert on.shared and not off.shared and not at.Objective(processes=1, compilation_cache=True).shared


def test_the_pick_changes_where_the_load_makes_unrolling_pay():
    pick = {
        (p, cache): _select.winner(POINTS, at.Objective(100, processes=p, compilation_cache=cache), SCAN).config
        for p, cache in ((1, False), (8, False), (8, True))
    }
    assert pick == {(1, False): SCAN, (8, False): SCAN, (8, True): FOR}
    for cache, crossover in ((False, Fraction(3584, 15)), (True, Fraction(224, 5))):
        (a, b) = _select.crossover_intervals(POINTS, processes=8, compilation_cache=cache, default=SCAN)
        assert (a["config"], b["config"]) == (SCAN, FOR) and b["from_calls"] == pytest.approx(float(crossover))


def test_the_objective_round_trips_and_refuses_bad_figures():
    o = at.Objective(10, processes=8, compilation_cache=True)
    assert o.to_dict() == {
        "expected_calls": 10,
        "compile_weight": 1.0,
        "runtime_weight": 1.0,
        "processes": 8,
        "compilation_cache": True,
    }
    assert at.Objective.from_dict(json.loads(json.dumps(o.to_dict()))) == o
    assert at.Objective(10).overridden(processes=8, compilation_cache=True) == o
    assert o.overridden(processes=1).to_dict() == {**at.Objective(10).to_dict(), "compilation_cache": True}
    for bad in (0, 1.5, True, "8"):
        with pytest.raises(ConfigError, match="processes"):
            at.Objective(processes=bad)
    with pytest.raises(ConfigError, match="compilation_cache"):
        at.Objective(compilation_cache="yes")


def test_point_worker_processes_renamed_and_the_old_key_still_read():
    p = Point(SCAN, 1.0, 0.5, worker_processes=2, load_cost_s=0.25, load_measured=True)
    d = p.to_json()
    assert d["worker_processes"] == 2 and "processes" not in d and d["load_cost_s"] == 0.25 and d["load_measured"]
    assert Point.from_json(json.loads(json.dumps(d))) == p
    old = {"config": SCAN.to_dict(), "compile_cost_s": 1.0, "run_cost_s": 0.5, "processes": 2}
    assert Point.from_json(old).worker_processes == 2 and Point.from_json(old).load_cost_s is None
    # Without a measured load, a point takes the estimate of its measurement: trace + lower (CPU seconds).
    m = Measurement(0.1, 0.2, 1.0, 0.01, 0.0, 5, SCAN, trace_cpu_s=0.125, lower_cpu_s=0.25, compile_cpu_s=1.0)
    q = Point(SCAN, m.compile_cost_s, m.run_cost_s, measurement=m)
    assert (q.load_cost_s, q.load_measured) == (0.375, False)
    assert Point(SCAN, 1.0, 0.5, measurement=m.replace(load_cost_s=0.5)).load_measured


def test_the_compilation_cache_is_detected_or_said(monkeypatch, tmp_path):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    before = jax.config.jax_compilation_cache_dir
    assert before is None  # the tests run without a persistent cache
    assert compilation_cache_on(None) is False and compilation_cache_on(True) is True
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path))
    assert compilation_cache_on(None) is True and compilation_cache_on(False) is False
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    try:
        jax.config.update("jax_compilation_cache_dir", str(tmp_path))
        assert compilation_cache_on(None) is True

        @at.autotuned(processes=8, key="tests:f")
        def f(x):
            return x + 1

        assert f.autotune.objective == at.Objective(processes=8, compilation_cache=True)
        off = f.autotune.with_options(compilation_cache=False)
        assert off.objective == at.Objective(processes=8)
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    with pytest.raises(ConfigError, match="processes"):
        at.autotuned(lambda x: x, processes=0)
    with pytest.raises(ConfigError, match="compilation_cache"):
        at.autotuned(lambda x: x, compilation_cache="on")


def test_best_re_picks_for_processes_and_the_cache_from_a_stored_entry(tmp_path, capsys):
    db = str(tmp_path / "c.db")
    Cache(db).put(
        CacheEntry(
            function_key="mod:step",
            fingerprint="f00d",
            signature="PyTreeDef(((*,), {}))|float32[8]",
            device={"platform": "cpu", "device_kind": "cpu", "device_count": 1, "jax": "0", "jaxlib": "0"},
            config=SCAN.to_dict(),
            sites={"l": {"kind": "loop", "length": 8, "has_ys": False}},
            measurements={"trace_s": 0.1, "lower_s": 0.1, "compile_s": 0.3, "run_s": 2.0**-6},
            objective=at.Objective(100).to_dict(),
            cost=0.5 + 100 / 64,
            pareto=[p.to_json() for p in POINTS],
            default_config=SCAN.to_dict(),
        )
    )

    def best(*flags: str) -> dict:
        assert cli.main(["best", "--cache", db, "--json", *flags]) == 0
        (e,) = json.loads(capsys.readouterr().out)
        return e

    assert best()["config"] == SCAN
    assert best("--processes", "8", "--compilation-cache", "off")["config"] == SCAN
    on = best("--processes", "8", "--compilation-cache", "on")
    assert on["config"] == FOR and on["objective"]["processes"] == 8 and on["objective"]["compilation_cache"] is True
    assert math.isclose(on["cost"], 4.0 + 7 * 0.5 + 8 * 100 / 1024)
    assert on["crossovers"][1]["from_calls"] == pytest.approx(44.8)
    assert {p["load_cost_s"] for p in on["pareto"]} == {0.25, 0.5}  # the loads stored with the points
    assert cli.main(["best", "--cache", db, "--processes", "8", "--compilation-cache", "on"]) == 0
    assert "8 (cache on)" in capsys.readouterr().out  # the table shows the processes where not 1


@pytest.mark.timing  # a measured load against a measured compile
def test_a_tune_for_processes_with_the_cache_measures_real_loads_below_the_compile(tmp_path):
    """The one real load measurement: each confirmed config compiled into a temporary persistent
    cache in one fresh process and loaded in a second; a load is cheaper than the compile."""

    def f(x):
        def body(c, _):
            return jnp.tanh(c @ c) * 0.5 + jnp.sin(c), None

        return at.loop(body, x, length=6, name="l")[0]

    r = at.tune(
        f,
        jnp.ones((16, 16)),
        expected_calls=100,
        processes=4,
        compilation_cache=True,
        n_trials=2,
        isolate=False,
        timing=FAST,
        confirm_rounds=1,
        progress=False,
        storage=f"sqlite:///{tmp_path / 's.db'}",
    )
    assert r.objective == at.Objective(100, processes=4, compilation_cache=True) and r.load_notes == []
    assert "p=4,cc" in r.study_name
    for p in r.confirmed:
        assert p.load_measured and p.load_cost_s is not None
        assert p.load_cost_s < p.compile_cost_s, f"{p.config}: load {p.load_cost_s} vs compile {p.compile_cost_s}"
    assert r.best_cost == pytest.approx(_select.cost(_select.point_of(r.confirmed, r.best_config), r.objective))


def test_loads_are_measured_for_the_deciding_contenders_and_a_miss_is_charged_the_compile():
    from autotune.measuring.process._load_probe import Load
    from autotune.study._load_costs import measure_loads

    m = Measurement(0.1, 0.2, 1.0, 0.01, 0.0, 5, SCAN, trace_cpu_s=0.125, lower_cpu_s=0.125, compile_cpu_s=1.0)
    points = [Point(SCAN, 1.25, 0.01, measurement=m), Point(FOR, 4.0, 0.001, measurement=m.replace(config=FOR))]
    shared = at.Objective(10, processes=8, compilation_cache=True)
    assert measure_loads(points, SCAN, at.Objective(10, processes=8), None) == (points, [])  # the cache off: none
    same, notes = measure_loads(points, SCAN, shared, None)
    assert same == points and "trace + lower" in notes[0]  # no way to measure: the estimate, said
    asked = []

    def load(config):  # what measure_load returns: a hit for the scan, a miss for the unrolled loop
        asked.append(config)
        return Load(0.0625, 1.0) if config == SCAN else Load(None, 3.0, note="the second process missed the cache")

    got, notes = measure_loads(points, SCAN, shared, load)
    assert sorted(asked, key=str) == sorted([SCAN, FOR], key=str)  # each once
    assert (got[0].load_cost_s, got[0].load_measured) == (0.25 + 0.0625, True)  # trace + lower + the load
    assert (got[1].load_cost_s, got[1].load_measured) == (4.0, True) and "missed" in notes[0]  # charged the compile
