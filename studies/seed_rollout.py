"""The seed workload: a nested training setup (the article that started this project).

    for a in range(num_train_steps):          # Python, outside jit
        for b in range(num_env_steps):        # Python, outside jit
            params, state = execute(params, state)

    @jit
    def execute(params, state):
        for c in range(ALGO_ITERS):           # the loop people flip between for and scan
            rollout = lax.scan(step, ..., length=ROLLOUT_LEN)
            params = update(params, rollout)

The middle ``c`` loop is an ``at.loop`` (so a Python ``for`` is one of its choices),
the inner rollout a ``lax.scan`` over a small MLP policy acting in linear dynamics:
real matrix work per step, which XLA cannot fold away.
"""

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

ALGO_ITERS = 5
ROLLOUT_LEN = 16
BATCH = 32
HIDDEN = 32
EXPECTED_CALLS = 1_000  # num_train_steps * num_env_steps of a short run


def init(seed: int = 0):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    params = {
        "w1": jax.random.normal(k1, (HIDDEN, HIDDEN)) / jnp.sqrt(HIDDEN),
        "w2": jax.random.normal(k2, (HIDDEN, HIDDEN)) / jnp.sqrt(HIDDEN),
    }
    state = jax.random.normal(k3, (BATCH, HIDDEN))
    return params, state


def rollout_step(carry, _):
    params, state = carry
    action = jnp.tanh(state @ params["w1"])
    state = 0.95 * state + 0.1 * jnp.tanh(action @ params["w2"])
    reward = -jnp.mean(state**2)
    return (params, state), reward


@at.autotuned(expected_calls=EXPECTED_CALLS)
def execute(params, state):
    def algo_iter(carry, _):
        params, state = carry
        (_, state), rewards = lax.scan(rollout_step, (params, state), None, length=ROLLOUT_LEN)
        # A cheap "policy update" so each algo iteration depends on the previous one.
        grad_w1 = state.T @ jnp.tanh(state @ params["w1"]) / BATCH
        params = {"w1": params["w1"] - 1e-3 * grad_w1 * jnp.mean(rewards), "w2": params["w2"]}
        return (params, state), None

    (params, state), _ = at.loop(algo_iter, (params, state), length=ALGO_ITERS, name="algo_iters")
    return params, state


def examples():
    return [(execute, init())]


def train(num_train_steps: int = 4, num_env_steps: int = 250, seed: int = 0):
    """The article's outer Python loops around the jitted ``execute``."""
    params, state = init(seed)
    for _ in range(num_train_steps):
        for _ in range(num_env_steps):
            params, state = execute(params, state)
    return jax.block_until_ready((params, state))
