"""Site ids of loops that installed libraries build (flax ``nn.scan``, Equinox, optimistix) name
the user's line, not the library's: the nearest frame outside installed packages, followed
through the ``jit``s the library traces in. The library's line stays as ``library_source``.

The user's code is a module written into a temporary folder (outside every installed
package), with the lines under test marked ``# T:<tag>``. Each library's tests skip with the
install command where it is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest
from _repo import repo_env

import autotune as at

INSTALL = "install the examples extra: pip install -e '.[examples]' (CI does: make test EXTRAS=test,examples)"

FLAX_MODEL = textwrap.dedent("""
    import flax.linen as nn
    import jax.numpy as jnp


    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            return jnp.tanh(nn.Dense(x.shape[-1])(x)), None


    Deep = nn.scan(nn.remat(Block), variable_axes={"params": 0}, split_rngs={"params": True}, length=3)
    Wide = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=2)


    class Encoder(nn.Module):
        @nn.compact
        def __call__(self, x):
            x, _ = Deep(name="deep")(x, None)  # T:deep
            x, _ = Wide(name="wide")(x, None)  # T:wide
            return x
""")

EQX_MODEL = textwrap.dedent("""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    from jax import lax


    class Stack(eqx.Module):
        layers: eqx.nn.Linear

        def __init__(self, key):
            self.layers = eqx.filter_vmap(lambda k: eqx.nn.Linear(4, 4, key=k))(jax.random.split(key, 3))

        def __call__(self, x):
            params, static = eqx.partition(self.layers, eqx.is_array)

            def step(h, p):
                return jnp.tanh(eqx.combine(p, static)(h)), None

            return lax.scan(step, x, params)[0]  # T:stack


    def settle(x):
        cond, body = lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 0.5)
        return eqx.internal.while_loop(cond, body, (0, x), max_steps=8, kind="checkpointed")[1]  # T:settle
""")

OPTX_MODEL = textwrap.dedent("""
    import optimistix as optx


    def newton(y0):
        solver = optx.Newton(rtol=1e-6, atol=1e-6)
        return optx.root_find(lambda y, a: y ** 3 - a, solver, y0, args=2.0, throw=False).value  # T:newton
""")

MODELS = {
    "flax_model": ("flax", FLAX_MODEL),
    "eqx_model": ("equinox", EQX_MODEL),
    "optx_model": ("optimistix", OPTX_MODEL),
}

# Prints every id of every model whose library is installed, as one JSON line.
RUNNER = textwrap.dedent("""
    import importlib.util, json, sys
    sys.path.insert(0, ".")
    import jax, jax.numpy as jnp
    import autotune as at
    ids = {}
    x = jnp.ones((2, 4))
    if importlib.util.find_spec("flax"):
        import flax_model
        enc = flax_model.Encoder()
        params = enc.init(jax.random.key(0), x)
        ids["flax"] = [s.id for s in at.sites(jax.grad(lambda p: enc.apply(p, x).sum()), params)]
    if importlib.util.find_spec("equinox"):
        import eqx_model
        ids["eqx"] = [s.id for s in at.sites(lambda m: m(x[0]), eqx_model.Stack(jax.random.key(1)))]
        ids["settle"] = [s.id for s in at.sites(eqx_model.settle, x)]
    if importlib.util.find_spec("optimistix"):
        import optx_model
        ids["newton"] = [s.id for s in at.sites(optx_model.newton, x[0])]
    print(json.dumps(ids))
""")


def line_of(text: str, tag: str) -> int:
    hits = [i for i, line in enumerate(text.splitlines(), 1) if line.rstrip().endswith(f"# {tag}")]
    assert len(hits) == 1, (tag, hits)
    return hits[0]


def user(name: str, tag: str, form: str = "scan") -> str:
    return f"{form}@{name}.py:{line_of(MODELS[name][1], tag)}"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("user_project")
    for name, (_, text) in MODELS.items():
        (d / f"{name}.py").write_text(text)
    return d


def load(model_dir, name: str):
    lib = MODELS[name][0]
    pytest.importorskip(lib, reason=f"this test needs {lib}: {INSTALL}")
    spec = importlib.util.spec_from_file_location(name, model_dir / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


X = jnp.ones((2, 4))


def test_two_flax_scan_stacks_are_named_by_the_users_lines(model_dir):
    m = load(model_dir, "flax_model")
    enc = m.Encoder()
    params = enc.init(jax.random.key(0), X)
    forward = at.sites(lambda p, x: enc.apply(p, x), params, X)
    assert [s.id for s in forward] == [user("flax_model", "T:deep"), user("flax_model", "T:wide")]
    for s in forward:
        assert os.path.realpath(s.source.rsplit(":", 1)[0]) == os.path.realpath(model_dir / "flax_model.py")
        assert re.fullmatch(r"flax/core/axes_scan\.py:\d+", s.library_source), s.library_source
    # Under value_and_grad the backward loops are told apart by a counter on the user's line.
    sites = at.sites(jax.value_and_grad(lambda p, x: enc.apply(p, x).sum()), params, X)
    assert len(sites) == 4 and len({s.id for s in sites}) == 4
    assert {s.id for s in sites if not s.derived} == {s.id for s in forward}
    assert {s.id.split("#")[0] for s in sites if s.derived} == {s.id for s in forward}
    assert not any("axes_scan" in s.id for s in sites)


def test_equinox_stacked_layers_applied_with_lax_scan_keep_the_users_line(model_dir):
    m = load(model_dir, "eqx_model")
    stack = m.Stack(jax.random.key(1))
    for fn in (lambda s, x: s(x), jax.grad(lambda s, x: s(x).sum())):
        sites = at.sites(fn, stack, X[0])
        assert {s.id.split("#")[0] for s in sites} == {user("eqx_model", "T:stack")}
        assert all(s.library_source is None for s in sites if not s.derived)


def test_equinox_while_loop_is_named_by_the_users_call(model_dir):
    m = load(model_dir, "eqx_model")
    (site,) = at.sites(m.settle, X)
    assert site.id == user("eqx_model", "T:settle", "while")
    assert re.fullmatch(r"equinox/internal/_loop/\w+\.py:\d+", site.library_source), site.library_source


def test_optimistix_newton_solve_is_named_by_the_users_call_through_its_jit(model_dir):
    m = load(model_dir, "optx_model")
    (site,) = at.sites(m.newton, jnp.ones(3))
    assert site.id == user("optx_model", "T:newton", "while")  # not while@loop.py:103
    assert re.fullmatch(r"equinox/internal/_loop/loop\.py:\d+", site.library_source), site.library_source


@pytest.mark.slow
def test_library_loop_ids_are_identical_in_two_fresh_processes(tmp_path):
    found = [lib for lib, _ in MODELS.values() if importlib.util.find_spec(lib)]
    if not found:
        pytest.skip(f"this test needs flax, equinox or optimistix: {INSTALL}")
    procs = []
    for sub, seed in (("a", "1"), ("b", "2")):  # two folders: ids must not depend on where the project lives
        d = tmp_path / sub
        d.mkdir()
        for name, (_, text) in MODELS.items():
            (d / f"{name}.py").write_text(text)
        (d / "run.py").write_text(RUNNER)
        env = repo_env(
            PYTHONHASHSEED=seed,
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "run.py"], cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    first, second = results
    assert first == second and first
    for ids in first.values():
        assert ids and all(re.fullmatch(r"(scan|while)@\w+_model\.py:\d+(#\d+)?", i) for i in ids), ids
