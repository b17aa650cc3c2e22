"""The real-library studies (studies/real_*.py): loops inside flax, diffrax, blackjax, optax,
numpyro, equinox and optimistix, and on an 8-device mesh (NamedSharding, shard_map), are found
with readable ids, every config of a small sample gives the default's results (and gradients),
and `autotune tune FILE --trials 3` tunes each one end to end.

Each library study needs the ``examples`` extra (``pip install -e '.[test,examples]'``; CI
installs it): without its library the study's tests skip and say which package to install.
The mesh studies (``HOST_DEVICES = 8``) run in processes of their own (tests/_mesh.py).
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
from _mesh import mesh_process
from _repo import ROOT, repo_env

import autotune as at
from autotune._space import Space
from autotune.study import compare_outputs

STUDY_DIR = os.path.join(ROOT, "studies")
INSTALL = "install the examples extra: pip install -e '.[examples]' (CI does: make test EXTRAS=test,examples)"
READABLE = re.compile(r"^(scan|fori|while)@[A-Za-z0-9_.\-]+\.py:\d+(#\d+)?$")


@dataclass(frozen=True)
class Spec:
    libs: tuple[str, ...]
    kinds: tuple[str, ...]  # site kinds, in discovery order
    lengths: tuple  # trip counts (None for a while site)
    library_site: str  # a regex one site id matches: the user's line that runs a library's loop
    library_line: str | None = None  # a regex one site's library_source matches: where the library wrote it
    devices: int = 1  # HOST_DEVICES: > 1 runs in a process of its own (tested in subprocesses)
    more: tuple = ()  # (kinds, lengths) of examples()[1:], when the study has several


SPECS = {
    "real_flax_lstm": Spec(
        ("flax",), ("scan", "scan"), (24, 24), r"scan@real_flax_lstm\.py:\d+", r"flax/core/axes_scan\.py:\d+"
    ),
    "real_diffrax_ode": Spec(
        ("diffrax", "equinox"),
        ("while", "while", "while"),
        (None, None, None),
        r"while@real_diffrax_ode\.py:\d+",
        r"equinox/internal/_loop/checkpointed\.py:\d+",
    ),
    "real_blackjax_hmc": Spec(
        ("blackjax",),
        ("scan", "scan"),
        (8, 8),
        r"scan@real_blackjax_hmc\.py:\d+/fori@real_blackjax_hmc\.py:\d+",
        r"blackjax/mcmc/trajectory\.py:\d+",
    ),
    "real_optax_train": Spec(
        ("optax",), ("scan", "scan"), (4, 8), r"scan@real_optax_train\.py:\d+/fori@real_optax_train\.py:\d+"
    ),
    "real_numpyro_ar": Spec(
        ("numpyro",),
        ("scan", "scan"),
        (32, 32),
        r"scan@real_numpyro_ar\.py:\d+#2",
        r"numpyro/contrib/control_flow/scan\.py:\d+",
    ),
    # MaxText's nn.scan(nn.remat(Block)) under value_and_grad: the forward scan and its backward.
    "real_flax_transformer": Spec(
        ("flax",), ("scan", "scan"), (4, 4), r"scan@real_flax_transformer\.py:\d+", r"flax/core/axes_scan\.py:\d+"
    ),
    # filter_vmap-stacked layers in a lax.scan: a gradient (function), then predict (eqx.Module method).
    "real_equinox_stack": Spec(
        ("equinox",), ("scan", "scan"), (8, 8), r"scan@real_equinox_stack\.py:\d+", more=((("scan",), (8,)),)
    ),
    "real_optimistix_newton": Spec(
        ("optimistix", "lineax"),
        ("while",),
        (None,),
        r"while@real_optimistix_newton\.py:\d+",
        r"equinox/internal/_loop/loop\.py:\d+",
    ),
    # A jitted step on 8 devices, batch sharded over "data"; the same RNN written with shard_map.
    "real_sharded_train": Spec((), ("scan", "scan"), (16, 16), r"scan@real_sharded_train\.py:\d+#2", devices=8),
    "real_shard_map": Spec((), ("scan", "scan"), (16, 16), r"scan@real_shard_map\.py:\d+#2", devices=8),
}
NAMES = sorted(SPECS)
LOCAL = [n for n in NAMES if SPECS[n].devices == 1]  # tested in this process
MESH = [n for n in NAMES if SPECS[n].devices > 1]  # tested in processes started with their devices
CASES = [(n, i) for n in LOCAL for i in range(1 + len(SPECS[n].more))]


def site_spec(name: str, index: int = 0) -> tuple[tuple, tuple]:
    """The site kinds and lengths of a study's examples()[index]."""
    spec = SPECS[name]
    return (spec.kinds, spec.lengths) if index == 0 else spec.more[index - 1]


def test_every_real_study_has_a_spec():
    files = {f[:-3] for f in os.listdir(STUDY_DIR) if f.startswith("real_") and f.endswith(".py")}
    assert files == set(SPECS) and len(files) >= 4


def test_bench_real_set_is_every_real_study():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import bench

    assert set(bench.REAL_STUDIES) == set(SPECS)
    assert all(set(bench.REAL_STUDIES[n]) == set(SPECS[n].libs) for n in SPECS)
    # Read from the file, before JAX starts: which studies the bench runs in a process of their own.
    assert {n: bench.host_devices(n) for n in SPECS} == {n: SPECS[n].devices for n in SPECS}
    assert bench.study_set("real", quick=False) == list(bench.REAL_STUDIES)
    assert bench.study_set("default", quick=False) == bench.STUDIES  # the default set is unchanged
    assert set(bench.study_set("all", quick=True)) == set(bench.QUICK_STUDIES) | set(bench.QUICK_REAL_STUDIES)


def test_bench_labels_tell_nested_library_loops_apart():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import bench

    # diffrax: two loops nested in Equinox's while loop, all written on checkpointed.py:271.
    ids = [
        "while@checkpointed.py:271",
        "while@checkpointed.py:271/while@checkpointed.py:271",
        "while@checkpointed.py:271/while@checkpointed.py:271#2",
    ]
    names = bench.short_names(ids)
    assert list(names.values()) == ["while@271", "while@271/while@271", "while@271#2"]
    config = {
        ids[0]: {"repr": "while", "unroll": 4, "guard": "cond"},
        ids[1]: {"repr": "while", "unroll": 1},
        ids[2]: {"repr": "while", "unroll": 2, "guard": "select"},
    }
    assert (
        bench.label(config, ids) == "while@271=while-u4/cond, while@271/while@271=while-u1, while@271#2=while-u2/select"
    )
    assert bench.short_names(["scan@a.py:3", "scan@a.py:3/fori@b.py:9"]) == {
        "scan@a.py:3": "scan@3",
        "scan@a.py:3/fori@b.py:9": "fori@9",
    }


@functools.cache
def _load(name: str, index: int = 0):
    from autotune._studyfile import load_examples

    assert SPECS[name].devices == 1, f"{name} needs {SPECS[name].devices} devices: test it in a process of its own"
    examples = load_examples(os.path.join(STUDY_DIR, f"{name}.py"))
    assert len(examples) == 1 + len(SPECS[name].more)
    return examples[index]


def study(name: str, index: int = 0):
    """The study's examples()[index], or a skip naming the missing library."""
    for lib in SPECS[name].libs:
        pytest.importorskip(lib, reason=f"studies/{name}.py needs {lib}: {INSTALL}")
    return _load(name, index)


def run(ex, config):
    out = jax.jit(at.with_config(ex.fn.fun, config), **ex.fn.jit_kwargs)(*ex.args, **ex.kwargs)
    return jax.block_until_ready(out)


@functools.cache
def default_outputs(name: str, index: int = 0):
    ex = _load(name, index)
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
            b[e.site.id] = (
                {"repr": "while", "unroll": 4, "guard": "cond"}
                if i % 2 == 0
                else {"repr": "while", "unroll": 8, "guard": "select"}
            )
        else:
            a[e.site.id] = {"repr": "scan", "unroll": 2}
            b[e.site.id] = {"repr": "for"} if e is scans[-1] else {"repr": "scan", "unroll": max(e.unrolls)}
    configs = [at.Config.from_dict(a), at.Config.from_dict(b)]
    for c in configs:
        assert c in set(space.configs()), f"{c} is not a config of the space"
    return configs


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


CLI_CALLS = 10
# The default and two other configs: each config the compile budget stops costs a fresh worker
# (the library imported again), so every trial more is seconds more.
CLI_TRIALS = 3


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_cli_tunes_the_study(name, tmp_path):
    # A mesh study is loaded only in processes started with its devices (the CLI's own, and
    # mesh_process for the look-up); `autotune tune` asks for them itself.
    examples = [study(name, i) for i in range(1 + len(SPECS[name].more))] if name in LOCAL else None
    cache = str(tmp_path / "cache.db")
    # Tuned for few calls, compile time dominates the cost, so a config that compiles much longer
    # than the default is stopped early (the compile budget): the run stays CI-sized. The end-to-end
    # plumbing is the point, not the pick: the contenders are confirmed in one round (as
    # tests/test_confirm.py checks the rounds), the cheapest beside the default.
    cmd = [
        sys.executable,
        "-m",
        "autotune",
        "tune",
        os.path.join(STUDY_DIR, f"{name}.py"),
        "--trials",
        str(CLI_TRIALS),
        "--expected-calls",
        str(CLI_CALLS),
        "--run-seconds",
        "0.02",
        "--confirm-top",
        "1",
        "--confirm-rounds",
        "1",
        "--cache",
        cache,
        "--storage",
        str(tmp_path / "studies.db"),
        "--json",
    ]
    env = repo_env()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=420, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout)
    assert len(results) == 1 + len(SPECS[name].more)
    for index, result in enumerate(results):
        key = examples[index].fn.key if examples else f"{name}:train_step"
        assert result["function"] == key and key.startswith(f"{name}:")
        # --trials counts measurements: a config skipped on its predicted compile time is not one.
        states = [t["state"] for t in result["trials"] if t["predicted_compile_s"] is None]
        assert len(states) == CLI_TRIALS and states[0] == "complete", result["trials"]
        # A config whose results differ from the default's, or that fails, would be a rewrite bug.
        bad = [(t["state"], t["reason"]) for t in result["trials"] if t["state"] in ("rejected", "error", "crashed")]
        assert not bad, bad
        assert "measuring in-process" not in proc.stderr, "study-file trials run isolated in the worker"
        # This process (or one with the study's devices) finds the entry the CLI stored: same key,
        # fingerprint and signature.
        [stored] = at.Cache(cache).entries(key)
        if examples is None:
            lookup = mesh_process(name, "lookup", cache, str(CLI_CALLS))
            assert lookup["source"] == "cache", (lookup, stored.fingerprint)
            assert at.Config.from_dict(lookup["config"]) == at.Config.from_dict(result["best_config"])
            continue
        ex = examples[index]
        lookup = ex.fn.with_options(cache=cache, expected_calls=CLI_CALLS).config_for(*ex.args, **ex.kwargs)
        assert lookup.source == "cache", (lookup, stored.fingerprint)
        assert lookup.config == at.Config.from_dict(result["best_config"])


@pytest.mark.slow
@pytest.mark.parametrize("name", MESH)
def test_mesh_study_runs_on_its_devices_and_configs_match_the_default(name):
    spec = SPECS[name]
    out = mesh_process(name, "check")
    # The batch (64 sequences) is split over the 8 devices of the "data" axis: 8 each.
    assert out["devices"] == spec.devices and out["batch_devices"] == spec.devices
    assert [s[0] for s in out["batch_shards"]] == [64 // spec.devices]
    sites = out["sites"]
    assert [s["kind"] for s in sites] == list(spec.kinds) and [s["length"] for s in sites] == list(spec.lengths)
    assert out["same_as_at_sites"] and out["space"] >= 4
    assert all(READABLE.match(s["id"]) and s["source"] for s in sites), sites
    assert any(re.fullmatch(spec.library_site, s["id"]) for s in sites), sites
    assert out["finite"]
    # Every sample config runs the sharded program (for shard_map: the loop rewritten under the
    # mesh's axis names) with the default's results and the same output shardings.
    for c in out["configs"]:
        assert "error" not in c and c["mismatch"] is None and c["same_shardings"], c


@pytest.mark.slow
def test_mesh_study_with_too_few_devices_is_one_line_naming_the_flag():
    env = repo_env(XLA_FLAGS="--xla_force_host_platform_device_count=2")
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", "sites", os.path.join("studies", "real_shard_map.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "needs 8 devices" in text and "runs with 2 cpu device(s)" in text, text
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=8 autotune tune studies/real_shard_map.py" in text


def test_host_devices_is_read_without_importing_the_file(tmp_path):
    from autotune._errors import StudyError
    from autotune._studyfile import host_devices

    path = tmp_path / "mesh.py"
    path.write_text("raise RuntimeError('imported')\nHOST_DEVICES: int = 4\n")
    assert host_devices(str(path)) == 4
    path.write_text("import jax\n")
    assert host_devices(str(path)) == 1
    for bad in ("'8'", "0", "2 * 4", "True"):
        path.write_text(f"HOST_DEVICES = {bad}\n")
        with pytest.raises(StudyError, match="HOST_DEVICES must be a whole number written as a literal"):
            host_devices(str(path))


@pytest.mark.slow
def test_bench_runs_a_mesh_study_in_a_process_of_its_own(tmp_path):
    out_json = tmp_path / "b.json"
    cmd = [
        sys.executable,
        os.path.join(ROOT, "scripts", "bench.py"),
        "--study",
        "real_sharded_train",
        "--grid-max",
        "2",
        "--min-trials",
        "1",
        "--rounds",
        "1",
        "--target-s",
        "0.01",
        "--confirm-top",
        "1",
        "--confirm-rounds",
        "1",
        "--quiet",
        "--json",
        str(out_json),
    ]
    env = repo_env()
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out_json.read_text())
    [st] = result["studies"]
    assert result["device"].endswith(" x1") and st["device"].endswith(" x8"), (result["device"], st.get("device"))
    assert st["study"] == "real_sharded_train" and st["grid_size"] == 2
    assert st["approaches"]["default"]["cost"] is not None


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
        [sys.executable, os.path.join(ROOT, "scripts", "bench.py"), "--studies", "real", "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert bench.returncode != 0
    assert "studies/real_numpyro_ar.py needs numpyro" in bench.stderr and ".[examples]" in bench.stderr, bench.stderr
