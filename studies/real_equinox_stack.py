"""A deep residual MLP in Equinox: layers stacked with ``eqx.filter_vmap``, applied with ``lax.scan``.

Where the pattern comes from: Equinox's "compile once for N layers" recipe (its FAQ and
the ``eqx.nn`` docs on scanning over layers). The layers are built by
``eqx.filter_vmap(make_layer)(keys)``, so every weight gains a leading layer axis;
``eqx.partition`` splits the arrays from the static parts, ``lax.scan`` walks the stacked
arrays and ``eqx.combine`` rebuilds one layer per step. The same stack is tuned twice: as
a plain function under ``eqx.filter_value_and_grad`` (a training step's gradient), and as
an ``eqx.Module`` method (inference, ``self`` traced). Eight layers of ``x + W2·gelu(W1·x)``
on a batch of 32: a short, latency-bound loop.

Needs the ``examples`` extra (``pip install 'jax-autotune[examples]'``: equinox).

Sites: ``loss_and_grad`` has the forward scan over 8 layers and the backward scan ``grad``
derives from it; ``ResidualStack.predict`` has the forward scan only.
"""

import jax
import jax.numpy as jnp
from jax import lax

try:
    import equinox as eqx
except ImportError as exc:  # say which extra brings it
    raise ImportError(
        f"{__name__} needs equinox ({exc}), from the examples extra: pip install 'jax-autotune[examples]'"
    ) from exc

import autotune as at

LAYERS, WIDTH, HIDDEN, BATCH = 8, 32, 64, 32
# A training run calls the gradient many times; a served model calls predict more often still.
TRAIN_CALLS, SERVE_CALLS = 1_000, 10_000


class Layer(eqx.Module):
    """One residual MLP block."""

    up: eqx.nn.Linear
    down: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.up = eqx.nn.Linear(WIDTH, HIDDEN, key=k1)
        self.down = eqx.nn.Linear(HIDDEN, WIDTH, key=k2)

    def __call__(self, x):
        return x + self.down(jax.nn.gelu(self.up(x)))


def make_stack(key):
    """``LAYERS`` layers as one ``Layer`` whose arrays have a leading layer axis."""
    return eqx.filter_vmap(Layer)(jax.random.split(key, LAYERS))


def apply_stack(stack, x):
    """One sample through every layer of the stack: a ``lax.scan`` over the layer axis."""
    params, static = eqx.partition(stack, eqx.is_array)

    def step(h, layer_params):
        return eqx.combine(layer_params, static)(h), None

    out, _ = lax.scan(step, x, params)
    return out


def loss(stack, xs, ys):
    return jnp.mean((jax.vmap(apply_stack, in_axes=(None, 0))(stack, xs) - ys) ** 2)


@at.autotuned(expected_calls=TRAIN_CALLS)
def loss_and_grad(stack, xs, ys):
    return eqx.filter_value_and_grad(loss)(stack, xs, ys)


class ResidualStack(eqx.Module):
    """The stacked layers as a model: ``predict`` is an autotuned method (``self`` is traced)."""

    layers: Layer

    def __init__(self, key):
        self.layers = make_stack(key)

    @at.autotuned(expected_calls=SERVE_CALLS)
    def predict(self, xs):
        return jax.vmap(apply_stack, in_axes=(None, 0))(self.layers, xs)


def init(seed: int = 0):
    km, kx = jax.random.split(jax.random.PRNGKey(seed))
    model = ResidualStack(km)
    xs = jax.random.normal(kx, (BATCH, WIDTH))
    ys = jnp.tanh(xs[:, ::-1])
    return model, xs, ys


def examples():
    model, xs, ys = init()
    return [(loss_and_grad, (model.layers, xs, ys)), (model.predict, (xs,))]
