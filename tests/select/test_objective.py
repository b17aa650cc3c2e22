"""at.Objective: cost = compile_weight * (trace + lower + compile) + runtime_weight * calls * run."""

import math

import pytest

import autotune as at


def measurement(trace_s=0.25, lower_s=0.5, compile_s=1.25, run_s=0.003):
    return at.Measurement(trace_s=trace_s, lower_s=lower_s, compile_s=compile_s, run_s=run_s, run_iqr_s=0.0, reps=10)


def test_defaults_match_the_design():
    o = at.Objective()
    assert (o.expected_calls, o.compile_weight, o.runtime_weight) == (1000, 1.0, 1.0)
    # trace + lower + compile = 2.0 s once, plus 1000 calls of 3 ms = 3.0 s
    assert o.cost(measurement()) == pytest.approx(5.0)


@pytest.mark.parametrize(
    "calls, cw, rw, expected",
    [
        (100, 1.0, 1.0, 2.0 + 0.3),
        (100, 2.0, 1.0, 4.0 + 0.3),
        (100, 1.0, 10.0, 2.0 + 3.0),
        (0, 1.0, 1.0, 2.0),  # never called: only the compile counts
        (10_000, 0.0, 1.0, 30.0),  # compile is free: only the runtime counts
        (10_000, 0.5, 0.0, 1.0),  # runtime is free
        (1, 3.0, 2.0, 6.0 + 0.006),
    ],
)
def test_cost_by_hand(calls, cw, rw, expected):
    o = at.Objective(expected_calls=calls, compile_weight=cw, runtime_weight=rw)
    assert o.cost(measurement()) == pytest.approx(expected, rel=1e-12)


def test_every_one_off_stage_counts_and_iqr_and_reps_do_not():
    o = at.Objective(expected_calls=10)
    base = o.cost(measurement())
    assert o.cost(measurement(trace_s=1.25)) == pytest.approx(base + 1.0)
    assert o.cost(measurement(lower_s=1.5)) == pytest.approx(base + 1.0)
    assert o.cost(measurement(compile_s=2.25)) == pytest.approx(base + 1.0)
    assert o.cost(measurement(run_s=0.103)) == pytest.approx(base + 1.0)
    noisy = at.Measurement(trace_s=0.25, lower_s=0.5, compile_s=1.25, run_s=0.003, run_iqr_s=9.0, reps=3)
    assert o.cost(noisy) == pytest.approx(base)


def test_the_trade_off_flips_with_expected_calls():
    slow_compile_fast_run = measurement(trace_s=0.0, lower_s=0.0, compile_s=2.0, run_s=0.001)
    fast_compile_slow_run = measurement(trace_s=0.0, lower_s=0.0, compile_s=0.2, run_s=0.01)
    few, many = at.Objective(expected_calls=10), at.Objective(expected_calls=10_000)
    assert few.cost(fast_compile_slow_run) < few.cost(slow_compile_fast_run)
    assert many.cost(slow_compile_fast_run) < many.cost(fast_compile_slow_run)


def test_cost_of_matches_cost():
    o = at.Objective(expected_calls=7, compile_weight=0.5, runtime_weight=2.0)
    assert o.cost_of(compile_cost_s=2.0, run_cost_s=0.25) == pytest.approx(0.5 * 2.0 + 2.0 * 7 * 0.25)
    assert o.cost(measurement()) == pytest.approx(o.cost_of(2.0, 0.003))


@pytest.mark.parametrize("field", ["expected_calls", "compile_weight", "runtime_weight"])
@pytest.mark.parametrize("bad", [-1, -0.5, math.nan, math.inf, -math.inf, True, "10", None])
def test_invalid_weights_raise(field, bad):
    with pytest.raises(at.ConfigError) as e:
        at.Objective(**{field: bad})
    assert field in str(e.value)


def test_zero_is_a_valid_weight():
    o = at.Objective(expected_calls=0, compile_weight=0, runtime_weight=0)
    assert o.cost(measurement()) == 0.0


def test_objective_is_a_value():
    assert at.Objective(expected_calls=5) == at.Objective(expected_calls=5)
    assert at.Objective(expected_calls=5) != at.Objective(expected_calls=6)
    assert hash(at.Objective(compile_weight=2.0)) == hash(at.Objective(compile_weight=2.0))
    assert at.Objective(expected_calls=3, compile_weight=0.5, runtime_weight=2.0).to_dict() == {
        "expected_calls": 3,
        "compile_weight": 0.5,
        "runtime_weight": 2.0,
    }


def test_overridden_is_the_one_merge_of_a_stored_objective_with_a_commands_options():
    from autotune.select._objective import Objective

    stored = Objective.from_dict({"expected_calls": 50, "compile_weight": 2.0})
    assert stored == Objective(50.0, 2.0, 1.0)
    assert stored.overridden() == stored
    assert stored.overridden(expected_calls=7, runtime_weight=0.5) == Objective(7.0, 2.0, 0.5)
    assert Objective.from_dict({}) == Objective()
