"""study/_propose: which config a study measures next. Never one a trial already holds, never one
that changes a pinned site; the grid walks the space in order (the default first), random search
draws among the free configs, and a model's taken draw falls back to the nearest free config."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

import autotune as at
from autotune.program._space import Space
from autotune.study._propose import GridProposer, RandomProposer, SamplerProposer, distance, make_proposer


def two_loops(x):
    a = at.loop(lambda c, _: (jnp.sin(c), None), x, length=8, name="outer")[0]
    return at.loop(lambda c, _: (c * 0.5 + 1.0, None), a, length=3, name="inner")[0]


@pytest.fixture(scope="module")
def space() -> Space:
    return Space(at.sites(two_loops, jnp.ones(4)))


def taken(*configs: at.Config) -> set:
    """The study's "taken" set: each config in the spelling of its identity (its JSON text; the
    Config itself, which hashes, where a caller passes that)."""
    return {c.to_json() for c in configs} | set(configs)


def drain(proposer, limit: int = 1000) -> list[at.Config]:
    """Propose until the proposer has nothing left, each proposal then taken."""
    got: list[at.Config] = []
    while (c := proposer.propose(taken(*got))) is not None:
        got.append(c)
        assert len(got) <= limit, "the proposer never ran out"
    return got


def test_the_grid_starts_at_the_default_and_walks_every_config_once(space):
    got = drain(GridProposer(space))
    assert got[0] == space.default()
    assert got == list(space.configs())
    assert len(set(got)) == len(space) == 21


def test_the_grid_skips_configs_other_workers_hold(space):
    everything = list(space.configs())
    held = taken(everything[0], everything[2])
    assert GridProposer(space).propose(held) == everything[1]
    assert GridProposer(space).propose(taken(*everything)) is None


def test_random_search_is_seeded_draws_only_free_configs_and_covers_the_space(space):
    a, b = drain(RandomProposer(space, seed=3)), drain(RandomProposer(space, seed=3))
    assert a == b  # the seed fixes the order
    assert sorted(c.to_json() for c in a) == sorted(c.to_json() for c in space.configs())
    assert a != drain(RandomProposer(space, seed=4))
    held = list(space.configs())[:-1]
    assert RandomProposer(space, seed=0).propose(taken(*held)) == list(space.configs())[-1]


PROPOSERS = {"grid": lambda s: GridProposer(s), "random": lambda s: RandomProposer(s, seed=1)}


@pytest.mark.parametrize("kind", sorted(PROPOSERS))
def test_a_pinned_site_stays_at_its_default_in_every_proposal(space, kind):
    assert len({c["inner"] for c in drain(PROPOSERS[kind](space))}) == 3  # unpinned: every choice of it
    proposer = PROPOSERS[kind](space)
    proposer.pin({"inner"})
    got = drain(proposer)
    assert all(c["inner"] == space.default()["inner"] for c in got)
    assert len(got) == 7  # only "outer" varies now: one proposal per choice
    assert proposer.propose(set()) is not None and len(proposer.space) == 7


def test_distance_is_zero_for_the_same_config_and_largest_for_another_representation(space):
    configs = list(space.configs())
    d = space.default()
    assert distance(space, d, d) == 0.0
    by_unroll = next(
        c for c in configs if c["outer"].repr == "scan" and c["outer"].unroll == 2 and c["inner"] == d["inner"]
    )
    by_repr = next(c for c in configs if c["outer"].repr == "for" and c["inner"] == d["inner"])
    assert 0 < distance(space, d, by_unroll) < distance(space, d, by_repr) == 1.0
    assert distance(space, d, by_repr) == distance(space, by_repr, d)


def test_a_taken_model_draw_falls_back_to_the_nearest_free_config(space):
    proposer = SamplerProposer("tpe", None, space, None, seed=0)
    d = space.default()
    free = proposer.nearest_free(d, taken(d))
    nearest = min(distance(space, d, c) for c in space.configs() if c != d)
    assert free != d and distance(space, d, free) == nearest
    assert proposer.walks == 1
    assert proposer.nearest_free(d, taken(*space.configs())) is None
    assert proposer.walks == 1  # nothing was proposed


def test_make_proposer_names_the_samplers(space):
    assert make_proposer("grid", None, space, seed=None, budget=5).kind == "grid"
    assert make_proposer("random", None, space, seed=1, budget=5).kind == "random"
    tpe = make_proposer("tpe", None, space, seed=1, budget=5)
    assert isinstance(tpe, SamplerProposer) and tpe.kind == "tpe"


def test_a_huge_space_is_sampled_not_enumerated():
    def many(x):
        for i in range(8):
            x = at.loop(lambda c, _: (jnp.sin(c), None), x, length=8, name=f"l{i}")[0]
        return x

    big = Space(at.sites(many, jnp.ones(2)))
    assert len(big) > 20_000
    proposer = RandomProposer(big, seed=0)
    got = [proposer.propose(set()) for _ in range(5)]
    assert all(c is not None and set(c) == {f"l{i}" for i in range(8)} for c in got)
    assert len({c.to_json() for c in got}) > 1
    again = RandomProposer(big, seed=0)
    assert [again.propose(set()) for _ in range(5)] == got  # seeded


def one_long_loop(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5, None), x, length=64, name="long")[0]


@pytest.mark.parametrize("seed", range(6))
def test_tpe_measures_its_random_start_cheapest_compile_first(tmp_path, seed):
    # The same random draws, in the order of their body copies: a full unroll comes after the
    # cheap configs have lowered the budget it is pruned at (and given the predictor its trials).
    from autotune.study import _optuna
    from autotune.study._predict import copies

    space = Space(at.sites(one_long_loop, jnp.ones(4)))
    study = _optuna.Study(f"start{seed}", f"sqlite:///{tmp_path / 's.db'}", 1)
    try:
        proposer = make_proposer("tpe", study, space, seed=seed, budget=12)
        start: list[at.Config] = []
        while len(start) < _optuna.startup_trials(12):
            start.append(proposer.propose(taken(*start)))
        sizes = [sum(copies(space, c).values()) for c in start]
        assert len({c.to_json() for c in start}) == len(start) and sizes == sorted(sizes), (sizes, start)
    finally:
        study.close()
