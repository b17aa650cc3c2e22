"""An Optax training loop: AdamW with global-norm clipping on a small MLP, epochs in a scan, minibatches in a fori_loop.

Where the pattern comes from: the Optax quick-start loop moved inside ``jit`` so a whole
chunk of training is one compiled call (as in the JAX/Flax "training loop with
``lax.scan``" recipes): a ``lax.scan`` over epochs (it stacks the epoch losses) and,
inside, a ``lax.fori_loop`` over minibatches that slices the data, takes
``jax.value_and_grad`` of the loss, and applies
``optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(...))``. The step is an MLP's
forward and backward pass plus the optimiser's tree of element-wise updates: many small
fusions per step, so unrolling trades compile time for fewer loop iterations.

Needs the ``examples`` extra (``pip install 'jax-autotune[examples]'``: optax).

Sites: the epoch scan (4 epochs) and the minibatch fori_loop (8 minibatches) inside it.
"""

import jax
import jax.numpy as jnp
from jax import lax

try:
    import optax
except ImportError as exc:  # say which extra brings it
    raise ImportError(
        f"{__name__} needs optax ({exc}), from the examples extra: pip install 'jax-autotune[examples]'"
    ) from exc

import autotune as at

D_IN, HIDDEN, BATCH, MINIBATCHES, EPOCHS = 8, 32, 32, 8, 4
# A training job calls the compiled chunk (4 epochs) a hundred times: compile time matters.
EXPECTED_CALLS = 100

OPTIMIZER = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(3e-3, weight_decay=1e-4))


def mlp(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return (h @ params["w2"] + params["b2"])[..., 0]


def loss(params, x, y):
    return jnp.mean((mlp(params, x) - y) ** 2)


@at.autotuned(expected_calls=EXPECTED_CALLS)
def train_chunk(params, opt_state, xs, ys):
    def minibatch(i, carry):
        params, opt_state, total = carry
        x = lax.dynamic_slice_in_dim(xs, i * BATCH, BATCH)
        y = lax.dynamic_slice_in_dim(ys, i * BATCH, BATCH)
        value, grads = jax.value_and_grad(loss)(params, x, y)
        updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, total + value

    def epoch(carry, _):
        params, opt_state = carry
        params, opt_state, total = lax.fori_loop(0, MINIBATCHES, minibatch, (params, opt_state, 0.0))
        return (params, opt_state), total / MINIBATCHES

    (params, opt_state), losses = lax.scan(epoch, (params, opt_state), None, length=EPOCHS)
    return params, opt_state, losses


def init(seed: int = 0):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    params = {
        "w1": jax.random.normal(k1, (D_IN, HIDDEN)) / jnp.sqrt(D_IN),
        "b1": jnp.zeros(HIDDEN),
        "w2": jax.random.normal(k2, (HIDDEN, 1)) / jnp.sqrt(HIDDEN),
        "b2": jnp.zeros(1),
    }
    xs = jax.random.normal(k3, (MINIBATCHES * BATCH, D_IN))
    ys = jnp.sin(xs.sum(axis=-1))
    return params, OPTIMIZER.init(params), xs, ys


def examples():
    return [(train_chunk, init())]
