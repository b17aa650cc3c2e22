"""BlackJAX HMC on a Bayesian logistic regression: the library's leapfrog fori_loop inside a sample scan.

Where the pattern comes from: BlackJAX's documented sampling loop. ``blackjax.hmc`` builds
the kernel; its trajectory integrates ``num_integration_steps`` leapfrog steps in a
``lax.fori_loop`` (``blackjax/mcmc/trajectory.py``), each a gradient of the log density;
the user's ``lax.scan`` over ``kernel.step`` draws a chunk of samples; ``vmap`` runs four
chains. Each leapfrog step is a matrix-vector product and its transpose: small enough
that loop overhead and cross-step fusion matter.

Needs the ``examples`` extra (``pip install 'jax-autotune[examples]'``: blackjax).

Sites: this file's sample scan (8 transitions) and BlackJAX's leapfrog fori_loop (8 steps) inside it.
"""

import jax
import jax.numpy as jnp
from jax import lax

try:
    import blackjax
except ImportError as exc:  # say which extra brings it
    raise ImportError(
        f"{__name__} needs blackjax ({exc}), from the examples extra: pip install 'jax-autotune[examples]'"
    ) from exc

import autotune as at

N_DATA, N_FEATURES, CHAINS, SAMPLES, LEAPFROG, STEP = 200, 8, 4, 8, 8, 0.05
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


@at.autotuned(expected_calls=EXPECTED_CALLS)
def sample_chunk(positions, keys, X, y):
    kernel = blackjax.hmc(
        lambda w: log_density(w, X, y),
        step_size=STEP,
        inverse_mass_matrix=jnp.ones(N_FEATURES),
        num_integration_steps=LEAPFROG,
    )

    def chain(position, key):
        def transition(state, k):
            state, info = kernel.step(k, state)
            return state, (state.position, info.is_accepted)

        _, (samples, accepted) = lax.scan(transition, kernel.init(position), jax.random.split(key, SAMPLES))
        return samples, accepted

    return jax.vmap(chain)(positions, keys)


def init(seed: int = 0):
    X, y = make_data(seed)
    positions = jnp.zeros((CHAINS, N_FEATURES))
    keys = jax.random.split(jax.random.PRNGKey(seed + 1), CHAINS)
    return positions, keys, X, y


def examples():
    return [(sample_chunk, init())]
