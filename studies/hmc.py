"""Hamiltonian Monte Carlo for a Bayesian logistic regression: leapfrog inside a sample scan.

Where the pattern comes from: HMC kernels as written in BlackJAX, NumPyro and
TFP-on-JAX: each transition draws a momentum, runs L leapfrog steps (a
``lax.fori_loop`` over gradient evaluations of the log density), and accepts
or rejects with a Metropolis test; a ``lax.scan`` over transitions draws a
chunk of samples per call. The target is the textbook Bayesian logistic
regression (German-credit-sized: 24 features; 500 rows here) with a Gaussian prior,
run as 4 chains with ``vmap``.

Sites: the sample scan (8 transitions) and the leapfrog fori_loop (8 steps) inside it.
"""

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

N_DATA, N_FEATURES, CHAINS, SAMPLES, LEAPFROG, STEP = 500, 24, 4, 8, 8, 0.01
# Samples are drawn in chunks of 8: 1000 chunks is 8000 draws per chain.
EXPECTED_CALLS = 1_000


def make_data(seed: int = 0):
    kx, kw, ky = jax.random.split(jax.random.PRNGKey(seed), 3)
    X = jax.random.normal(kx, (N_DATA, N_FEATURES))
    w_true = jax.random.normal(kw, (N_FEATURES,))
    y = (jax.random.uniform(ky, (N_DATA,)) < jax.nn.sigmoid(X @ w_true)).astype(jnp.float32)
    return X, y


def log_density(w, X, y):
    logits = X @ w
    return jnp.sum(y * logits - jnp.logaddexp(0.0, logits)) - 0.5 * jnp.sum(w * w)


def hmc_chain(w, key, X, y):
    grad_fn = jax.grad(log_density)

    def transition(carry, draws):
        w, logp = carry
        p0, log_u = draws

        def leapfrog(_, state):
            q, p = state
            p = p + 0.5 * STEP * grad_fn(q, X, y)
            q = q + STEP * p
            p = p + 0.5 * STEP * grad_fn(q, X, y)
            return q, p

        q, p = lax.fori_loop(0, LEAPFROG, leapfrog, (w, p0))
        logp_new = log_density(q, X, y)
        log_accept = logp_new - 0.5 * jnp.sum(p * p) - (logp - 0.5 * jnp.sum(p0 * p0))
        accept = log_u < log_accept
        w, logp = jnp.where(accept, q, w), jnp.where(accept, logp_new, logp)
        return (w, logp), w

    # The chunk's random draws are made up front (one vectorised RNG call, not one per step).
    k_mom, k_acc = jax.random.split(key)
    draws = (jax.random.normal(k_mom, (SAMPLES,) + w.shape), jnp.log(jax.random.uniform(k_acc, (SAMPLES,))))
    (w, _), samples = lax.scan(transition, (w, log_density(w, X, y)), draws)
    return w, samples


@at.autotuned(expected_calls=EXPECTED_CALLS)
def sample_chunk(w, keys, X, y):
    return jax.vmap(hmc_chain, in_axes=(0, 0, None, None))(w, keys, X, y)


def init(seed: int = 0):
    X, y = make_data(seed)
    w = jnp.zeros((CHAINS, N_FEATURES))
    keys = jax.random.split(jax.random.PRNGKey(seed + 1), CHAINS)
    return w, keys, X, y


def examples():
    return [(sample_chunk, init())]
