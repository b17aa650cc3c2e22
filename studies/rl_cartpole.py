"""A policy-gradient update on a pure-JAX cart-pole: three nested loops.

Where the pattern comes from: end-to-end-jitted RL (PureJaxRL, gymnax, Brax
training loops). One call of ``update`` is one training iteration:

    for epoch in range(EPOCHS):                      # at.loop "epochs"
        rollout = lax.scan(env_step, ..., T)         # rollout over time, Gumbel noise as xs
            env_step: for _ in range(SUBSTEPS):      # lax.fori_loop: physics substeps
                          euler(cartpole)            #   (action repeat / frame skip)
        params -= lr * grad(reinforce_loss)(rollout)

The environment is the classic cart-pole (Barto, Sutton & Anderson 1983; the
gym/gymnax equations) with semi-implicit Euler steps and a batch of 64
environments; the policy is a two-layer MLP over the two push actions, sampled
by Gumbel-max. Rollouts are short (T=10), as in Brax's PPO (``unroll_length``
of 5-20 with many environments). The gradient is taken of the log-likelihood of
the stored actions, so it needs no differentiation through the rollout loop.

Sizes are small on purpose: with every loop a Python ``for``, XLA's CPU compile
of this program grows very fast with T, which is exactly the pathology the tuner
must see, but the benchmark measures every config (measured:
docs/results/design-figures.md#cart-poles-compile-with-every-loop-unrolled)."""

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

EPOCHS, T, SUBSTEPS, N_ENVS, HIDDEN = 4, 10, 2, 64, 32
LR, GAMMA = 1e-2, 0.99
# One call per training iteration; a training run does about a thousand.
EXPECTED_CALLS = 1_000

GRAVITY, M_CART, M_POLE, HALF_LEN, FORCE_MAG, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL_MASS = M_CART + M_POLE
POLE_MASS_LEN = M_POLE * HALF_LEN


def cartpole_dynamics(s, force):
    x, x_dot, theta, theta_dot = s[..., 0], s[..., 1], s[..., 2], s[..., 3]
    cos, sin = jnp.cos(theta), jnp.sin(theta)
    temp = (force + POLE_MASS_LEN * theta_dot**2 * sin) / TOTAL_MASS
    theta_acc = (GRAVITY * sin - cos * temp) / (HALF_LEN * (4.0 / 3.0 - M_POLE * cos**2 / TOTAL_MASS))
    x_acc = temp - POLE_MASS_LEN * theta_acc * cos / TOTAL_MASS
    dt = TAU / SUBSTEPS
    x_dot = x_dot + dt * x_acc
    theta_dot = theta_dot + dt * theta_acc
    return jnp.stack([x + dt * x_dot, x_dot, theta + dt * theta_dot, theta_dot], axis=-1)


def policy(params, obs):
    """Logits of the two actions (push left, push right)."""
    h = jnp.tanh(obs @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def init(seed: int = 0):
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(seed), 4)
    params = {
        "w1": jax.random.normal(k1, (4, HIDDEN)) * 0.5,
        "b1": jnp.zeros(HIDDEN),
        "w2": jax.random.normal(k2, (HIDDEN, 2)) * 0.1,
        "b2": jnp.zeros(2),
    }
    state = jax.random.uniform(k3, (N_ENVS, 4), minval=-0.05, maxval=0.05)
    # Gumbel noise for sampling actions, drawn outside (each call gets a fresh block of it).
    noise = jax.random.gumbel(k4, (EPOCHS, T, N_ENVS, 2))
    return params, state, noise


def rollout(params, state, noise):
    def env_step(carry, noise):
        s = carry
        action = jnp.argmax(policy(params, s) + noise, axis=-1)  # Gumbel-max sampling
        force = jnp.where(action == 1, FORCE_MAG, -FORCE_MAG)
        s_next = lax.fori_loop(0, SUBSTEPS, lambda _, s: cartpole_dynamics(s, force), s)
        done = (jnp.abs(s_next[:, 0]) > 2.4) | (jnp.abs(s_next[:, 2]) > 0.2095)
        reward = 1.0 - done.astype(s.dtype)
        s_next = jnp.where(done[:, None], jnp.zeros_like(s_next), s_next)  # reset to upright
        return s_next, (s, action, reward)

    return lax.scan(env_step, state, noise)


def reinforce_loss(params, obs, actions, returns):
    logp_all = jax.nn.log_softmax(policy(params, obs), axis=-1)
    logp = jnp.take_along_axis(logp_all, actions[..., None], axis=-1)[..., 0]
    adv = (returns - returns.mean()) / (returns.std() + 1e-6)
    return -jnp.mean(logp * adv)


@at.autotuned(expected_calls=EXPECTED_CALLS)
def update(params, state, noise):
    def epoch(carry, noise):
        params, state = carry
        state, (obs, actions, rewards) = rollout(params, state, noise)
        # Reward-to-go by a cumulative sum (the lambda-return study does the reverse scan).
        discounts = GAMMA ** jnp.arange(T, dtype=rewards.dtype)[:, None]
        returns = jnp.cumsum((rewards * discounts)[::-1], axis=0)[::-1] / discounts
        grads = jax.grad(reinforce_loss)(params, obs, actions, returns)
        params = jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)
        return (params, state), None

    (params, state), _ = at.loop(epoch, (params, state), noise, name="epochs")
    return params, state


def examples():
    return [(update, init())]
