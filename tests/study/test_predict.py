"""The compile predictor (autotune/study/_predict.py): one linear fit in body copies per XLA option set."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

import autotune as at
from autotune.program._space import Space
from autotune.study._predict import CompilePredictor, copies


def heavy(x):
    return at.loop(lambda c, _: (jnp.tanh(c @ jnp.eye(16)) + 1.0, None), x, length=12, name="heavy")[0]


def seconds(space, config, scale=1.0):
    """A compile that grows with the body copies, scaled as an XLA option set scales it."""
    return scale * (0.1 + 0.01 * sum(copies(space, config).values()))


@pytest.fixture(scope="module")
def space():
    return Space(at.sites(heavy, jnp.ones(16)))


def test_trials_under_other_xla_options_are_not_fitted_together(space):
    loops = list(space.configs())
    predictor = CompilePredictor(space)
    for c in loops[:6]:  # XLA's defaults
        predictor.observe(c, seconds(space, c))
    full = next(c for c in loops if c["heavy"].repr == "for")
    assert predictor.predict(full) == pytest.approx(seconds(space, full), rel=0.05)
    o0 = full.with_xla("xla:O0")
    assert predictor.predict(o0) is None and predictor.trials(o0) == 0  # no O0 trial yet: never skipped
    for c in loops[:6]:  # half the compile under O0: fitted on its own, the defaults' fit unchanged
        predictor.observe(c.with_xla("xla:O0"), seconds(space, c, 0.5))
    assert predictor.predict(o0) == pytest.approx(seconds(space, full, 0.5), rel=0.05)
    assert predictor.predict(full) == pytest.approx(seconds(space, full), rel=0.05)
    assert predictor.trials(o0) == predictor.trials(full) == 6


def test_a_fit_that_does_not_explain_its_trials_predicts_nothing(space):
    loops = list(space.configs())
    predictor = CompilePredictor(space)
    for i, c in enumerate(loops[:6]):
        predictor.observe(c, 1.0 if i % 2 else 0.1)  # no line through these
    assert predictor.predict(loops[0]) is None
    assert predictor.over_budget(loops[0], 0.01) is None
