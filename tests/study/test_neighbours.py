"""study/_neighbours: how far two signatures are, which of a neighbour's configs fit a new program
(and as what), the plan of seeds (nearest neighbours first, each one's best configs under the new
objective), and the seeding's JSON and line. Real programs' spaces; no measurement."""

from __future__ import annotations

import math

import jax.numpy as jnp
import pytest

import autotune as at
from autotune.program._config import Config
from autotune.program._keys import signature
from autotune.program._space import Space
from autotune.select import Point
from autotune.select._objective import Objective
from autotune.study._neighbours import Neighbour, Seeding, Verdict, distance, fit, plan


def loop32(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=32, name="l")[0]


def loop31(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=31, name="l")[0]


def two_loops(x):
    x = at.loop(lambda c, _: (c * 0.5, None), x, length=8, name="a")[0]
    return at.loop(lambda c, _: (c + 1.0, None), x, length=8, name="b")[0]


def space_of(fn, n: int = 4) -> Space:
    return Space(at.sites(fn, jnp.ones(n)))


def cfg(**choices: str) -> Config:
    return Config({k: at.SiteChoice.parse(v) for k, v in choices.items()})


SIG = signature((jnp.ones(4),))


def sig(n: int) -> str:
    return signature((jnp.ones(n),))


# ------------------------------------------------------------------------------- distance


def test_distance_counts_the_most_doublings_of_any_argument():
    assert distance(sig(4), sig(4)) == 0.0
    assert distance(sig(4), sig(8)) == distance(sig(8), sig(4)) == 1.0
    assert distance(sig(4), sig(64)) == 4.0
    both = signature((jnp.ones((4, 8)), jnp.ones(4)))
    assert distance(both, signature((jnp.ones((8, 16)), jnp.ones(8)))) == 2.0  # the matrix doubled twice
    assert distance(signature((jnp.ones(4), 3)), signature((jnp.ones(4), 12))) == 2.0  # a static number
    assert distance(sig(4), signature((jnp.ones(4, jnp.int32),))) == 1.0  # another dtype
    assert math.isinf(distance(sig(4), signature((jnp.ones(4), jnp.ones(4)))))  # another tree


# ------------------------------------------------------------------------------- fit


def test_a_config_the_site_offers_fits_as_it_is_and_fills_the_other_sites_with_their_default():
    space = space_of(two_loops)
    got = fit(cfg(a="scan×4"), space)
    assert got == cfg(a="scan×4", b="scan×1") and got.to_json() == cfg(a="scan×4", b="scan×1").to_json()


def test_an_unroll_a_shorter_loop_does_not_offer_becomes_the_nearest_one_it_does():
    space = space_of(loop31)  # unrolls 1, 2, 5, 10, 15
    assert fit(cfg(l="scan×4"), space) == cfg(l="scan×5")
    assert fit(cfg(l="scan×16"), space) == cfg(l="scan×15")
    assert fit(cfg(l="fori×8"), space) == cfg(l="fori×10")
    assert fit(cfg(l="for"), space) == cfg(l="for")


def test_a_config_naming_a_site_the_program_lacks_does_not_fit():
    space = space_of(loop32)
    assert fit(cfg(l="scan×4", gone="scan×2"), space) is None
    assert fit(Config({"l": {"repr": "while"}}), space) is None  # a representation the site does not offer


def test_xla_options_the_study_does_not_search_are_left_out():
    space = space_of(loop32)
    got = fit(cfg(l="scan×4").with_xla("xla:O1"), space)
    assert got == cfg(l="scan×4") and not got.xla


# ------------------------------------------------------------------------------- plan


def neighbour(n: int, *points: tuple[Config, float, float], default: Config | None = None) -> Neighbour:
    """A neighbour at ``float32[n]``: ``(config, compile_s, run_s)`` per confirmed point."""
    pts = tuple(Point(c, compile_s, run_s) for c, compile_s, run_s in points)
    return Neighbour(sig(n), f"fp{n}", pts, default if default is not None else cfg(l="scan×1"))


GOAL = Objective(expected_calls=1e4)
MS = 1e-3


def test_the_seeds_are_a_neighbours_best_configs_for_the_new_objective_the_default_left_out():
    n = neighbour(
        8,
        (cfg(l="scan×1"), 0.1, 1 * MS),  # 10.1
        (cfg(l="scan×8"), 0.1, 0.2 * MS),  # 2.1
        (cfg(l="for"), 1.0, 0.15 * MS),  # 2.5
        (cfg(l="scan×4"), 0.1, 0.4 * MS),  # 4.1
        (cfg(l="scan×2"), 0.1, 0.6 * MS),  # 6.1: fourth, not seeded
    )
    s = plan([n], space_of(loop32), GOAL, SIG, limit=31)
    assert s.seeds == (cfg(l="scan×8"), cfg(l="for"), cfg(l="scan×4"))
    (src,) = s.sources
    assert src.winner == cfg(l="scan×8") and src.distance == 1.0
    assert [c for c, _ in src.ranking] == [cfg(l=x) for x in ("scan×8", "for", "scan×4", "scan×2", "scan×1")]
    assert src.ranking[0][1] == pytest.approx(2.1)
    # Re-picked for ten calls, the compile decides: "for" (a second's compile) is no seed any more.
    few = plan([n], space_of(loop32), Objective(expected_calls=10), SIG, limit=31)
    assert few.seeds == (cfg(l="scan×8"), cfg(l="scan×4"), cfg(l="scan×2"))


def test_the_nearest_neighbour_seeds_first_and_configs_that_do_not_fit_are_counted():
    far = neighbour(64, (cfg(l="scan×1"), 0.1, 1 * MS), (cfg(l="scan×16"), 0.1, 0.1 * MS))
    near = neighbour(
        2,
        (cfg(l="scan×1"), 0.1, 1 * MS),
        (cfg(l="scan×2"), 0.1, 0.5 * MS),
        (Config({"l": {"repr": "scan", "unroll": 2}, "gone": {"repr": "for"}}), 0.1, 0.1 * MS),
    )
    s = plan([near, far], space_of(loop32), GOAL, SIG, limit=31)
    assert [src.signature for src in s.sources] == [sig(2), sig(64)]
    assert s.seeds == (cfg(l="scan×2"), cfg(l="scan×16")) and s.unfit == 1
    assert plan([near, far], space_of(loop32), GOAL, SIG, limit=1).seeds == (cfg(l="scan×2"),)


def test_no_plan_without_a_neighbour_config_that_fits_besides_the_default():
    only_default = neighbour(8, (cfg(l="scan×1"), 0.1, 1 * MS))
    misfits = neighbour(8, (cfg(l="scan×1"), 0.1, 1 * MS), (cfg(gone="for"), 0.1, 0.1 * MS))
    assert plan([], space_of(loop32), GOAL, SIG, 31) is None
    assert plan([only_default, misfits], space_of(loop32), GOAL, SIG, 31) is None
    assert plan([misfits], space_of(loop32), GOAL, SIG, limit=0) is None


def test_a_seeding_survives_its_json_and_says_what_came_of_it():
    n = neighbour(8, (cfg(l="scan×1"), 0.1, 1 * MS), (cfg(l="scan×8"), 0.1, 0.2 * MS))
    s = plan([n], space_of(loop32), GOAL, SIG, limit=31)
    assert Seeding.from_json(s.to_json()) == s and not s.stopped
    assert s.line().endswith("not decided yet")
    done = s.decided(Verdict(True, "holds", cfg(l="scan×8"), cfg(l="scan×1"), 4.8, 0.05))
    again = Seeding.from_json(done.to_json())
    assert again == done and again.stopped
    line = again.line(lambda c: c["l"].__str__())
    assert line.startswith("neighbours: 1 config of 1 tuned signature (the nearest 1 doubling away)")
    assert "stopped after them: the neighbour's winner scan×8 holds here (scan×1 costs 4.80× as much)" in line
    assert done.to_json(str)["why"] == done.verdict.text(str)
    assert Seeding.from_json(None) is None
