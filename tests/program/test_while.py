"""while_loop sites: a guarded unroll gives the original loop's results on real solver loops.

A while site has kind "while" and no static length. Its config
``{"repr": "while", "unroll": k, "guard": "select" | "cond"}`` runs the body up to k
times per iteration, each extra application guarded by the loop's predicate.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import autotune as at
from autotune.program._space import Space

UNROLLS = [1, 2, 3, 4, 8]
GUARDS = ["select", "cond"]


def leaves_equal(got, want):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def only_while(fn, *args):
    sites = [s for s in at.sites(fn, *args) if s.kind == "while"]
    assert len(sites) == 1, sites
    return sites[0]


def configured(fn, site, k, guard):
    return at.with_config(fn, {site.id: {"repr": "while", "unroll": k, "guard": guard}})


# --- two real solver loops ------------------------------------------------------------------------


def babylonian_sqrt(a, tol=1e-6):
    """Newton's iteration for sqrt(a) until the step is below tol (or 100 steps)."""

    def cond(state):
        x, dx, n = state
        return (jnp.abs(dx) > tol * jnp.abs(x)) & (n < 100)

    def body(state):
        x, _, n = state
        new = 0.5 * (x + a / x)
        return new, new - x, n + 1

    x, _, n = lax.while_loop(cond, body, (jnp.maximum(a, 1.0), jnp.ones_like(a), 0))
    return x, n


def adaptive_heun(y0, t_end, tol=1e-4):
    """y' = -2y + sin(3t) with an embedded Heun/Euler pair: accept or reject each step
    by its error estimate and adapt the step size, until t reaches t_end."""

    def f(t, y):
        return -2.0 * y + jnp.sin(3.0 * t)

    def cond(state):
        return state[0] < t_end

    def body(state):
        t, y, h, accepted, rejected = state
        h = jnp.minimum(h, t_end - t)
        k1 = f(t, y)
        euler = y + h * k1
        k2 = f(t + h, euler)
        heun = y + 0.5 * h * (k1 + k2)
        err = jnp.max(jnp.abs(heun - euler)) + 1e-12
        ok = err <= tol
        scale = jnp.clip(0.9 * jnp.sqrt(tol / err), 0.2, 5.0)
        return (
            jnp.where(ok, t + h, t),
            jnp.where(ok, heun, y),
            h * scale,
            accepted + ok.astype(jnp.int32),
            rejected + (~ok).astype(jnp.int32),
        )

    state = (jnp.float32(0.0), y0, jnp.float32(0.5), jnp.int32(0), jnp.int32(0))
    return lax.while_loop(cond, body, state)


A = jnp.float32(7.0)
AS = jnp.array([0.01, 2.0, 9.0, 1e4, 123.0], jnp.float32)  # very different trip counts
Y0 = jnp.array([1.0, -0.5, 2.0], jnp.float32)
T_END = jnp.float32(3.0)
SOLVERS = {
    "newton": (babylonian_sqrt, (A,)),
    "integrator": (adaptive_heun, (Y0, T_END)),
}


def test_a_while_loop_is_a_site_without_a_length():
    site = only_while(babylonian_sqrt, A)
    assert (site.kind, site.form, site.length, site.has_ys, site.num_carry) == ("while", "while", None, False, 3)
    assert site.default == at.SiteChoice("while", 1) and site.id.startswith("while@test_while.py:")
    assert site.to_dict()["length"] is None and site.to_dict()["kind"] == "while"
    n = int(babylonian_sqrt(A)[1])
    assert 3 < n < 100  # the loop really iterates a data-dependent number of times


@pytest.mark.parametrize("guard", GUARDS)
@pytest.mark.parametrize("k", UNROLLS)
@pytest.mark.parametrize("name", list(SOLVERS))
@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_unrolled_solver_is_bit_identical_under_jit_and_eagerly(name, k, guard):
    fn, args = SOLVERS[name]
    site = only_while(fn, *args)
    want = jax.jit(fn)(*args)
    g = configured(fn, site, k, guard)
    leaves_equal(jax.jit(g)(*args), want)
    if k in (1, 3):
        leaves_equal(g(*args), fn(*args))


@pytest.mark.parametrize("guard", GUARDS)
@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_vmap_with_batched_predicates(k, guard):
    site = only_while(babylonian_sqrt, A)
    g = configured(babylonian_sqrt, site, k, guard)
    want = jax.jit(jax.vmap(babylonian_sqrt))(AS)
    assert len(set(np.asarray(want[1]).tolist())) > 2  # each lane stops at its own step
    leaves_equal(jax.jit(jax.vmap(g))(AS), want)
    y0s = jnp.stack([Y0, -Y0, 2 * Y0])
    site = only_while(adaptive_heun, Y0, T_END)
    h = configured(adaptive_heun, site, k, guard)
    leaves_equal(
        jax.jit(jax.vmap(h, in_axes=(0, None)))(y0s, T_END),
        jax.jit(jax.vmap(adaptive_heun, in_axes=(0, None)))(y0s, T_END),
    )


@pytest.mark.parametrize("guard", GUARDS)
@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_forward_mode_derivatives(k, guard):
    site = only_while(babylonian_sqrt, A)
    g = configured(babylonian_sqrt, site, k, guard)

    def root(fn):
        return lambda a: fn(a)[0]

    leaves_equal(
        jax.jit(lambda a: jax.jvp(root(g), (a,), (jnp.float32(1.0),)))(A),
        jax.jit(lambda a: jax.jvp(root(babylonian_sqrt), (a,), (jnp.float32(1.0),)))(A),
    )
    got = jax.jit(jax.jacfwd(lambda v: jax.vmap(root(g))(v)))(AS)
    want = jax.jit(jax.jacfwd(lambda v: jax.vmap(root(babylonian_sqrt))(v)))(AS)
    leaves_equal(got, want)
    np.testing.assert_allclose(np.diag(want), 0.5 / np.sqrt(AS), rtol=1e-3)  # d sqrt(a)/da

    # The integrator's Jacobian sums nearly cancelling terms, and XLA fuses the unrolled
    # body differently, so the last bits may differ: it must agree within float32 rounding
    # (the correctness guard allows 1000 ulps), while its primal result is bit-identical.
    site = only_while(adaptive_heun, Y0, T_END)
    h = configured(adaptive_heun, site, k, guard)
    got = jax.jit(jax.jacfwd(lambda y: h(y, T_END)[1]))(Y0)
    want = jax.jit(jax.jacfwd(lambda y: adaptive_heun(y, T_END)[1]))(Y0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    leaves_equal(
        jax.jit(lambda y: jax.jvp(lambda v: h(v, T_END), (y,), (jnp.ones_like(y),))[0])(Y0),
        jax.jit(adaptive_heun)(Y0, T_END),
    )


def test_reverse_mode_is_an_error_in_jax_itself():
    """JAX cannot reverse-differentiate a while_loop; the rewrite keeps that error."""
    site = only_while(babylonian_sqrt, A)
    g = configured(babylonian_sqrt, site, 4, "select")
    for fn in (babylonian_sqrt, g):
        with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
            jax.grad(lambda a, fn=fn: fn(a)[0])(A)


# --- what the compiled program looks like -------------------------------------------------------


def lowered(fn, *args):
    return jax.jit(fn).lower(*args).as_text()


@pytest.mark.parametrize("k", [2, 4])
def test_select_guard_emits_k_bodies_in_one_loop(k):
    site = only_while(adaptive_heun, Y0, T_END)
    base = lowered(adaptive_heun, Y0, T_END)
    text = lowered(configured(adaptive_heun, site, k, "select"), Y0, T_END)
    assert base.count("stablehlo.sine") == 2  # f is evaluated twice per step
    assert text.count("stablehlo.sine") == 2 * k
    assert text.count("stablehlo.while") == base.count("stablehlo.while") == 1
    assert text.count("stablehlo.case") == 0


@pytest.mark.parametrize("k", [2, 4])
def test_cond_guard_skips_with_conditionals(k):
    site = only_while(adaptive_heun, Y0, T_END)
    text = lowered(configured(adaptive_heun, site, k, "cond"), Y0, T_END)
    assert text.count("stablehlo.sine") == 2 * k
    assert text.count("stablehlo.case") == k - 1  # one lax.cond per extra application
    assert text.count("stablehlo.while") == 1


def test_unroll_one_is_the_original_loop():
    site = only_while(babylonian_sqrt, A)
    for cfg in ({site.id: {"repr": "while"}}, {site.id: {"repr": "while", "unroll": 1, "guard": "cond"}}, {}):
        g = at.with_config(babylonian_sqrt, cfg)
        assert jax.jit(g).lower(A).as_text() == jax.jit(babylonian_sqrt).lower(A).as_text()


# --- nesting ---------------------------------------------------------------------------------------


def scan_in_while(x):
    def body(state):
        i, v = state
        v = lax.scan(lambda c, _: (jnp.sin(c) * 0.9 + 0.1, None), v, None, length=4)[0]
        return i + 1, v

    return lax.while_loop(lambda s: s[0] < 5, body, (0, x))[1]


def while_in_scan(x):
    def body(c, _):
        c = lax.while_loop(lambda d: d.sum() < 40.0, lambda d: d * 1.5 + 0.25, c)
        return c * 0.1, c.sum()

    return lax.scan(body, x, None, length=3)


def loop_in_while(x):
    def body(state):
        i, v = state
        v = at.loop(lambda c, _: (jnp.tanh(c) + 0.2, None), v, length=3, name="inner")[0]
        return i + 1, v

    return lax.while_loop(lambda s: s[0] < 4, body, (0, x))[1]


X = jnp.linspace(0.1, 1.0, 3, dtype=jnp.float32)
NESTED = {"scan_in_while": scan_in_while, "while_in_scan": while_in_scan, "loop_in_while": loop_in_while}


@pytest.mark.parametrize("name", list(NESTED))
def test_nested_sites_take_every_combination(name):
    fn = NESTED[name]
    sites = at.sites(fn, X)
    (loop,) = [s for s in sites if s.kind == "while"]
    (other,) = [s for s in sites if s.kind != "while"]
    if name == "while_in_scan":
        assert loop.parent == other.id and loop.depth == 1
    else:
        assert other.parent == loop.id and other.depth == 1
    want = jax.jit(fn)(X)
    for guard in GUARDS:
        for inner in ({"repr": "for"}, {"repr": "scan", "unroll": 2}, None):
            cfg = {loop.id: {"repr": "while", "unroll": 3, "guard": guard}}
            if inner is not None:
                cfg[other.id] = inner
            leaves_equal(jax.jit(at.with_config(fn, cfg))(X), want)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_while_inside_a_vmapped_function_inside_the_program():
    """vmap inside the program gives a while equation with a batched predicate: JAX runs
    it while any lane goes on and keeps finished lanes unchanged; so does the rewrite."""

    def fn(xs, y0s):
        return jax.vmap(babylonian_sqrt)(xs), jax.vmap(adaptive_heun, in_axes=(0, None))(y0s, T_END)

    y0s = jnp.stack([Y0, -Y0, 2 * Y0, Y0 * 0.1, -Y0 * 3])
    sites = [s for s in at.sites(fn, AS, y0s) if s.kind == "while"]
    assert len(sites) == 2
    want = jax.jit(fn)(AS, y0s)
    for k in (2, 3):
        for guard in GUARDS:
            cfg = {s.id: {"repr": "while", "unroll": k, "guard": guard} for s in sites}
            leaves_equal(jax.jit(at.with_config(fn, cfg))(AS, y0s), want)
            leaves_equal(
                jax.jit(jax.vmap(at.with_config(fn, cfg)))(AS[None], y0s[None]),
                jax.jit(jax.vmap(fn))(AS[None], y0s[None]),
            )


# --- validation, side effects, the space ---------------------------------------------------------


def test_wrong_representation_for_a_while_site_names_it():
    site = only_while(babylonian_sqrt, A)
    for choice in ({"repr": "scan", "unroll": 2}, {"repr": "for"}, {"repr": "fori"}):
        with pytest.raises(at.ConfigError, match="while loop") as e:
            at.with_config(babylonian_sqrt, {site.id: choice})(A)
        assert site.id in str(e.value)


def test_while_choice_on_a_scan_site_is_refused():
    def fn(x):
        return lax.scan(lambda c, _: (c + 1.0, None), x, None, length=4)[0]

    (site,) = at.sites(fn, X)
    with pytest.raises(at.ConfigError, match="static trip count") as e:
        at.with_config(fn, {site.id: {"repr": "while", "unroll": 2}})(X)
    assert site.id in str(e.value)


def counting_loop(calls):
    def fn(x):
        def body(state):
            i, v = state
            jax.debug.callback(lambda i: calls.append(int(i)), i)
            return i + 1, v * 1.5

        return lax.while_loop(lambda s: s[0] < 5, body, (0, x))[1]

    return fn


def test_side_effects_allow_only_the_cond_guard_and_run_as_often_as_before():
    calls = []
    fn = counting_loop(calls)
    site = only_while(fn, X)
    assert [str(c) for c in Space([site]).entries[0].choices] == [
        "while×1",
        "while×2/cond",
        "while×4/cond",
        "while×8/cond",
    ]
    with pytest.raises(at.ConfigError, match="side effects"):
        configured(fn, site, 4, "select")(X)
    want = jax.jit(fn)(X)
    jax.effects_barrier()
    original_calls, calls[:] = list(calls), []
    got = jax.jit(configured(fn, site, 4, "cond"))(X)
    jax.effects_barrier()
    leaves_equal(got, want)
    assert calls == original_calls == [0, 1, 2, 3, 4]


def test_space_of_a_while_site():
    site = only_while(babylonian_sqrt, A)
    space = Space([site])
    entry = space.entries[0]
    assert (entry.reprs, entry.unrolls, entry.guards) == (("while",), (1, 2, 4, 8), ("select", "cond"))
    labels = [str(c) for c in entry.choices]
    assert labels == ["while×1", "while×2", "while×2/cond", "while×4", "while×4/cond", "while×8", "while×8/cond"]
    assert len(space) == 7 and next(space.configs()) == at.Config({site.id: {"repr": "while"}})
    for config in space.configs():
        assert space.from_params(space.to_params(config)) == config
        leaves_equal(jax.jit(at.with_config(babylonian_sqrt, config))(A), jax.jit(babylonian_sqrt)(A))


def test_a_config_dict_without_guard_means_select():
    site = only_while(babylonian_sqrt, A)
    g = at.with_config(babylonian_sqrt, {site.id: {"repr": "while", "unroll": 4}})
    assert g.config[site.id] == at.SiteChoice("while", 4, "select")
    assert g.config.to_dict() == {site.id: {"repr": "while", "unroll": 4, "guard": "select"}}
    leaves_equal(jax.jit(g)(A), jax.jit(babylonian_sqrt)(A))
