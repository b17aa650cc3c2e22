"""Checkpointed loop bodies: the site's policy dimension, applied by at.with_config whether
jax.grad is inside the function (a training step) or outside it, on values and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import autotune as at
from autotune._errors import ConfigError
from autotune.program._config import POLICIES
from autotune.program._space import OWN, Space
from autotune.study._guard import compare_outputs


def layer(h, w):
    return jnp.tanh(h @ w) @ w.T, None


def loss(ws, x):
    h, _ = lax.scan(jax.checkpoint(layer, policy=jax.checkpoint_policies.dots_saveable), x, ws)
    return jnp.sum(h * h)


def step(ws, x):  # a training step: jax.grad inside the traced function
    value, grads = jax.value_and_grad(loss)(ws, x)
    return ws - 0.1 * grads, value


ARGS = (jax.random.normal(jax.random.PRNGKey(0), (6, 16, 16)) / 4, jax.random.normal(jax.random.PRNGKey(1), (8, 16)))


def checkpointed(fn):
    (site,) = [s for s in at.sites(fn, *ARGS) if s.policy is not None]
    return site


def temp_bytes(fn):
    return jax.jit(fn).lower(*ARGS).compile().memory_analysis().temp_size_in_bytes


def test_the_loop_holding_the_checkpointed_calls_has_the_policy_and_a_plain_loop_has_none():
    inside = at.sites(step, *ARGS)
    assert [(s.derived, s.policy) for s in inside] == [(False, None), (True, "dots")]
    assert [(s.derived, s.policy) for s in at.sites(loss, *ARGS)] == [(False, "dots")]
    assert inside[1].to_dict()["policy"] == "dots" and "remat_keys" not in inside[1].to_dict()
    assert at.sites(lambda x: lax.scan(layer, x, ARGS[0])[0], ARGS[1])[0].policy is None


def test_the_space_offers_the_own_policy_and_every_other_jointly_with_unroll():
    space = Space(at.sites(step, *ARGS))
    plain, ckpt = space.entries
    assert plain.policies == (None,)
    assert ckpt.policies == (None, "nothing", "dots_no_batch", "everything")
    assert len(ckpt.choices) == 4 * len(plain.choices)
    assert len(space) == len(plain.choices) * len(ckpt.choices)
    assert space.param_choices()[ckpt.policy_param] == [OWN, "nothing", "dots_no_batch", "everything"]
    for config in space.configs():
        assert space.from_params(space.to_params(config)) == config


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("unroll", [1, 3])
def test_every_policy_keeps_the_values_and_gradients_of_a_training_step(policy, unroll):
    site = checkpointed(step)
    want = jax.jit(step)(*ARGS)
    got = jax.jit(at.with_config(step, {site.id: {"repr": "scan", "unroll": unroll, "policy": policy}}))(*ARGS)
    assert compare_outputs(want, got) is None


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_keeps_the_gradient_taken_outside(policy):
    site = checkpointed(loss)
    want = jax.jit(jax.grad(loss))(*ARGS)
    got = jax.jit(jax.grad(at.with_config(loss, {site.id: {"repr": "scan", "unroll": 2, "policy": policy}})))(*ARGS)
    assert compare_outputs(want, got) is None


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_the_policy_takes_effect_in_the_program_differentiated_inside():
    """What the backward pass keeps is decided when grad runs, in the trace: saving every
    intermediate needs more temporary memory than saving none, so the policy really changed."""
    site = checkpointed(step)
    configs = {p: {site.id: {"repr": "scan", "unroll": 1, "policy": p}} for p in POLICIES}
    used = {p: temp_bytes(at.with_config(step, config)) for p, config in configs.items()}
    assert used["nothing"] < used["dots"] < used["everything"], used
    assert temp_bytes(at.with_config(step, {})) == used["dots"]  # the user's own policy is dots


def test_the_policy_takes_effect_when_grad_is_outside():
    site = checkpointed(loss)

    def grad_under(policy):
        return jax.grad(at.with_config(loss, {site.id: {"repr": "scan", "unroll": 1, "policy": policy}}))

    assert temp_bytes(grad_under("nothing")) < temp_bytes(grad_under("everything"))


def test_a_policy_for_a_loop_without_checkpointed_calls_is_refused_by_name():
    site = at.sites(step, *ARGS)[0]
    with pytest.raises(ConfigError, match=r"policy 'dots' applies only to a loop whose body is checkpointed"):
        at.with_config(step, {site.id: {"repr": "scan", "unroll": 1, "policy": "dots"}})(*ARGS)


def test_a_config_without_policy_leaves_the_users_policy_and_the_program_alone():
    site = checkpointed(step)
    plain = at.with_config(step, {site.id: {"repr": "scan", "unroll": 2}})
    np.testing.assert_array_equal(jax.jit(plain)(*ARGS)[1], jax.jit(step)(*ARGS)[1])
    assert [s.policy for s in at.sites(plain, *ARGS)] == [None, "dots"]


def test_a_checkpointed_loop_inside_a_jit_of_its_own_gets_the_policy_and_leaves_no_stale_trace():
    """JAX traces an inner jax.jit once and caches it: the re-trace clears that cache before
    and after, so the policy reaches the inner trace and a later plain trace is the user's."""
    inner = jax.jit(loss)

    def step_of_jitted(ws, x):
        return jax.grad(inner)(ws, x)

    site = checkpointed(step_of_jitted)
    configs = {p: {site.id: {"repr": "scan", "unroll": 1, "policy": p}} for p in ("nothing", "everything")}
    used = {p: temp_bytes(at.with_config(step_of_jitted, c)) for p, c in configs.items()}
    assert used["nothing"] < used["everything"], used
    assert [s.policy for s in at.sites(step_of_jitted, *ARGS)] == [None, "dots"]
    assert (
        compare_outputs(
            jax.jit(step_of_jitted)(*ARGS), jax.jit(at.with_config(step_of_jitted, configs["nothing"]))(*ARGS)
        )
        is None
    )


def test_an_optuna_trial_suggests_the_policy_with_the_unroll():
    import optuna

    space = Space(at.sites(step, *ARGS))
    for config in space.configs():
        assert space.suggest(optuna.trial.FixedTrial(space.to_params(config))) == config
