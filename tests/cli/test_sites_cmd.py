"""autotune/cli/_sites.py: `autotune sites` names each loop as the user wrote it (fori, at.loop,
while), marks the loops JAX derives under grad, and fits 80 columns; a loop a library built is named
by the user's line, and --wide adds the library's."""

from __future__ import annotations

import json
import re
import textwrap

import pytest
from _cli import STUDY, cli_env, run

from autotune import cli

GRAD_STUDY = textwrap.dedent("""
    import jax, jax.numpy as jnp
    from jax import lax
    import autotune as at

    def loss(w, x):
        c, _ = lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None, length=8)
        return jnp.sum(c ** 2)

    @at.autotuned
    def step(w, x):
        g = jax.grad(loss)(w, x)
        y, _ = lax.while_loop(lambda s: s[1] < 10.0, lambda s: (s[0] * 0.9, s[1] + 1.0), (g, 0.0))
        y = lax.fori_loop(0, 4, lambda i, v: v * 1.01, y)
        return at.loop(lambda c, _: (c + 1.0, None), y, length=3, name="polish")[0]

    def examples():
        return [(step, (jnp.eye(4), jnp.ones((2, 4))))]
""")


@pytest.fixture
def grad_study(tmp_path):
    path = tmp_path / "grad_sites_study.py"
    path.write_text(GRAD_STUDY)
    return str(path)


def test_forms_derived_loops_and_while_lengths(grad_study, capsys):
    assert cli.main(["sites", grad_study]) == 0
    text = capsys.readouterr().out
    rows = {line.split()[0]: line for line in text.splitlines() if line[:1] == "s" or line.startswith("polish")}
    assert "scan, derived" in rows["s2"] and "8" in rows["s2"]  # the backward loop of grad
    assert "derived" not in rows["s1"]
    assert " while " in rows["s3"] and "dynamic" in rows["s3"]
    assert " fori " in rows["s4"] and "at.loop" in rows["polish"]
    assert "s3 = while@grad_sites_study.py:13" in text and "derived: a loop JAX made from one of yours" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_wide_shows_full_ids_depth_and_default(grad_study, capsys):
    assert cli.main(["sites", grad_study, "--wide"]) == 0
    text = capsys.readouterr().out
    assert "scan@grad_sites_study.py:7#2" in text and "while×1" in text and "depth" in text
    assert " = " not in text  # no legend needed


def test_json_lists_every_site_with_form_and_derived(grad_study, capsys):
    assert cli.main(["sites", grad_study, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["form"], r["derived"], r["length"]) for r in rows] == [
        ("scan", False, 8),
        ("scan", True, 8),
        ("while", False, None),
        ("fori", False, 4),
        ("loop", False, 3),
    ]
    assert {r["function"] for r in rows} == {"grad_sites_study:step"}


def test_json_stays_alone_on_stdout_when_the_function_prints_while_traced(tmp_path):
    (tmp_path / "tiny_study.py").write_text(STUDY)
    r = run("sites", "tiny_study.py", "--json", cwd=tmp_path, env=cli_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert [s["id"] for s in json.loads(r.stdout)] == ["smooth"]
    assert "study file imported" in r.stderr and "tracing smooth" in r.stderr


FLAX_STUDY = textwrap.dedent("""
    import flax.linen as nn
    import jax, jax.numpy as jnp
    import autotune as at

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            return jnp.tanh(nn.Dense(4)(x)), None

    Stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=3)

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Stack(name="stack")(x, None)[0]  # T:stack

    MODEL, X = Model(), jnp.ones((2, 4))

    @at.autotuned
    def forward(params, x):
        return MODEL.apply(params, x)

    def examples():
        return [(forward, (MODEL.init(jax.random.key(0), X), X))]
""")


def test_a_flax_scan_is_named_by_the_users_line_and_wide_shows_flaxs(tmp_path, capsys):
    pytest.importorskip("flax", reason="this test needs flax: pip install -e '.[examples]'")
    path = tmp_path / "flax_sites_study.py"
    path.write_text(FLAX_STUDY)
    line = next(i for i, text in enumerate(FLAX_STUDY.splitlines(), 1) if text.endswith("# T:stack"))
    assert cli.main(["sites", str(path)]) == 0
    narrow = capsys.readouterr().out
    assert f"flax_sites_study.py:{line}" in narrow and "axes_scan" not in narrow
    assert cli.main(["sites", str(path), "--wide"]) == 0
    wide = capsys.readouterr().out
    [row] = [r for r in wide.splitlines() if r.startswith("scan@")]
    assert row.split()[0] == f"scan@flax_sites_study.py:{line}" and "library" in wide
    assert re.search(r" flax/core/axes_scan\.py:\d+$", row), row
    assert cli.main(["sites", str(path), "--json"]) == 0
    [site] = json.loads(capsys.readouterr().out)
    assert site["id"] == f"scan@flax_sites_study.py:{line}"
    assert site["library_source"].startswith("flax/core/")


def test_sites_names_match_the_legend_and_function_narrows_a_study_file(grad_study, capsys):
    assert cli.main(["sites", grad_study, "--function", "grad_sites_study:step"]) == 0
    text = capsys.readouterr().out
    assert "s2 = scan@grad_sites_study.py:7#2 (derived)" in text  # the legend says which loop JAX derived
    assert cli.main(["sites", grad_study, "--function", "grad_sites_study:nope"]) == 2
    assert "has no example of function 'grad_sites_study:nope'" in capsys.readouterr().err
    assert cli.main(["sites"]) == 2
    assert "Give a study FILE or --function KEY" in capsys.readouterr().err


def test_a_checkpointed_loop_body_is_named_with_its_policy_and_the_ones_it_is_tuned_over(tmp_path):
    from _repo import ROOT

    study = str(ROOT / "studies" / "lstm_step.py")
    r = run("sites", study, cwd=tmp_path, env=cli_env(tmp_path))
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    note = "its body is checkpointed (policy nothing); tuned over its own policy and dots, dots_no_batch, everything"
    assert note in text
    r = run("sites", study, "--json", cwd=tmp_path, env=cli_env(tmp_path))
    assert [s.get("policy") for s in json.loads(r.stdout)] == [None, "nothing"]
