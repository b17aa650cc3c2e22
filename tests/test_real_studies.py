"""The real-library studies (studies/real_*.py): loops inside flax, diffrax, blackjax, optax
and numpyro are found with readable ids, every config of a small sample gives the default's
results (and gradients), and `autotune tune FILE --trials 4` tunes each one end to end.

Each study needs the ``examples`` extra (``pip install -e '.[test,examples]'``; CI installs
it): without its library the study's tests skip and say which package to install.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autotune as at
from autotune._space import Space
from autotune.study import compare_outputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY_DIR = os.path.join(ROOT, "studies")
INSTALL = "install the examples extra: pip install -e '.[examples]' (CI does: make test EXTRAS=test,examples)"
READABLE = re.compile(r"^(scan|fori|while)@[A-Za-z0-9_.\-]+\.py:\d+(#\d+)?$")


@dataclass(frozen=True)
class Spec:
    libs: tuple[str, ...]
    kinds: tuple[str, ...]          # site kinds, in discovery order
    lengths: tuple                  # trip counts (None for a while site)
    library_site: str               # a regex one site id matches: where the library wrote its loop


SPECS = {
    "real_flax_lstm": Spec(("flax",), ("scan", "scan"), (24, 24), r"scan@axes_scan\.py:\d+"),
    "real_diffrax_ode": Spec(("diffrax", "equinox"), ("while", "while", "while"), (None, None, None),
                             r"while@checkpointed\.py:\d+"),
    "real_blackjax_hmc": Spec(("blackjax",), ("scan", "scan"), (8, 8),
                              r"scan@real_blackjax_hmc\.py:\d+/fori@trajectory\.py:\d+"),
    "real_optax_train": Spec(("optax",), ("scan", "scan"), (4, 8), r"scan@real_optax_train\.py:\d+/fori@real_optax_train\.py:\d+"),
    "real_numpyro_ar": Spec(("numpyro",), ("scan", "scan"), (32, 32), r"scan@scan\.py:\d+#2"),
}
NAMES = sorted(SPECS)


def test_every_real_study_has_a_spec():
    files = {f[:-3] for f in os.listdir(STUDY_DIR) if f.startswith("real_") and f.endswith(".py")}
    assert files == set(SPECS) and len(files) >= 4


def test_bench_real_set_is_every_real_study():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import bench

    assert set(bench.REAL_STUDIES) == set(SPECS)
    assert all(set(bench.REAL_STUDIES[n]) == set(SPECS[n].libs) for n in SPECS)
    assert bench.study_set("real", quick=False) == list(bench.REAL_STUDIES)
    assert bench.study_set("default", quick=False) == bench.STUDIES  # the default set is unchanged
    assert set(bench.study_set("all", quick=True)) == set(bench.QUICK_STUDIES) | set(bench.QUICK_REAL_STUDIES)


def test_bench_labels_tell_nested_library_loops_apart():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import bench

    # diffrax: two loops nested in Equinox's while loop, all written on checkpointed.py:271.
    ids = ["while@checkpointed.py:271", "while@checkpointed.py:271/while@checkpointed.py:271",
           "while@checkpointed.py:271/while@checkpointed.py:271#2"]
    names = bench.short_names(ids)
    assert list(names.values()) == ["while@271", "while@271/while@271", "while@271#2"]
    config = {ids[0]: {"repr": "while", "unroll": 4, "guard": "cond"}, ids[1]: {"repr": "while", "unroll": 1},
              ids[2]: {"repr": "while", "unroll": 2, "guard": "select"}}
    assert bench.label(config, ids) == "while@271=while-u4/cond, while@271/while@271=while-u1, while@271#2=while-u2/select"
    assert bench.short_names(["scan@a.py:3", "scan@a.py:3/fori@b.py:9"]) == {"scan@a.py:3": "scan@3",
                                                                              "scan@a.py:3/fori@b.py:9": "fori@9"}


@functools.lru_cache(maxsize=None)
def _load(name: str):
    from autotune._studyfile import load_examples

    [ex] = load_examples(os.path.join(STUDY_DIR, f"{name}.py"))
    return ex


def study(name: str):
    """The study's one example, or a skip naming the missing library."""
    for lib in SPECS[name].libs:
        pytest.importorskip(lib, reason=f"studies/{name}.py needs {lib}: {INSTALL}")
    return _load(name)


def run(ex, config):
    out = jax.jit(at.with_config(ex.fn.fun, config), **ex.fn.jit_kwargs)(*ex.args, **ex.kwargs)
    return jax.block_until_ready(out)


@functools.lru_cache(maxsize=None)
def default_outputs(name: str):
    ex = _load(name)
    return run(ex, Space(ex.fn.sites(*ex.args, **ex.kwargs)).default())


def sample_configs(space: Space) -> list[at.Config]:
    """Two configs that move every site off its default: (a) every loop unrolled by 2 (while:
    guarded by select); (b) the last scan site fully unrolled, other scans at their largest
    factor, while sites alternating ``while×4`` with cond and ``while×8`` with select."""
    a, b = {}, {}
    scans = [e for e in space.entries if e.site.kind != "while"]
    for i, e in enumerate(space.entries):
        if e.site.kind == "while":
            a[e.site.id] = {"repr": "while", "unroll": 2, "guard": "select"}
            b[e.site.id] = ({"repr": "while", "unroll": 4, "guard": "cond"} if i % 2 == 0 else
                            {"repr": "while", "unroll": 8, "guard": "select"})
        else:
            a[e.site.id] = {"repr": "scan", "unroll": 2}
            b[e.site.id] = {"repr": "for"} if e is scans[-1] else {"repr": "scan", "unroll": max(e.unrolls)}
    configs = [at.Config.from_dict(a), at.Config.from_dict(b)]
    for c in configs:
        assert c in set(space.configs()), f"{c} is not a config of the space"
    return configs


@pytest.mark.parametrize("name", NAMES)
def test_sites_found_with_readable_ids(name):
    ex, spec = study(name), SPECS[name]
    sites = ex.fn.sites(*ex.args, **ex.kwargs)
    assert [s.kind for s in sites] == list(spec.kinds), sites
    assert [s.length for s in sites] == list(spec.lengths)
    assert [s.id for s in sites] == [s.id for s in at.sites(ex.fn.fun, *ex.args, **ex.kwargs)]
    for s in sites:
        assert "?" not in s.id and s.source and "?" not in s.source, s
        for part in s.id.split("/"):
            assert READABLE.match(part), f"unreadable id part {part!r} in {s.id!r}"
        if s.parent is not None:
            assert s.id.startswith(s.parent + "/") and s.depth == s.parent.count("/") + 1
    assert any(re.fullmatch(spec.library_site, s.id) for s in sites), [s.id for s in sites]
    assert len({s.id for s in sites}) == len(sites)
    assert len(Space(sites)) >= 8


@pytest.mark.parametrize("name", NAMES)
def test_sample_configs_match_the_default(name):
    ex = study(name)
    space = Space(ex.fn.sites(*ex.args, **ex.kwargs))
    reference = default_outputs(name)
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
    raise AssertionError(f"no grad case for {name}")


@pytest.mark.parametrize("name", ["real_flax_lstm", "real_diffrax_ode"])
def test_grad_matches_the_default(name):
    # Reverse mode through the loops: flax's scans, and diffrax's checkpointed while loop (its
    # custom_vjp). The numpyro and optax studies take value_and_grad inside the tuned function
    # already (numpyro's backward scan is a site of its own), and a sampler's draws (blackjax)
    # are not differentiated in practice.
    ex = study(name)
    space = Space(ex.fn.sites(*ex.args, **ex.kwargs))
    scalar, arg = _grad_case(name, ex)
    grads = [jax.block_until_ready(jax.jit(jax.grad(scalar(at.with_config(ex.fn.fun, c))))(arg))
             for c in (space.default(), sample_configs(space)[0])]
    leaves = jax.tree_util.tree_leaves(grads[0])
    assert leaves and all(np.all(np.isfinite(np.asarray(x))) and np.any(np.asarray(x) != 0) for x in leaves)
    assert compare_outputs(grads[0], grads[1]) is None, compare_outputs(grads[0], grads[1])


def test_numpyro_grad_scan_is_derived():
    ex = study("real_numpyro_ar")
    fwd, bwd = ex.fn.sites(*ex.args, **ex.kwargs)
    assert not fwd.derived and bwd.derived and bwd.id == fwd.id + "#2"


CLI_CALLS = 10


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_cli_tunes_the_study(name, tmp_path):
    ex = study(name)
    cache = str(tmp_path / "cache.db")
    # Tuned for few calls, compile time dominates the cost, so a config that compiles much longer
    # than the default is stopped early (the compile budget): the run stays CI-sized.
    cmd = [sys.executable, "-m", "autotune", "tune", os.path.join(STUDY_DIR, f"{name}.py"), "--trials", "4",
           "--expected-calls", str(CLI_CALLS), "--run-seconds", "0.05", "--cache", cache,
           "--storage", str(tmp_path / "studies.db"), "--json"]
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=420, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    [result] = json.loads(proc.stdout)
    assert result["function"] == ex.fn.key == f"{name}:{ex.fn.__name__}"
    # --trials counts measurements: a config skipped on its predicted compile time is not one.
    states = [t["state"] for t in result["trials"] if t["predicted_compile_s"] is None]
    assert len(states) == 4 and states[0] == "complete", result["trials"]
    # A config whose results differ from the default's, or that fails, would be a rewrite bug.
    bad = [(t["state"], t["reason"]) for t in result["trials"] if t["state"] in ("rejected", "error", "crashed")]
    assert not bad, bad
    assert "measuring in-process" not in proc.stderr, "study-file trials run isolated in the worker"
    # This process finds the entry the CLI stored: same key, fingerprint and signature.
    lookup = ex.fn.with_options(cache=cache, expected_calls=CLI_CALLS).config_for(*ex.args, **ex.kwargs)
    [stored] = at.Cache(cache).entries(ex.fn.key)
    assert lookup.source == "cache", (lookup, stored.fingerprint)
    assert lookup.config == at.Config.from_dict(result["best_config"])


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
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", __file__,
                           "-k", "sites_found and numpyro"], capture_output=True, text=True, env=env, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 skipped" in proc.stdout and "studies/real_numpyro_ar.py needs numpyro" in proc.stdout, proc.stdout
    assert "pip install -e '.[examples]'" in proc.stdout
    cli = subprocess.run([sys.executable, "-m", "autotune", "sites", os.path.join(STUDY_DIR, "real_numpyro_ar.py")],
                         capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert cli.returncode != 0
    # (The CLI prints errors as rich markup, which eats "[examples]": the words say it too.)
    assert "needs numpyro" in cli.stderr and "from the examples extra: pip install" in cli.stderr, cli.stderr
    assert "Traceback" not in cli.stderr
    bench = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench.py"), "--studies", "real", "--quiet"],
                           capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert bench.returncode != 0
    assert "studies/real_numpyro_ar.py needs numpyro" in bench.stderr and ".[examples]" in bench.stderr, bench.stderr
