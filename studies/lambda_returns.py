"""Generalised advantage estimation (lambda-returns) over a batch of trajectories.

Where the pattern comes from: the advantage computation of PPO/A2C in
PureJaxRL, CleanRL-JAX, rlax (``truncated_generalized_advantage_estimation``,
``lambda_returns``): a *reverse* ``lax.scan`` over time computes
A_t = delta_t + gamma*lambda*(1-done_t)*A_{t+1} for every environment at once.
The same update also keeps the logging statistics of PureJaxRL: a forward scan
accumulating per-episode returns with resets at episode ends. Both bodies are a
handful of elementwise ops on a (batch,) vector, so loop overhead is most of
the cost, and unrolling is the classic fix.

Sites: the reverse GAE scan and the forward episode-return scan, 32 steps each.
"""

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

T, N_ENVS, GAMMA, LAMBDA = 32, 256, 0.99, 0.95
# Called once per PPO update; a training run does tens of thousands.
EXPECTED_CALLS = 20_000


@at.autotuned(expected_calls=EXPECTED_CALLS)
def advantages(rewards, values, dones, last_value, running_return):
    next_values = jnp.concatenate([values[1:], last_value[None]], axis=0)
    deltas = rewards + GAMMA * next_values * (1.0 - dones) - values

    def gae_step(adv, xs):
        delta, done = xs
        adv = delta + GAMMA * LAMBDA * (1.0 - done) * adv
        return adv, adv

    _, adv = lax.scan(gae_step, jnp.zeros_like(last_value), (deltas, dones), reverse=True)
    targets = adv + values

    def episode_step(ret, xs):
        reward, done = xs
        ret = ret + reward
        finished = ret * done
        return ret * (1.0 - done), finished

    running_return, finished = lax.scan(episode_step, running_return, (rewards, dones))
    mean_finished = finished.sum() / jnp.maximum(dones.sum(), 1.0)
    return adv, targets, running_return, mean_finished


def init(seed: int = 0):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    rewards = jax.random.normal(k1, (T, N_ENVS))
    values = jax.random.normal(k2, (T, N_ENVS))
    dones = (jax.random.uniform(k3, (T, N_ENVS)) < 0.02).astype(jnp.float32)
    return rewards, values, dones, jnp.zeros(N_ENVS), jnp.zeros(N_ENVS)


def examples():
    return [(advantages, init())]
