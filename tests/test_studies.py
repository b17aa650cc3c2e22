"""Every study file loads, has examples, its loop sites are found, and its default config runs."""

import glob
import os

import jax
import numpy as np
import pytest
from _repo import ROOT

import autotune as at
from autotune.program._space import Space
from autotune.record._studyfile import load_examples, load_module

# studies/real_*.py need the examples extra (third-party libraries): tests/test_real_studies.py
# checks them, and skips with the reason where a library is missing.
STUDY_FILES = sorted(
    p for p in glob.glob(os.path.join(ROOT, "studies", "*.py")) if not os.path.basename(p).startswith("real_")
)


def test_there_are_studies():
    names = {os.path.basename(p)[:-3] for p in STUDY_FILES}
    assert len(names) >= 8, names
    assert {"gru_encoder", "ode_rk4", "rl_cartpole", "scan_layers", "hmc", "lambda_returns", "kalman"} <= names


@pytest.mark.parametrize("path", STUDY_FILES, ids=lambda p: os.path.basename(p)[:-3])
@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_study_loads_finds_sites_and_runs_default(path):
    module = load_module(path)
    assert (module.__doc__ or "").strip(), "a study says where its pattern comes from in its docstring"
    examples = load_examples(path)
    assert examples
    for ex in examples:
        ctl = getattr(ex.fn, "autotune", ex.fn)
        assert ctl.expected_calls >= 1
        sites = ctl.sites(*ex.args, **ex.kwargs)
        assert sites, "a study has loop sites to tune"
        assert [s.id for s in sites] == [s.id for s in at.sites(ctl.fun, *ex.args, **ex.kwargs)]
        space = Space(sites)
        assert 2 <= len(space) <= 64, f"space of {len(space)} configs: keep study spaces moderate"
        # The default config runs (no tuning, no cache): jit of the rewritten function.
        out = jax.jit(at.with_config(ctl.fun, space.default()), **ctl.jit_kwargs)(*ex.args, **ex.kwargs)
        leaves = jax.tree_util.tree_leaves(jax.block_until_ready(out))
        assert leaves and all(np.all(np.isfinite(np.asarray(x))) for x in leaves)
