"""A site that cannot be rewritten costs one trial, not a study.

The real case: a loop inside a Pallas kernel (interpret mode, so it runs on CPU). The kernel
body works on references (``x_ref[...]``); re-traced as a plain function of arrays it fails
(``get must be called on Ref types``) for every choice of that loop, so no config that
changes it can ever be measured. Found once, the site is named in the study, the tune
result, the tune output and ``autotune sites``, and held at its default.
"""

from __future__ import annotations

import json
import textwrap

import jax
import jax.numpy as jnp
import pytest
from _presets import ONE_ROUND_CLI, STEADY
from jax import lax

import autotune as at
from autotune import cli
from autotune.program._config import Config
from autotune.program._space import Space, unrewritable
from autotune.study import _optuna
from autotune.study._propose import GridProposer, RandomProposer, SamplerProposer

pl = pytest.importorskip("jax.experimental.pallas", reason="needs Pallas (part of jax)")


def kernel(x_ref, o_ref):
    o_ref[...] = lax.fori_loop(0, 8, lambda i, a: jnp.sin(a) + x_ref[...] * 0.1, x_ref[...])


def program(x):
    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)
    return lax.scan(lambda c, _: (jnp.cos(c) * 0.9 + y, None), y, length=8)[0]


X = jnp.linspace(0.0, 1.0, 8)


def the_sites():
    sites = at.sites(program, X)
    kernel_site = next(s for s in sites if s.form == "fori")
    scan_site = next(s for s in sites if s.form == "scan")
    return sites, kernel_site, scan_site


def test_the_kernel_loop_is_found_and_the_other_loop_is_not():
    sites, kernel_site, scan_site = the_sites()
    with pytest.raises(Exception, match="Ref"):  # the premise: no choice of it re-emits
        jax.jit(at.with_config(program, {kernel_site.id: {"repr": "scan", "unroll": 2}}))(X)
    space = Space(sites)
    found = unrewritable(program, (X,), {}, {}, space)
    assert list(found) == [kernel_site.id] and "Ref" in found[kernel_site.id]
    # from a failed config: only the sites it changes are suspects
    both = Config({kernel_site.id: {"repr": "for"}, scan_site.id: {"unroll": 4}})
    assert list(unrewritable(program, (X,), {}, {}, space, both)) == [kernel_site.id]
    assert unrewritable(program, (X,), {}, {}, space, Config({scan_site.id: {"unroll": 4}})) == {}


def test_a_program_whose_sites_all_rewrite_has_none():
    def f(x):
        return lax.scan(lambda c, _: (jnp.sin(c), None), x, length=8)[0]

    assert unrewritable(f, (X,), {}, {}, Space(at.sites(f, X))) == {}


def test_proposers_hold_a_pinned_site_at_its_default(tmp_path):
    sites, kernel_site, scan_site = the_sites()
    space = Space(sites)
    default = kernel_site.default
    study = _optuna.Study("pin", f"sqlite:///{tmp_path / 's.db'}", 1)
    try:
        proposers = [
            GridProposer(space),
            RandomProposer(space, 0),
            SamplerProposer("tpe", study, space, _optuna.make_sampler("tpe", 0, 8), 0),
        ]
        for proposer in proposers:
            proposer.pin([kernel_site.id])
            taken: set[str] = set()
            while (config := proposer.propose(taken)) is not None:
                assert config.get(kernel_site.id, default) == default, (proposer.kind, config)
                taken.add(config.to_json())
            # every config left: the scan site's choices, the kernel loop at its default
            assert len(taken) == len(Space([scan_site]).entries[0].choices), proposer.kind
    finally:
        study.close()


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["grid", "random", "tpe"])
def test_a_study_spends_at_most_one_error_trial_on_it(tmp_path, sampler):
    _, kernel_site, scan_site = the_sites()
    r = at.tune(
        program,
        X,
        n_trials=6,
        sampler=sampler,
        storage=str(tmp_path / "s.db"),
        timing=STEADY,
        confirm_rounds=1,
        isolate=False,
        compile_weight=0.0,
    )
    errors = [t for t in r.trials if t.state == "error"]
    assert len(errors) == 1 if sampler == "grid" else len(errors) <= 1, [(t.config, t.reason) for t in errors]
    if errors:  # it was tried once: its trial says why, and that the site stays at its default
        assert errors[0].config.get(kernel_site.id) != kernel_site.default
        assert kernel_site.id in errors[0].reason and "default" in errors[0].reason
        assert list(r.unrewritable) == [kernel_site.id]
        assert _optuna.Study(r.study_name, r.storage, 1).attrs["unrewritable"] == r.unrewritable
    measured = [t for t in r.trials if t.state in ("complete", "shared")]
    assert all(t.config.get(kernel_site.id, kernel_site.default) == kernel_site.default for t in measured)
    # the other site is still searched: its every choice (4 of them) measured within 6 trials
    assert len({t.config.get(scan_site.id, scan_site.default) for t in measured}) == 4


STUDY = textwrap.dedent("""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl

    import autotune as at


    def kernel(x_ref, o_ref):
        o_ref[...] = lax.fori_loop(0, 8, lambda i, a: jnp.sin(a) + x_ref[...] * 0.1, x_ref[...])


    @at.autotuned
    def program(x):
        y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)
        return lax.scan(lambda c, _: (jnp.cos(c) * 0.9 + y, None), y, length=8)[0]


    def examples():
        return [(program, (jnp.linspace(0.0, 1.0, 8),))]
""")


def test_autotune_sites_names_it_with_the_reason(tmp_path, capsys):
    path = tmp_path / "pallas_study.py"
    path.write_text(STUDY)
    assert cli.main(["sites", str(path)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "cannot be rewritten" in line]
    assert len(lines) == 1 and "Ref" in out, out
    name = lines[0].split()[1]  # the table's name for the site, spelled out in the legend when short
    assert name == "fori@pallas_study.py:11" or f"{name} = fori@pallas_study.py:11" in out, out
    assert cli.main(["sites", str(path), "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert "Ref" in rows["fori@pallas_study.py:11"]["rewrite_error"]
    assert rows["scan@pallas_study.py:17"]["rewrite_error"] is None


@pytest.mark.slow
def test_autotune_tune_says_so_once_and_json_carries_it(tmp_path):
    from _cli import cli_env, run

    (tmp_path / "pallas_study.py").write_text(STUDY)
    r = run(
        "tune",
        "pallas_study.py",
        "--trials",
        "6",
        "--sampler",
        "grid",
        "--xla",
        "off",  # the loop configs alone: XLA's stage, where "auto" takes it (jax 0.12), takes trials from them
        "--run-seconds",
        "0.02",
        *ONE_ROUND_CLI,
        cwd=tmp_path,
        env=cli_env(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())  # rich wraps long lines
    assert text.count("cannot be rewritten (ValueError") == 1, r.stdout
    assert "): it stays at its default" in text, r.stdout
    r = run(
        "tune",
        "pallas_study.py",
        "--json",
        "--trials",
        "6",
        "--sampler",
        "grid",
        "--xla",
        "off",  # the loop configs alone: XLA's stage, where "auto" takes it (jax 0.12), takes trials from them
        "--run-seconds",
        "0.02",
        *ONE_ROUND_CLI,
        cwd=tmp_path,
        env=cli_env(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    [result] = json.loads(r.stdout)
    assert list(result["unrewritable"]) == ["fori@pallas_study.py:11"]
    assert sum(t["state"] == "error" for t in result["trials"]) == 1
