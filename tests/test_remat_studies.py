"""studies/transformer_step.py and studies/lstm_step.py: training steps (jax.grad inside) whose
loop bodies are checkpointed. Each has a site with a policy dimension; every policy keeps the
step's values and gradients; the policy really changes the differentiated program's memory;
``autotune tune`` searches the policies with unroll, end to end."""

from __future__ import annotations

import json
import sys

import jax
import pytest
from _cli import cli_env, run
from _presets import CLI_FAST
from _repo import ROOT

import autotune as at
from autotune.program._config import POLICIES, Config
from autotune.program._space import Space
from autotune.record._studyfile import load_examples, load_module
from autotune.study._guard import compare_outputs

# stem -> (the user's own policy, the layer function's name the checkpointed calls are keyed by)
STUDIES = {"transformer_step": ("dots_no_batch", "layer"), "lstm_step": ("nothing", "<lambda>")}
ENV = "AUTOTUNE_STUDY_SIZE"


def study_path(stem: str) -> str:
    return str(ROOT / "studies" / f"{stem}.py")


def load_small(stem: str, patch: pytest.MonkeyPatch):
    """The study's example at the small size (``patch`` unsets the size knob), its module loaded afresh."""
    patch.delenv(ENV, raising=False)
    sys.modules.pop(stem, None)
    [ex] = load_examples(study_path(stem))
    return ex


@pytest.fixture
def small(monkeypatch):
    """``small(stem)``: :func:`load_small`, its module dropped again after the test."""
    used = []

    def load(stem: str):
        used.append(stem)
        return load_small(stem, monkeypatch)

    yield load
    for stem in used:
        sys.modules.pop(stem, None)


@pytest.fixture(scope="module")
def reference():
    """``reference(stem)``: the study's outputs under the user's own config (jitted as it
    stands), computed once per module: the transformer's step compiles for seconds."""
    outputs = {}

    def get(stem: str):
        if stem not in outputs:
            with pytest.MonkeyPatch.context() as patch:
                try:
                    ex = load_small(stem, patch)
                    outputs[stem] = jax.block_until_ready(jax.jit(ex.fn.fun)(*ex.args))
                finally:
                    sys.modules.pop(stem, None)
        return outputs[stem]

    return get


def checkpointed_site(ex):
    [site] = [s for s in ex.sites() if s.policy is not None]
    return site


@pytest.mark.parametrize("stem", STUDIES)
@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_the_backward_loop_holds_the_checkpointed_layer_and_is_tuned_over_policies(small, stem):
    own, function = STUDIES[stem]
    ex = small(stem)
    forward, backward = ex.sites()
    assert (forward.derived, forward.policy) == (False, None)
    assert (backward.derived, backward.policy) == (True, own)
    [key] = backward.remat_keys
    assert key.startswith(f"{function} at ") and f"{stem}.py:" in key
    space = Space(ex.sites())
    assert space.entries[1].policies == (None, *(p for p in POLICIES if p != own))
    assert len(space) == len(space.entries[0].choices) ** 2 * 4 <= 64


# The transformer compiles for 6 s a config on the CPU: its policies run in `make test` (slow).
SLOW_STEMS = {"transformer_step"}


@pytest.mark.parametrize("stem", [pytest.param(s, marks=pytest.mark.slow) if s in SLOW_STEMS else s for s in STUDIES])
@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_passes_the_guard_on_values_and_gradients(small, stem, policy, reference):
    ex = small(stem)
    site = checkpointed_site(ex)
    want = reference(stem)
    config = Config({site.id: {"repr": "scan", "unroll": 2, "policy": policy}})
    got = jax.jit(at.with_config(ex.fn.fun, config))(*ex.args)
    assert compare_outputs(want, got) is None


@pytest.mark.slow  # two transformer compiles; tests/program/test_remat.py checks the same on a small step
def test_the_policy_changes_the_transformer_steps_memory(small):
    """The key test: jax.grad runs inside the step, so what its forward pass saves was decided
    while tracing; a different temporary size shows the chosen policy reached that decision."""
    ex = small("transformer_step")
    site = checkpointed_site(ex)

    def temp(policy):
        config = Config({site.id: {"repr": "scan", "unroll": 1, "policy": policy}})
        compiled = jax.jit(at.with_config(ex.fn.fun, config)).lower(*ex.args).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    assert temp("nothing") < temp("everything")


@pytest.mark.parametrize("stem", STUDIES)
def test_the_full_size_is_a_real_share_of_a_v5e_chip(monkeypatch, stem):
    """Traced abstractly only: the example's arguments and one step's saved activations."""
    monkeypatch.setenv(ENV, "full")
    sys.modules.pop(stem, None)
    try:
        module = load_module(study_path(stem))
        args = jax.eval_shape(lambda: module.examples()[0][1])
        compiled_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(args))
        assert compiled_bytes > 2**26  # parameters and data: over 64 MiB
        [site] = [s for s in at.sites(module.train_step.autotune.fun, *args) if s.policy is not None]
        assert site.length >= 16
    finally:
        sys.modules.pop(stem, None)


TINY_STEP = """
import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

EXPECTED_CALLS = 1000


def layer(x, w):
    return jnp.tanh(x @ w), None


@at.autotuned(expected_calls=EXPECTED_CALLS)
def train_step(ws, x):
    def loss(ws):
        y, _ = lax.scan(jax.checkpoint(layer), x, ws)
        return jnp.sum(y * y)

    return ws - 0.1 * jax.grad(loss)(ws)


def examples():
    return [(train_step, (jnp.full((4, 8, 8), 0.1), jnp.ones((2, 8))))]
"""


@pytest.mark.slow
def test_autotune_tune_searches_the_policy_end_to_end(tmp_path):
    """A training step of the studies' shape (a scan over a checkpointed layer, grad inside) at
    a size that compiles in a fraction of a second: ``autotune tune`` measures policy configs."""
    path = tmp_path / "tiny_step.py"
    path.write_text(TINY_STEP)
    r = run(
        "tune",
        str(path),
        "--json",
        "--trials",
        "6",
        "--sampler",
        "grid",
        "--xla",
        "off",
        *CLI_FAST,
        cwd=tmp_path,
        env=cli_env(tmp_path),
        timeout=900,
    )
    assert r.returncode == 0, r.stderr
    (res,) = json.loads(r.stdout)
    configs = [Config.from_dict(t["config"]) for t in res["trials"]]
    assert any(c[k].policy is not None for c in configs for k in c), configs
    assert res["stored"] and Config.from_dict(res["best_config"]) in configs
