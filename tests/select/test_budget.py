"""select/_budget: a memory budget as said (units, bytes, fractions of the device's memory) and the one
feasibility rule: a point over the budget never wins, in the winner rule, the crossovers and tier-up."""

from __future__ import annotations

import math

import pytest

from autotune import select as _select
from autotune._errors import ConfigError
from autotune.program._config import Config
from autotune.select import Point
from autotune.select._budget import feasible, fits, parse, resolve
from autotune.select._objective import Objective
from autotune.select._tiered import tiers

FAST, DEFAULT, SLIM = (Config({"l": {"repr": r, "unroll": u}}) for r, u in (("for", 1), ("scan", 1), ("scan", 2)))


def point(config: Config, run_s: float, memory: int | None, rounds: int = 3) -> Point:
    return Point(config, 1.0, run_s, rounds=((1.0, run_s),) * rounds, memory_bytes=memory)


@pytest.mark.parametrize(
    "said, got",
    [
        ("12GiB", 12 * 2**30),
        ("512MB", 512 * 10**6),
        ("1.5 KiB", 1536),
        ("100b", 100),
        (4096, 4096),
        ("4096", 4096),
        ("0.5", 0.5),
        (0.25, 0.25),
        (1.0, 1.0),
        (None, None),
    ],
)
def test_parse_reads_units_bytes_and_fractions(said, got):
    assert parse(said) == got and type(parse(said)) is type(got)


@pytest.mark.parametrize("said", ["12 parsecs", "GiB", "-1GiB", 0, -3, "2.5", 2.5, True, math.inf, "1e400"])
def test_parse_refuses_anything_else_with_a_sentence_naming_the_forms(said):
    with pytest.raises(ConfigError, match=r"max_memory=.*(give bytes with a unit|'12GiB')"):
        parse(said)


def test_a_fraction_needs_a_device_that_reports_its_memory():
    assert resolve(0.5, 16 * 2**30) == 8 * 2**30 and resolve(2**20, None) == 2**20
    with pytest.raises(ConfigError, match=r"this device reports none \(the CPU does not\).*max_memory='4GiB'"):
        resolve(0.5, None)
    assert Objective(max_memory=0.5).on_device(2**30).max_memory == 2**29
    assert Objective(max_memory="1KiB").to_dict()["max_memory"] == 1024
    assert "max_memory" not in Objective().to_dict()
    assert Objective.from_dict(Objective(max_memory="1KiB").to_dict()) == Objective(max_memory=1024)


def test_fits_needs_a_known_figure_at_most_the_budget():
    assert fits(point(FAST, 1.0, 100), 100) and not fits(point(FAST, 1.0, 101), 100)
    assert not fits(point(FAST, 1.0, None), 100) and fits(point(FAST, 1.0, None), None)


def test_a_config_over_the_budget_never_wins_and_the_default_stays_the_bar_where_it_fits():
    points = [point(FAST, 0.001, 900), point(DEFAULT, 0.01, 100), point(SLIM, 0.005, 200)]
    assert _select.winner(points, Objective(), DEFAULT).config == FAST
    assert _select.winner(points, Objective(max_memory=500), DEFAULT).config == SLIM
    assert _select.winner(points, Objective(max_memory=150), DEFAULT).config == DEFAULT
    intervals = _select.crossover_intervals(points, default=DEFAULT, max_memory=500)
    assert FAST not in [it["config"] for it in intervals]


def test_a_default_over_the_budget_gives_way_to_the_cheapest_config_that_fits_without_a_sign_test():
    # SLIM is slower than the default in every round: under no budget it never wins.
    points = [point(DEFAULT, 0.01, 900), point(SLIM, 0.02, 200, rounds=1), point(FAST, 0.001, 950)]
    assert _select.winner(points, Objective(), DEFAULT).config == FAST
    assert _select.winner(points, Objective(max_memory=500), DEFAULT).config == SLIM
    fitting, bar = feasible(points, 500, DEFAULT)
    assert [p.config for p in fitting] == [SLIM] and bar is None


def test_when_nothing_fits_the_default_stays():
    points = [point(DEFAULT, 0.01, 900), point(FAST, 0.001, 950)]
    assert _select.winner(points, Objective(max_memory=10), DEFAULT).config == DEFAULT
    assert feasible(points, 10, DEFAULT) == ([points[0]], DEFAULT)


def test_tier_up_never_serves_a_default_over_the_budget():
    slow = Point(FAST, 100.0, 0.001, memory_bytes=100)  # compiles far slower than the default: qualifies
    default = Point(DEFAULT, 1.0, 0.01, memory_bytes=900)
    assert tiers(slow, default, Objective(tier_up=True))
    assert not tiers(slow, default, Objective(tier_up=True, max_memory=500))
