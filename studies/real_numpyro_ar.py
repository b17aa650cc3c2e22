"""The log joint density and its gradient of a NumPyro latent AR(1) model written with ``contrib.control_flow.scan``.

Where the pattern comes from: NumPyro's time-series examples (stochastic volatility,
local-level and AR models) write the latent recursion with
``numpyro.contrib.control_flow.scan``, which runs the model's transition under NumPyro's
effect handlers inside one ``lax.scan`` (``numpyro/contrib/control_flow/scan.py``).
What NUTS evaluates at every leapfrog step is ``jax.value_and_grad`` of the log joint
(``numpyro.infer.util.log_density``): a forward scan over time and the backward scan
that ``grad`` derives from it. The step is a couple of Normal log-densities on scalars:
pure loop overhead, the case where unrolling pays most and full unrolling compiles
fastest to the limit.

Needs the ``examples`` extra (``pip install 'jax-autotune[examples]'``: numpyro).

Sites: NumPyro's forward scan over T=32 steps and its derived backward scan (from ``grad``).
"""

import jax
import jax.numpy as jnp

try:
    import numpyro
    import numpyro.distributions as dist
    from numpyro.contrib.control_flow import scan
    from numpyro.infer.util import log_density
except ImportError as exc:  # say which extra brings it
    raise ImportError(
        f"{__name__} needs numpyro ({exc}), from the examples extra: pip install 'jax-autotune[examples]'"
    ) from exc

import autotune as at

T = 32
# NUTS calls the gradient once per leapfrog step: hundreds of thousands of times per fit.
EXPECTED_CALLS = 100_000


def model(y):
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    phi = numpyro.sample("phi", dist.Uniform(-1.0, 1.0))
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))

    def transition(h, y_t):
        h = numpyro.sample("h", dist.Normal(phi * h, tau))
        numpyro.sample("y", dist.Normal(h, sigma), obs=y_t)
        return h, None

    scan(transition, 0.0, y)


def log_joint(params, y):
    return log_density(model, (y,), {}, params)[0]


@at.autotuned(expected_calls=EXPECTED_CALLS)
def log_joint_and_grad(params, y):
    return jax.value_and_grad(log_joint)(params, y)


def init(seed: int = 0):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    y = jnp.sin(jnp.arange(T) / 4.0) + 0.1 * jax.random.normal(k1, (T,))
    params = {
        "sigma": jnp.array(0.5),
        "phi": jnp.array(0.3),
        "tau": jnp.array(0.7),
        "h": 0.1 * jax.random.normal(k2, (T,)),
    }
    return params, y


def examples():
    return [(log_joint_and_grad, init())]
