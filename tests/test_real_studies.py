"""The real-library studies (studies/real_*.py): loops inside flax, diffrax, blackjax, optax,
numpyro, equinox and optimistix are found with readable ids, and every config of a small sample
gives the default's results (and gradients). `autotune tune FILE --trials 2` tunes each one end
to end in tests/test_real_studies_tune_nn.py and test_real_studies_tune_sci.py; the studies on
an 8-device mesh are tested in test_real_studies_mesh.py. What each study holds: tests/_real.py.

Each library study needs the ``examples`` extra (``pip install -e '.[test,examples]'``; CI
installs it): without its library the study's tests skip and say which package to install.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _real import (
    CASES,
    MESH,
    NAMES,
    READABLE,
    SPECS,
    STUDY_DIR,
    TUNE_NN,
    TUNE_SCI,
    default_outputs,
    run,
    sample_configs,
    site_spec,
    study,
)
from _repo import ROOT, repo_env

import autotune as at
from autotune.program._space import Space
from autotune.study import compare_outputs


def test_every_real_study_has_a_spec():
    files = {f[:-3] for f in os.listdir(STUDY_DIR) if f.startswith("real_") and f.endswith(".py")}
    assert files == set(SPECS) and len(files) >= 4
    # Every study is tuned end to end by one of the `autotune tune` files, once.
    assert sorted(TUNE_NN + TUNE_SCI + MESH) == NAMES


def test_bench_real_set_is_every_real_study():
    from benchmarks import _studies, bench

    assert set(_studies.REAL_STUDIES) == set(SPECS)
    assert all(set(_studies.REAL_STUDIES[n]) == set(SPECS[n].libs) for n in SPECS)
    # Read from the file, before JAX starts: which studies the bench runs in a process of their own.
    assert {n: bench.host_devices(n) for n in SPECS} == {n: SPECS[n].devices for n in SPECS}
    assert _studies.study_set("real", quick=False) == list(_studies.REAL_STUDIES)
    assert _studies.study_set("default", quick=False) == _studies.STUDIES  # the default set is unchanged
    assert set(_studies.study_set("all", quick=True)) == set(_studies.QUICK_STUDIES) | set(_studies.QUICK_REAL_STUDIES)


def test_bench_labels_tell_nested_library_loops_apart():
    from benchmarks import _studies

    # diffrax: two loops nested in Equinox's while loop, all written on one line: the bench names
    # them as the CLI does (s1, s2, s3) and writes each choice in the package's notation.
    sites = [
        {"id": "while@checkpointed.py:271", "kind": "while"},
        {"id": "while@checkpointed.py:271/while@checkpointed.py:271", "kind": "while"},
        {"id": "while@checkpointed.py:271/while@checkpointed.py:271#2", "kind": "while"},
    ]
    names = _studies.site_names(sites)
    assert len(set(names.values())) == 3
    config = {
        sites[0]["id"]: {"repr": "while", "unroll": 4, "guard": "cond"},
        sites[1]["id"]: {"repr": "while", "unroll": 1},
        sites[2]["id"]: {"repr": "while", "unroll": 2, "guard": "select"},
    }
    text = _studies.label(config, sites)
    assert "×4" in text and "×2" in text and "-u" not in text, text
    assert all(name in text for name in names.values()), (names, text)


@pytest.mark.parametrize("name,index", CASES)
def test_sites_found_with_readable_ids(name, index):
    ex, spec = study(name, index), SPECS[name]
    kinds, lengths = site_spec(name, index)
    sites = ex.fn.sites(*ex.args, **ex.kwargs)
    assert [s.kind for s in sites] == list(kinds), sites
    assert [s.length for s in sites] == list(lengths)
    assert [s.id for s in sites] == [s.id for s in at.sites(ex.fn.fun, *ex.args, **ex.kwargs)]
    for s in sites:
        assert "?" not in s.id and s.source and "?" not in s.source, s
        for part in s.id.split("/"):
            assert READABLE.match(part), f"unreadable id part {part!r} in {s.id!r}"
        if s.parent is not None:
            assert s.id.startswith(s.parent + "/") and s.depth == s.parent.count("/") + 1
    assert any(re.fullmatch(spec.library_site, s.id) for s in sites), [s.id for s in sites]
    if spec.library_line is not None:  # the library's own line stays known (`autotune sites --wide`)
        assert any(re.fullmatch(spec.library_line, s.library_source or "") for s in sites), sites
    assert len({s.id for s in sites}) == len(sites)
    assert len(Space(sites)) >= 4  # something to choose besides the default


@pytest.mark.parametrize("name,index", CASES)
def test_sample_configs_match_the_default(name, index):
    ex = study(name, index)
    space = Space(ex.fn.sites(*ex.args, **ex.kwargs))
    reference = default_outputs(name, index)
    leaves = jax.tree_util.tree_leaves(reference)
    assert leaves and all(np.all(np.isfinite(np.asarray(x))) for x in leaves)
    for config in sample_configs(space):
        out = run(ex, config)
        assert compare_outputs(reference, out) is None, f"{config}: {compare_outputs(reference, out)}"


def _grad_case(name: str, ex):
    """A scalar of the study function's outputs, and the argument to differentiate."""
    if name == "real_flax_lstm":
        params, xs = ex.args
        return (lambda f: lambda p: jnp.mean(f(p, xs) ** 2)), params
    if name == "real_diffrax_ode":
        y0s, rates = ex.args
        return (lambda f: lambda r: jnp.sum(f(y0s, r) ** 2)), rates
    if name == "real_optimistix_newton":  # implicit differentiation of a rewritten loop (custom_jvp)
        params, xs = ex.args
        return (lambda f: lambda p: jnp.sum(f(p, xs) ** 2)), params
    raise AssertionError(f"no grad case for {name}")


@pytest.mark.parametrize("name", ["real_flax_lstm", "real_diffrax_ode", "real_optimistix_newton"])
def test_grad_matches_the_default(name):
    # Reverse mode through the loops: flax's scans, and diffrax's checkpointed while loop (its
    # custom_vjp). The numpyro and optax studies take value_and_grad inside the tuned function
    # already (numpyro's backward scan is a site of its own), and a sampler's draws (blackjax)
    # are not differentiated in practice.
    ex = study(name)
    space = Space(ex.fn.sites(*ex.args, **ex.kwargs))
    scalar, arg = _grad_case(name, ex)
    grads = [
        jax.block_until_ready(jax.jit(jax.grad(scalar(at.with_config(ex.fn.fun, c))))(arg))
        for c in (space.default(), sample_configs(space)[0])
    ]
    leaves = jax.tree_util.tree_leaves(grads[0])
    assert leaves and all(np.all(np.isfinite(np.asarray(x))) and np.any(np.asarray(x) != 0) for x in leaves)
    assert compare_outputs(grads[0], grads[1]) is None, compare_outputs(grads[0], grads[1])


def test_numpyro_grad_scan_is_derived():
    ex = study("real_numpyro_ar")
    fwd, bwd = ex.fn.sites(*ex.args, **ex.kwargs)
    assert not fwd.derived and bwd.derived and bwd.id == fwd.id + "#2"


def test_host_devices_is_read_without_importing_the_file(tmp_path):
    from autotune._errors import StudyError
    from autotune.record._studyfile import host_devices

    path = tmp_path / "mesh.py"
    path.write_text("raise RuntimeError('imported')\nHOST_DEVICES: int = 4\n")
    assert host_devices(str(path)) == 4
    path.write_text("import jax\n")
    assert host_devices(str(path)) == 1
    for bad in ("'8'", "0", "2 * 4", "True"):
        path.write_text(f"HOST_DEVICES = {bad}\n")
        with pytest.raises(StudyError, match="HOST_DEVICES must be a whole number written as a literal"):
            host_devices(str(path))


HIDE = """
import sys


class _Hide:
    # Makes the listed top-level packages look uninstalled.
    names = {names!r}

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _Hide())
"""


def test_without_the_library_the_study_skips_and_bench_says_what_to_install(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(HIDE.format(names={"numpyro"}))
    env = repo_env(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            __file__,
            "-k",
            "sites_found and numpyro",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 skipped" in proc.stdout and "studies/real_numpyro_ar.py needs numpyro" in proc.stdout, proc.stdout
    assert "pip install -e '.[examples]'" in proc.stdout
    cli = subprocess.run(
        [sys.executable, "-m", "autotune", "sites", os.path.join(STUDY_DIR, "real_numpyro_ar.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert cli.returncode != 0
    # (The CLI prints errors as rich markup, which eats "[examples]": the words say it too.)
    assert "needs numpyro" in cli.stderr and "from the examples extra: pip install" in cli.stderr, cli.stderr
    assert "Traceback" not in cli.stderr
    bench = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench", "--studies", "real", "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert bench.returncode != 0
    assert "studies/real_numpyro_ar.py needs numpyro" in bench.stderr and ".[examples]" in bench.stderr, bench.stderr
