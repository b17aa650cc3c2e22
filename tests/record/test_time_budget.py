"""`autotune tune --recorded --time-budget`: the duration parser, the split rule (calls ×
runtime, floors, exact rounding), the re-split as time is spent, and the real command on two
recorded functions in a subprocess (autotune/record/_budget.py, autotune/record/_replay.py, cli/_record.py)."""

from __future__ import annotations

import math
import textwrap

import pytest
from _repo import python, repo_env

from autotune._errors import StudyError
from autotune.cli import main
from autotune.measuring._sampling import Sampling
from autotune.record._budget import Share, next_share, parse_duration, spend, split_budget

TWO = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    @at.autotuned(expected_calls=5000)
    def heavy(x):
        return at.loop(lambda c, _: (jnp.tanh(c @ c) * 0.5, None), x, length=8, name="steps")[0]

    @at.autotuned(expected_calls=10)
    def light(x):
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="steps")[0]

    if __name__ == "__main__":
        heavy(jnp.eye(48))
        light(jnp.ones(8))
""")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("30m", 1800.0), ("1.5h", 5400.0), ("45", 45.0), ("2.5", 2.5), (" 10 M ", 600.0), (".5m", 30.0)],
)
def test_a_duration_is_seconds_minutes_hours_or_plain_seconds(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["5x", "", "m", "0", "0s", "-3", "1e999", "nan", "1.5 hours", "30m10s"])
def test_anything_else_is_one_line_naming_the_option_and_the_forms(text):
    with pytest.raises(StudyError) as e:
        parse_duration(text)
    said = str(e.value)
    assert "\n" not in said and said.startswith(f"--time-budget {text!r} is not a duration")
    assert "90s" in said and "30m" in said and "1.5h" in said


def test_the_command_line_refuses_a_bad_duration_in_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["tune", "--recorded", "--time-budget", "5x"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "--time-budget: '5x' is not a duration > 0" in err


def test_the_split_is_proportional_to_calls_times_runtime():
    assert split_budget(100, [3, 1], [0, 0]) == [75.0, 25.0]
    assert split_budget(1800, [2.0, 6.0, 0.0], [10, 10, 10]) == [447.5, 1342.5, 10.0]  # zero weight: its floor


def test_a_part_below_its_floor_gets_the_floor_and_the_rest_is_split_again():
    # 1 part in 101 of 100 s is below the 10 s floor: 10 s to it, the other 90 s split 3:1
    assert split_budget(100, [75, 25, 1], [10, 10, 10]) == [67.5, 22.5, 10.0]
    # the re-split pushes another one below its floor in turn (12 -> 11.5 s after the first is fixed)
    assert split_budget(100, [80, 12, 8], [12, 12, 12]) == [76.0, 12.0, 12.0]


def test_all_weights_zero_split_evenly_and_floors_above_the_budget_win():
    assert split_budget(30, [0, 0, 0], [1, 1, 1]) == [10.0, 10.0, 10.0]
    assert split_budget(15, [5, 1], [10, 10]) == [10.0, 10.0]  # more than the budget: the caller says so
    assert split_budget(10, [], []) == []
    with pytest.raises(ValueError):
        split_budget(10, [1, -1], [0, 0])


@pytest.mark.parametrize("budget", [100, 99.9, 7.3, 1800, 0.6])
def test_the_shares_are_tenths_that_sum_to_the_budget_exactly(budget):
    weights = [1, 1, 1, 2e-9, math.pi, 7]
    parts = split_budget(budget, weights, [0.05] * len(weights))
    tenths = [round(p * 10) for p in parts]
    assert all(abs(p * 10 - t) < 1e-6 for p, t in zip(parts, tenths, strict=True))
    assert sum(tenths) == round(budget * 10)
    assert all(t >= 1 for t in tenths)  # a 0.05 s floor rounds up to a whole tenth


def test_time_left_unspent_flows_to_the_functions_after_it(monkeypatch):
    # The budget's clock stands still unless a tune says it spent time: no wall-clock bound below.
    from types import SimpleNamespace

    from autotune.record import _budget

    monkeypatch.setattr(_budget, "time", SimpleNamespace(monotonic=lambda: 0.0))
    assert next_share(100, [1, 1], [0, 0]) == 50.0
    assert next_share(-5, [1, 1], [3, 3]) == 3.0  # overrun: the floor, never a negative timeout
    shares = {name: Share(name, "(f32[4])", calls, run, 0.0) for name, calls, run in [("a", 10, 1.0), ("b", 30, 1.0)]}
    given: list[tuple[str, float]] = []

    def tune(name: str, seconds: float) -> str:
        given.append((name, seconds))
        return name

    plans = []
    done = spend(
        40, ["a", "b"], shares.get, tune, lambda s, total, m: plans.append([(x.function, x.seconds) for x in s])
    )
    assert [name for name, _, _ in done] == ["b", "a"]  # heaviest first
    assert plans[0][0][0] == "b" and plans[0][0][1] >= 29.9  # b: 3/4 of 40 s (less the measuring)
    # b returned at once: a gets everything left, not its planned quarter
    assert given[0][0] == "b" and given[1][0] == "a" and given[1][1] > 39.0
    assert shares["b"].used_s < 1.0 and shares["a"].given_s == given[1][1]


def test_the_plan_names_a_function_of_weight_zero_and_floors_above_the_budget(capsys):
    from autotune.cli._output import console
    from autotune.cli._record import show_plan
    from autotune.record._budget import plan

    shares = [Share("app:step", "(f32[8])", 1000, 1e-3, 0.5), Share("app:init", "(f32[8])", 0, 2e-3, 0.5)]
    show_plan(console(wide=True), plan(100 - 0.4, shares), 100, 0.4, True)  # as spend() plans: after measuring
    out = capsys.readouterr().out
    assert out.index("app:step") < out.index("app:init")  # heaviest first
    assert "app:init (f32[8]) weighs 0 (0 expected calls): it gets its floor of 10 s." in out
    assert "100.0%" in out and "89.6" in out and "exceed" not in out
    show_plan(console(wide=True), plan(15 - 0.4, shares), 15, 0.4, True)
    assert "The floors (20.0 s, at least 10 s each) exceed the budget left after measuring (14.6 s)" in (
        capsys.readouterr().out
    )


def test_time_budget_and_timeout_together_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "empty.db"))
    assert main(["tune", "--recorded", "--time-budget", "1m", "--timeout", "5"]) == 2
    err = capsys.readouterr().err
    assert "--time-budget and --timeout both limit the time" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.timing  # the split follows the two functions' measured runtimes
def test_tune_recorded_with_a_time_budget_splits_it_and_tunes_both(tmp_path):
    (tmp_path / "two.py").write_text(TWO)
    env = repo_env(AUTOTUNE_CACHE=str(tmp_path / "cache.db"))
    r = python("two.py", cwd=tmp_path, env={**env, "AUTOTUNE_RECORD": "1"})
    assert r.returncode == 0, r.stderr
    args = ["-m", "autotune", "tune", "--recorded", "--time-budget", "1m", "--trials", "2", "--run-seconds", "0.05"]
    r = python(*args, "--wide", cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    head = out[out.index("--time-budget 60 s:") : out.rindex("\n", 0, out.index("the contenders"))]  # the plan
    assert "split by calls × default runtime" in head
    rows = {line.split()[0]: line.split() for line in head.splitlines() if line.startswith(("two:heavy", "two:light"))}
    assert set(rows) == {"two:heavy", "two:light"}, out
    assert rows["two:heavy"][1:3] == ["(f32[48,48])", "5,000"] and rows["two:light"][2] == "10"
    heavy_share, light_share = (float(rows[k][-2].rstrip("%")) for k in ("two:heavy", "two:light"))
    assert heavy_share > 99 and light_share < 1  # 5,000 calls of a matmul chain against 10 of a tiny loop
    assert float(rows["two:heavy"][-1]) > float(rows["two:light"][-1]) >= 10.0  # the light one gets its floor
    assert head.index("two:heavy") < head.index("two:light")  # heaviest first: the tuning order
    assert out.index("the time budget as spent") < out.index("2 tuned, 0 tuned before, 0 skipped")
    assert "s of the 60.0 s budget" in out and out.count("stored in the cache") == 2  # both got entries
    spent = out[out.index("the time budget as spent") :]
    assert spent.index("two:heavy") < spent.index("two:light")


def test_a_function_run_by_several_processes_weighs_the_calls_of_all_of_them():
    import jax.numpy as jnp

    import autotune as at
    from autotune.jit._decorator import controller
    from autotune.record._budget import quick_default

    def f(x):
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="steps")[0]

    def share(**options):  # the controller, as `autotune tune --recorded` hands it over
        return quick_default(controller(at.autotuned(f, **options)), (jnp.ones(8),), {}, "(f32[8])", Sampling())

    one, eight = share(expected_calls=100), share(expected_calls=100, processes=8)
    assert (one.calls, eight.calls) == (100, 800)
    assert eight.weight == 800 * eight.runtime_s > 0
