"""The real-library studies (studies/real_*.py) as the test files see them: what each study is
expected to hold (SPECS), loading a study once per process, running a config, two sample configs
that move every site, and the `autotune tune` end-to-end check.

The tests are split over files so that under pytest-xdist (a file per process) no one file holds
the suite's tail: tests/test_real_studies.py (sites, configs, gradients, without the library),
test_real_studies_tune_nn.py and test_real_studies_tune_sci.py (`autotune tune` on the local
studies, TUNE_NN and TUNE_SCI), test_real_studies_mesh.py (the 8-device studies).
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
import pytest
from _mesh import mesh_process
from _presets import ONE_ROUND_CLI
from _repo import ROOT, repo_env

import autotune as at
from autotune.program._space import Space

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


# `autotune tune` on each local study, in two files of about equal time (each tune is a study file
# imported in several fresh workers, its library with it): flax, optax and equinox; the samplers
# and solvers. test_every_real_study_has_a_spec checks the two with MESH cover every study.
TUNE_NN = ["real_equinox_stack", "real_flax_lstm", "real_flax_transformer", "real_optax_train"]
TUNE_SCI = ["real_blackjax_hmc", "real_diffrax_ode", "real_numpyro_ar", "real_optimistix_newton"]


@functools.cache
def load(name: str, index: int = 0):
    """The study's examples()[index], loaded once per process (every test file of a process shares it)."""
    from autotune.record._studyfile import load_examples

    assert SPECS[name].devices == 1, f"{name} needs {SPECS[name].devices} devices: test it in a process of its own"
    examples = load_examples(os.path.join(STUDY_DIR, f"{name}.py"))
    assert len(examples) == 1 + len(SPECS[name].more)
    return examples[index]


def study(name: str, index: int = 0):
    """The study's examples()[index], or a skip naming the missing library."""
    for lib in SPECS[name].libs:
        pytest.importorskip(lib, reason=f"studies/{name}.py needs {lib}: {INSTALL}")
    return load(name, index)


def run(ex, config):
    out = jax.jit(at.with_config(ex.fn.fun, config), **ex.fn.jit_kwargs)(*ex.args, **ex.kwargs)
    return jax.block_until_ready(out)


@functools.cache
def default_outputs(name: str, index: int = 0):
    ex = load(name, index)
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


CLI_CALLS = 10
# The default and one other config, rewritten: each trial more is a compile of a real program, and
# each config the compile budget stops costs a fresh worker (the library imported again). What the
# rewrites give is checked in this process, for two configs that move every site
# (test_real_studies.py); here it is the worker, the study's records and the stored entry.
CLI_TRIALS = 2


def cli_tunes_the_study(name: str, tmp_path) -> None:
    """`autotune tune studies/NAME.py --trials 2 --json` end to end: every example tuned with the
    trials it asked for, no config rejected or failing, isolated in the worker, and the entry it
    stored found by a fresh look-up (for a mesh study: in a process with the study's devices)."""
    # A mesh study is loaded only in processes started with its devices (the CLI's own, and
    # mesh_process for the look-up); `autotune tune` asks for them itself.
    examples = [study(name, i) for i in range(1 + len(SPECS[name].more))] if name in LOCAL else None
    cache = str(tmp_path / "cache.db")
    # Tuned for few calls, compile time dominates the cost, so a config that compiles much longer
    # than the default is stopped early (the compile budget): the run stays CI-sized. The end-to-end
    # plumbing is the point, not the pick: the contenders are confirmed in one round (as
    # tests/study/test_confirm.py checks the rounds), the cheapest beside the default.
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
        *ONE_ROUND_CLI,
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


def tune_test(names: list[str]):
    """The end-to-end ``autotune tune`` test over ``names`` (a file per group of studies, so two
    xdist workers share the slow tunes): ``test_cli_tunes_the_study = tune_test(TUNE_NN)``."""

    @pytest.mark.slow
    @pytest.mark.parametrize("name", names)
    def test_cli_tunes_the_study(name, tmp_path):
        cli_tunes_the_study(name, tmp_path)

    return test_cli_tunes_the_study
