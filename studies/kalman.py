"""Kalman filter and Rauch-Tung-Striebel smoother for a linear-Gaussian state-space model.

Where the pattern comes from: dynamax / tfp.sts / the "Bayesian Filtering and
Smoothing" (Sarkka) reference code: a forward ``lax.scan`` runs the filter
(predict, then update with a linear solve) and returns the filtered means and
covariances as ``ys``; a reverse ``lax.scan`` runs the RTS smoother over them.
Used inside EM or marginal-likelihood fitting, so it is called many times per
compile. Whether to unroll is not obvious: each step is a few small matmuls and
a Cholesky solve (cheap, latency-bound, so unrolling can help), but the bodies
are large and the trip count long (so unrolled compiles grow fast).

Sites: the forward filter scan and the reverse smoother scan, 32 steps each (31 for the smoother).
"""

import jax
import jax.numpy as jnp
from jax import lax

import autotune as at

T, STATE, OBS = 32, 6, 3
# One filter+smoother pass per EM iteration, over many series.
EXPECTED_CALLS = 2_000


def model(seed: int = 0):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    q, _ = jnp.linalg.qr(jax.random.normal(k1, (STATE, STATE)))
    F = 0.95 * q  # a stable rotation-like transition
    H = jax.random.normal(k2, (OBS, STATE)) / jnp.sqrt(STATE)
    return {
        "F": F,
        "H": H,
        "Q": 0.1 * jnp.eye(STATE),
        "R": 0.5 * jnp.eye(OBS),
        "m0": jnp.zeros(STATE),
        "P0": jnp.eye(STATE),
    }


def _solve_psd(S, B):
    """S^-1 B for a symmetric positive-definite S (Cholesky)."""
    L = jnp.linalg.cholesky(S)
    return jax.scipy.linalg.cho_solve((L, True), B)


@at.autotuned(expected_calls=EXPECTED_CALLS)
def smooth(params, ys):
    F, H, Q, R = params["F"], params["H"], params["Q"], params["R"]

    def filter_step(carry, y):
        m, P, ll = carry
        m_pred, P_pred = F @ m, F @ P @ F.T + Q
        S = H @ P_pred @ H.T + R
        K = _solve_psd(S, H @ P_pred).T
        resid = y - H @ m_pred
        m_new = m_pred + K @ resid
        P_new = P_pred - K @ S @ K.T
        ll = ll - 0.5 * (resid @ _solve_psd(S, resid) + jnp.linalg.slogdet(S)[1])
        return (m_new, P_new, ll), (m_new, P_new)

    (_, _, loglik), (ms, Ps) = lax.scan(filter_step, (params["m0"], params["P0"], 0.0), ys)

    def smoother_step(carry, filtered):
        m_next, P_next = carry
        m, P = filtered
        m_pred, P_pred = F @ m, F @ P @ F.T + Q
        G = _solve_psd(P_pred, F @ P).T
        m_s = m + G @ (m_next - m_pred)
        P_s = P + G @ (P_next - P_pred) @ G.T
        return (m_s, P_s), (m_s, P_s)

    last = (ms[-1], Ps[-1])
    _, (ms_s, Ps_s) = lax.scan(smoother_step, last, (ms[:-1], Ps[:-1]), reverse=True)
    return loglik, jnp.concatenate([ms_s, ms[-1:]]), jnp.concatenate([Ps_s, Ps[-1:]])


def init(seed: int = 0):
    params = model(seed)
    ys = jax.random.normal(jax.random.PRNGKey(seed + 1), (T, OBS))
    return params, ys


def examples():
    return [(smooth, init())]
