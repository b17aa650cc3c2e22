"""program/_staged: the loop configs, then each XLA choice on the best few only; its size is
known before the loop stage is measured, its XLA stage's configs once it is."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

import autotune as at
from autotune.program._space import Space
from autotune.program._staged import StagedSpace
from autotune.program._xla import CATALOG, choices

XLA = choices([o for o in CATALOG if o.name in ("O0", "O1", "nollvm")])  # default, O0, O1, nollvm, O0+nollvm, O1+nollvm


def two_loops(x):
    a = at.loop(lambda c, _: (jnp.sin(c), None), x, length=8, name="outer")[0]
    return at.loop(lambda c, _: (c * 0.5 + 1.0, None), a, length=3, name="inner")[0]


@pytest.fixture(scope="module")
def sites():
    return at.sites(two_loops, jnp.ones(4))


def test_the_size_is_the_loop_configs_and_the_choices_on_the_best_few(sites):
    loops, product = Space(sites), Space(sites, xla=XLA)
    staged = StagedSpace(sites, xla=XLA, top=3)
    assert len(XLA) == 6 and len(loops) > 3
    assert len(staged) == len(loops) + 3 * 5 < len(product) == staged.product_size() == 6 * len(loops)
    assert len(staged.loops()) == len(loops) and not staged.loops().xla
    # As many best loop configs as there are loop configs: the stages span the product.
    assert len(StagedSpace(sites, xla=XLA, top=len(loops))) == len(product)
    assert len(StagedSpace(sites, xla=XLA[:1], top=3)) == len(loops)  # no option offered: the loops alone


def test_the_xla_stage_is_every_choice_on_the_ranked_configs_best_first(sites):
    staged = StagedSpace(sites, xla=XLA, top=2)
    ranked = list(Space(sites).configs())[::-1]  # any order a measurement gives
    stage = staged.stage(ranked)
    assert stage == [c.with_xla(x) for c in ranked[:2] for x in XLA[1:]]
    assert all(c.xla for c in stage) and len(set(stage)) == len(stage) == 2 * 5
    configs = list(staged.configs(ranked))
    assert configs[: len(Space(sites))] == list(Space(sites).configs())  # the loop stage first, the default first
    assert configs[len(Space(sites)) :] == stage and len(configs) == len(staged)
    assert len(list(staged.configs())) == len(staged)  # unranked: the first loop configs stand in


def test_its_configs_are_configs_of_the_product(sites):
    staged, product = StagedSpace(sites, xla=XLA, top=3), Space(sites, xla=XLA)
    assert set(staged.configs()) <= set(product.configs())
    assert staged.param_choices() == product.param_choices()
    for c in staged.configs():
        assert staged.from_params(staged.to_params(c)) == c


def test_pinning_keeps_the_stages(sites):
    staged = StagedSpace(sites, xla=XLA, top=3)
    outer = next(s.id for s in Space(sites).sites if s.name == "outer")
    pinned = staged.pinned([outer])
    assert isinstance(pinned, StagedSpace) and pinned.top == 3 and pinned.xla == staged.xla
    assert len(pinned.loops()) == len(Space(sites).pinned([outer]))
    assert len(pinned) == len(pinned.loops()) + 3 * 5
