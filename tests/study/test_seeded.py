"""study/_seeded: a study seeded from its neighbours, decided without a stopwatch. Every figure
comes from a `FakeRunner` (tests/_fake_runner.py), canned per config; the neighbours come in
through ``Plumbing.neighbours`` as the cache would hand them over. The first trials are the
default then the neighbours' configs that fit; the search stops after them when the nearest
neighbour's winner holds and goes on (and finds the better config) when it does not; a stopped
study run again is finished, and ``neighbours=False`` searches on. The rule itself (:func:`decide`)
is tested on points."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from _fake_runner import FakeRunner

import autotune as at
from autotune._options import Plumbing, TuneOptions
from autotune.program._config import Config
from autotune.program._keys import signature
from autotune.select import Point
from autotune.select._objective import Objective
from autotune.study._neighbours import Neighbour, Seeding, Source
from autotune.study._seeded import MARGIN, decide, margin
from autotune.study._tune import run

MS = 1e-3
X = jnp.ones(4)
GOAL = Objective(expected_calls=1e4)


def loop32(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=32, name="l")[0]


def cfg(text: str) -> Config:
    return Config({"l": at.SiteChoice.parse(text)})


DEFAULT = cfg("scan×1")
# The neighbour (float32[8]): scan×8 won, "for" and scan×4 came next; 5 is offered by a 31-step loop only.
NEIGHBOUR = Neighbour(
    signature((jnp.ones(8),)),
    "fp8",
    (
        Point(DEFAULT, 0.1, 1 * MS),  # 10.1 s at 10^4 calls
        Point(cfg("scan×8"), 0.1, 0.2 * MS),  # 2.1
        Point(cfg("for"), 1.0, 0.15 * MS),  # 2.5
        Point(cfg("scan×5"), 0.1, 0.4 * MS),  # 4.1: scan×4 here
        Point(Config({"l": {"repr": "scan", "unroll": 2}, "gone": {"repr": "for"}}), 0.1, 0.3 * MS),  # does not fit
    ),
    DEFAULT,
)
SEEDS = [cfg("scan×8"), cfg("for"), cfg("scan×4")]


# Here every run takes about twice the neighbour's: its ranking holds, and no other config is cheaper.
HOLDS = {
    "l=scan×1": (0.1, 2 * MS),
    "l=scan×8": (0.1, 0.4 * MS),
    "l=for": (1.0, 0.35 * MS),
    "l=scan×4": (0.1, 0.8 * MS),
    "*": (0.1, 3 * MS),
}


def tune(runner: FakeRunner, tmp_path, found=(NEIGHBOUR,), **options):
    """The run behind ``fn.tune`` on the fake runner, the neighbours handed in as the cache would."""
    options = {"sampler": "grid", "xla": False, "progress": False, "storage": str(tmp_path / "studies.db"), **options}
    plumbing = Plumbing(neighbours_of=lambda fingerprint, sig, device: list(found))
    return run(loop32, (X,), {}, GOAL, TuneOptions(**options), runner=runner, plumbing=plumbing)


def measured(r) -> list[Config]:
    return [t.config for t in r.trials]


# ------------------------------------------------------------------------------- the runs


def test_the_first_trials_are_the_default_then_the_neighbours_configs_that_fit_and_a_winner_that_holds_stops(
    tmp_path,
):
    r = tune(FakeRunner(loop32, (X,), HOLDS), tmp_path)
    assert measured(r) == [DEFAULT, *SEEDS]  # nothing else measured
    s = r.seeding
    assert s.stopped and s.verdict.rule == "holds" and s.unfit == 1
    assert s.verdict.first == cfg("scan×8") and s.verdict.second == cfg("for")
    assert [src.fingerprint for src in s.sources] == ["fp8"]
    assert r.best_config == cfg("scan×8")  # confirmed as usual
    assert r.study_name and Seeding.from_json(at.study.load_study(r.study_name, r.storage).attrs["seeding"]) == s


def test_a_seed_cheaper_here_than_the_neighbours_winner_sends_the_search_on_and_it_finds_the_best(tmp_path):
    runner = FakeRunner(
        loop32,
        (X,),
        {
            "l=scan×1": (0.1, 2 * MS),
            "l=scan×8": (0.1, 0.4 * MS),
            "l=for": (1.0, 0.3 * MS),
            "l=scan×4": (0.1, 0.3 * MS),  # 3.1 s against scan×8's 4.1: beaten beyond the margin
            "l=scan×16": (0.1, 0.1 * MS),  # no neighbour named it: the search must find it
            "*": (0.1, 3 * MS),
        },
    )
    r = tune(runner, tmp_path)
    assert measured(r)[:4] == [DEFAULT, *SEEDS] and len(r.trials) == r.space_size
    v = r.seeding.verdict
    assert not r.seeding.stopped and (v.rule, v.first, v.second) == ("beaten", cfg("scan×8"), cfg("scan×4"))
    assert v.ratio == pytest.approx(4.1 / 3.1)
    assert r.best_config == cfg("scan×16")


def test_two_configs_that_swapped_places_send_the_search_on(tmp_path):
    # The winner holds (the default is within the margin of it), but the default, which the neighbour
    # ranked far behind "for" and scan×4, is now far ahead of both.
    runner = FakeRunner(
        loop32,
        (X,),
        {
            "l=scan×1": (0.1, 0.31 * MS),  # 3.2 s
            "l=scan×8": (0.1, 0.3 * MS),  # 3.1: still the cheapest
            "l=for": (1.0, 0.3 * MS),  # 4.0
            "l=scan×4": (0.1, 0.45 * MS),  # 4.6: the widest swap
            "*": (0.1, 3 * MS),
        },
    )
    r = tune(runner, tmp_path, n_trials=6)
    v = r.seeding.verdict
    assert (v.rule, v.first, v.second) == ("swapped", cfg("scan×4"), DEFAULT) and not r.seeding.stopped
    assert v.ratio == pytest.approx(4.6 / 3.2)
    assert len(r.trials) == 6  # the ordinary search, with what the seeds left of the budget


def test_a_stopped_study_run_again_is_finished_and_neighbours_false_searches_on(tmp_path):
    costs = HOLDS
    first = tune(FakeRunner(loop32, (X,), costs), tmp_path)
    assert first.seeding.stopped and len(first.trials) == 4
    runner = FakeRunner(loop32, (X,), costs)
    again = tune(runner, tmp_path)
    assert again.finished and again.seeding == first.seeding and runner.measured == []
    on = tune(FakeRunner(loop32, (X,), costs), tmp_path, neighbours=False)
    assert on.seeding is None and len(on.trials) == on.space_size
    attrs = at.study.load_study(on.study_name, on.storage).attrs["seeding"]
    assert Seeding.from_json(attrs).verdict.rule == "searched on"


def test_without_a_neighbour_that_fits_the_study_is_not_seeded(tmp_path):
    misfit = Neighbour(
        NEIGHBOUR.signature, "fp", (Point(DEFAULT, 0.1, MS), Point(Config({"gone": {"repr": "for"}}), 0.1, MS))
    )
    r = tune(FakeRunner(loop32, (X,), {}), tmp_path, found=(misfit,), n_trials=3)
    assert r.seeding is None and len(r.trials) == 3


# ------------------------------------------------------------------------------- the rule


def seeding(*ranking: tuple[str, float], winner: str = "scan×8") -> Seeding:
    ranked = tuple((cfg(c), cost) for c, cost in ranking)
    seeds = tuple(c for c, _ in ranked if c != DEFAULT)
    return Seeding((Source("sig", "fp", 1.0, cfg(winner), ranked, seeds),), seeds)


RANKING = (("scan×8", 2.0), ("scan×4", 3.0), ("scan×1", 10.0))


def points(**cost: float) -> list[Point]:
    """Points that cost so many seconds under GOAL (runtime alone): ``scanx8=4.0``."""
    return [Point(cfg(k.replace("x", "×")), 0.0, v / GOAL.expected_calls) for k, v in cost.items()]


def test_the_rule_stops_when_the_winner_holds_within_the_margin():
    v = decide(seeding(*RANKING), points(scanx8=4.0, scanx4=4.1, scanx1=20.0), DEFAULT, GOAL, "cost")
    assert v.stopped and v.rule == "holds" and v.second == cfg("scan×4") and v.margin == MARGIN


@pytest.mark.parametrize(
    "here, rule",
    [
        ({"scanx8": 4.0, "scanx4": 3.0, "scanx1": 20.0}, "beaten"),
        ({"scanx8": 4.0, "scanx4": 30.0, "scanx1": 20.0}, "swapped"),
        ({"scanx4": 3.0, "scanx1": 20.0}, "unmeasured"),
        ({"scanx8": 3.0}, "thin"),
    ],
)
def test_the_rule_goes_on_when_the_ranking_moved_or_cannot_be_checked(here, rule):
    v = decide(seeding(*RANKING), points(**here), DEFAULT, GOAL, "cost")
    assert not v.stopped and v.rule == rule


def test_a_pareto_search_is_never_stopped_and_the_margin_is_the_defaults_spread():
    assert decide(seeding(*RANKING), points(scanx8=1.0, scanx4=2.0), DEFAULT, GOAL, "pareto").rule == "pareto"
    noisy = Point(DEFAULT, 0.0, 1 * MS, rounds=((0.0, 1 * MS), (0.0, 1.2 * MS), (0.0, 0.9 * MS)))
    assert margin(noisy, GOAL) == pytest.approx(0.3)
    assert margin(Point(DEFAULT, 0.0, 1 * MS), GOAL) == MARGIN
