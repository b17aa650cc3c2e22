"""_compat_remat: a checkpointed call's policy by name, its key, and the trace-time policy override."""

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from autotune.program import _compat
from autotune.program._compat_remat import CUSTOM, jax_policy, policy_name
from autotune.program._config import POLICIES


def layer(h, w):
    return jnp.tanh(h @ w), None


def checkpoints(jx):
    """Every checkpoint equation of ``jx`` and its sub-jaxprs."""
    out = []
    for eqn in _compat.unpack(jx)[0].eqns:
        if _compat.is_checkpoint(eqn):
            out.append(eqn)
        for _, sub in _compat.sub_jaxprs(eqn.params):
            out += checkpoints(sub)
    return out


def forward(policy):
    def f(ws, x):
        h, _ = lax.scan(jax.checkpoint(layer, policy=policy), x, ws)
        return jnp.sum(h)

    return f


ARGS = (jnp.ones((3, 4, 4)), jnp.ones((2, 4)))


@pytest.mark.parametrize("name", POLICIES)
def test_every_policy_name_stands_for_the_jax_policy_it_reads_back_as(name):
    assert policy_name(jax_policy(name)) == name


def test_no_policy_is_nothing_saved_and_a_function_of_the_users_is_custom():
    assert policy_name(None) == "nothing"
    assert policy_name(lambda prim, *_, **__: True) == CUSTOM


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "grad-inside"])
def test_the_key_names_the_checkpointed_function_in_the_forward_and_the_derived_equation(grad):
    f = forward(jax.checkpoint_policies.dots_saveable)
    (eqn,) = checkpoints(jax.make_jaxpr(jax.grad(f) if grad else f)(*ARGS))
    assert eqn.params["differentiated"] is grad  # under grad only the derived copy is left
    assert _compat.checkpoint_key(eqn).startswith("layer at ")
    assert _compat.checkpoint_key(eqn).endswith(f"test_compat_remat.py:{layer.__code__.co_firstlineno}")
    assert _compat.eqn_policy(eqn) == "dots"


def test_the_override_gives_the_named_calls_its_policy_before_differentiation_and_is_undone():
    f = forward(jax.checkpoint_policies.dots_saveable)
    (eqn,) = checkpoints(jax.make_jaxpr(jax.grad(f))(*ARGS))
    key = _compat.checkpoint_key(eqn)
    with _compat.policy_override({key: "everything"}):
        (inside,) = checkpoints(jax.make_jaxpr(jax.grad(f))(*ARGS))
    with _compat.policy_override({"another at x.py:1": "everything"}):
        (other,) = checkpoints(jax.make_jaxpr(jax.grad(f))(*ARGS))
    (after,) = checkpoints(jax.make_jaxpr(jax.grad(f))(*ARGS))
    assert (_compat.eqn_policy(inside), _compat.eqn_policy(other), _compat.eqn_policy(after)) == (
        "everything",
        "dots",
        "dots",
    )
    # Everything saved: the backward pass recomputes nothing, so its checkpoint has fewer equations.
    assert len(inside.params["jaxpr"].eqns) < len(eqn.params["jaxpr"].eqns)
