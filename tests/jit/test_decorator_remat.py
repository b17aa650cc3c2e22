"""@at.autotuned applies a cached config's rematerialisation policy to a training step
(jax.grad inside): the function is traced again with the policy, so the executable it builds
saves what the policy says, with the same values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import autotune as at
from autotune.study._guard import compare_outputs


def layer(h, w):
    return jnp.tanh(h @ w) @ w.T, None


def loss(ws, x):
    h, _ = lax.scan(jax.checkpoint(layer, policy=jax.checkpoint_policies.dots_saveable), x, ws)
    return jnp.sum(h * h)


def make(cache):
    @at.autotuned(cache=cache, key="tests:remat_step")
    def step(ws, x):
        value, grads = jax.value_and_grad(loss)(ws, x)
        return ws - 0.1 * grads, value

    return step


ARGS = (jax.random.normal(jax.random.PRNGKey(0), (6, 16, 16)) / 4, jax.random.normal(jax.random.PRNGKey(1), (8, 16)))


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_cached_policy_is_applied_by_the_decorator(tmp_path):
    cache_path = str(tmp_path / "c.db")
    step = make(cache_path)
    default_temp = step.lower(*ARGS).compile().memory_analysis().temp_size_in_bytes
    lookup = step.autotune.config_for(*ARGS)
    sites = step.autotune.sites(*ARGS)
    [site] = [s for s in sites if s.policy is not None]
    at.Cache(cache_path).put(
        at.CacheEntry(
            function_key="tests:remat_step",
            fingerprint=lookup.fingerprint,
            signature=lookup.signature,
            device=at.program._keys.device_info(),
            config={site.id: {"repr": "scan", "unroll": 1, "policy": "everything"}},
            sites={s.id: {"kind": s.kind, "length": s.length, "has_ys": s.has_ys, "policy": s.policy} for s in sites},
            measurements={"run_s": 1e-6},
            objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
            cost=1.0,
        )
    )
    fresh = make(cache_path)
    assert fresh.autotune.config_for(*ARGS).source == "cache"
    assert fresh.lower(*ARGS).compile().memory_analysis().temp_size_in_bytes > default_temp
    got, want = fresh(*ARGS), jax.jit(fresh.autotune.fun)(*ARGS)
    assert compare_outputs(want, got) is None
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
