"""at.loop: scan semantics in every representation; its own validation and defaults."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autotune as at

L = 5


def reference_loop(body, init, xs, length, reverse=False):
    """The documented semantics, in plain Python over NumPy values."""
    carry, ys = init, []
    order = range(length - 1, -1, -1) if reverse else range(length)
    for i in order:
        x_i = jax.tree_util.tree_map(lambda a, i=i: a[i], xs)
        carry, y = body(carry, x_i)
        ys.append(y)
    if reverse:
        ys = ys[::-1]
    if ys and jax.tree_util.tree_leaves(ys[0]):
        stacked = jax.tree_util.tree_map(lambda *col: np.stack(col), *ys)
    else:
        stacked = None
    return carry, stacked


def body_with_ys(carry, x):
    h, n = carry["h"], carry["n"]
    h = np.tanh(h * 0.9 + x["a"] * x["b"]) if isinstance(h, np.ndarray) else jnp.tanh(h * 0.9 + x["a"] * x["b"])
    return {"h": h, "n": n + 1.0}, (h.sum(), h * x["b"])


def body_no_ys(carry, x):
    new, _ = body_with_ys(carry, x)
    return new, None


def make_inputs():
    rng = np.random.default_rng(0)
    init = {"h": rng.standard_normal(3).astype(np.float32), "n": np.float32(0.0)}
    xs = {"a": rng.standard_normal((L, 3)).astype(np.float32), "b": rng.uniform(0.5, 1.5, L).astype(np.float32)}
    return init, xs


def assert_tree_close(got, want, rtol=2e-5, atol=2e-6):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


CASES = [
    pytest.param(r, rev, ys, id=f"{r}-{'rev' if rev else 'fwd'}-{'ys' if ys else 'noys'}")
    for r in ("scan", "for", "fori")
    for rev in (False, True)
    for ys in (True, False)
    if not (r == "fori" and ys)
]


@pytest.mark.parametrize("rep, reverse, with_ys", CASES)
@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_every_representation_matches_the_reference(rep, reverse, with_ys):
    init, xs = make_inputs()
    body = body_with_ys if with_ys else body_no_ys
    want = reference_loop(body, init, xs, L, reverse)

    def by_default(init, xs):  # the representation chosen by at.loop's own default
        return at.loop(body, init, xs, name="lp", reverse=reverse, repr=rep)

    def by_config(init, xs):  # the representation chosen by a config
        return at.loop(body, init, xs, name="lp", reverse=reverse)

    results = {
        "default, plain": by_default(init, xs),
        "default, jit": jax.jit(at.with_config(by_default, {}))(init, xs),
        "config": at.with_config(by_config, {"lp": {"repr": rep}})(init, xs),
        "config, jit": jax.jit(at.with_config(by_config, {"lp": {"repr": rep}}))(init, xs),
    }
    for how, got in results.items():
        try:
            assert_tree_close(got, want)
        except AssertionError as e:
            raise AssertionError(f"{how}: {e}") from None


@pytest.mark.parametrize("rep, unroll", [("scan", 2), ("scan", 5), ("fori", 2), ("fori", 3)])
def test_unroll_factors_keep_results(rep, unroll):
    init, xs = make_inputs()
    want = reference_loop(body_no_ys, init, xs, L, reverse=True)

    def f(init, xs):
        return at.loop(body_no_ys, init, xs, name="lp", reverse=True)

    got = jax.jit(at.with_config(f, {"lp": {"repr": rep, "unroll": unroll}}))(init, xs)
    assert_tree_close(got, want)


def test_length_from_xs_and_from_length_argument():
    init, xs = make_inputs()

    def f(init, xs):
        a = at.loop(body_no_ys, init, xs, name="with-xs")[0]
        b = at.loop(lambda c, _: (c * 0.5, None), a["h"], length=3, name="no-xs")[0]
        return b

    s = {site.id: site for site in at.sites(f, init, xs)}
    assert s["with-xs"].length == L and s["no-xs"].length == 3
    want = reference_loop(body_no_ys, init, xs, L)[0]["h"] * 0.125
    for rep in ("scan", "for", "fori"):
        got = at.with_config(f, {"with-xs": {"repr": rep}, "no-xs": {"repr": rep}})(init, xs)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("rep", ["scan", "for", "fori"])
def test_loop_invariant_carry_component(rep):
    """A carry entry the body passes through unchanged (e.g. parameters) is common;
    JAX's scan turns it into a constant, which must not confuse the re-emission."""

    def f(h, w):
        (h, w), _ = at.loop(lambda c, _: ((jnp.tanh(c[0] * c[1] + 0.1), c[1]), None), (h, w), length=4, name="inv")
        return h, w

    h, w = np.linspace(-1, 1, 3).astype(np.float32), np.full(3, 0.7, np.float32)
    want_h = h
    for _ in range(4):
        want_h = np.tanh(want_h * w + 0.1)
    got = at.with_config(f, {"inv": {"repr": rep}})(h, w)
    np.testing.assert_allclose(got[0], want_h, rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(got[1], w)


@pytest.mark.parametrize("rep", ["scan", "for", "fori"])
def test_gradient_in_every_representation(rep):
    init, xs = make_inputs()

    def f(h, xs, rep):
        c, _ = at.loop(body_no_ys, {"h": h, "n": jnp.float32(0.0)}, xs, name="g", repr=rep)
        return (c["h"] ** 2).sum()

    want = jax.grad(f)(init["h"], xs, "scan")
    got = jax.grad(at.with_config(lambda h, xs: f(h, xs, "scan"), {"g": {"repr": rep}}))(init["h"], xs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    got = jax.grad(at.with_config(lambda h, xs: f(h, xs, rep), {}))(init["h"], xs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_zero_length_loop():
    def f(x):
        return at.loop(lambda c, _: (c + 1.0, c * 2.0), x, length=0, name="empty")

    x = jnp.ones(3)
    for rep in ("scan", "for"):
        c, ys = at.with_config(f, {"empty": {"repr": rep}})(x)
        np.testing.assert_array_equal(c, x)
        assert ys.shape == (0, 3)


# --- defaults and loop structure ------------------------------------------------------------


def whiles(fn, *args):
    return jax.jit(fn).lower(*args).as_text().count("stablehlo.while")


def compiled_ops(fn, op, *args):
    text = jax.jit(fn).lower(*args).compile().as_text()
    return len(re.findall(rf"\b{op}\(", text))


def tanh_loop(rep="scan", unroll=1, name="t"):
    def f(x):
        return at.loop(lambda c, _: (jnp.tanh(c) * 0.9 + 0.1, None), x, length=8, name=name, repr=rep, unroll=unroll)[0]

    return f


def test_default_for_is_unrolled_without_a_config_and_overridable():
    x = jnp.ones(3)
    rolled = tanh_loop()
    unrolled = tanh_loop("for")
    assert whiles(rolled, x) == 1
    assert whiles(unrolled, x) == 0  # no config at all
    assert whiles(at.with_config(unrolled, {}), x) == 0  # a config that does not name the loop
    assert whiles(at.with_config(unrolled, {"t": {"repr": "scan"}}), x) == 1
    assert compiled_ops(at.with_config(unrolled, {}), "tanh", x) == 8
    np.testing.assert_allclose(at.with_config(unrolled, {})(x), rolled(x), rtol=1e-6)


def test_default_unroll_is_used_when_no_config_names_the_loop():
    x = jnp.ones(3)
    base = compiled_ops(tanh_loop(), "tanh", x)
    assert base >= 1
    assert compiled_ops(tanh_loop(unroll=2), "tanh", x) == 2 * base
    assert compiled_ops(at.with_config(tanh_loop(unroll=4), {}), "tanh", x) == 4 * base
    assert compiled_ops(at.with_config(tanh_loop(unroll=4), {"t": {"unroll": 1}}), "tanh", x) == base


def test_default_fori_is_a_rolled_loop():
    x = jnp.ones(3)
    f = tanh_loop("fori")
    g = at.with_config(f, {})
    assert whiles(g, x) == 1
    np.testing.assert_allclose(g(x), tanh_loop()(x), rtol=1e-6)
    assert whiles(at.with_config(f, {"t": {"repr": "for"}}), x) == 0


def test_config_changes_only_the_loops_it_names():
    x = jnp.ones(3)

    def f(x):
        return tanh_loop("for", name="a")(x) + tanh_loop("scan", name="b")(x)

    assert whiles(at.with_config(f, {}), x) == 1
    assert whiles(at.with_config(f, {"b": {"repr": "for"}}), x) == 0
    assert whiles(at.with_config(f, {"a": {"repr": "scan"}}), x) == 2


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "has space", "a/b", "x#2", None, 3, "é"])
def test_bad_name(name):
    with pytest.raises(at.ConfigError):
        at.loop(lambda c, _: (c, None), jnp.ones(2), length=2, name=name)


def test_name_is_required():
    with pytest.raises(TypeError):
        at.loop(lambda c, _: (c, None), jnp.ones(2), length=2)


@pytest.mark.parametrize("rep", ["while", "unrolled", None, 1])
def test_bad_repr(rep):
    with pytest.raises(at.ConfigError) as e:
        at.loop(lambda c, _: (c, None), jnp.ones(2), length=2, name="named", repr=rep)
    assert "named" in str(e.value)


@pytest.mark.parametrize("unroll", [0, -1, 1.5, True, "2"])
def test_bad_unroll(unroll):
    with pytest.raises(at.ConfigError) as e:
        at.loop(lambda c, _: (c, None), jnp.ones(2), length=2, name="named", unroll=unroll)
    assert "named" in str(e.value)


def test_missing_length():
    with pytest.raises(at.ConfigError) as e:
        at.loop(lambda c, _: (c, None), jnp.ones(2), name="nolen")
    assert "nolen" in str(e.value) and "length" in str(e.value)


def test_xs_disagreeing_with_length_or_each_other():
    with pytest.raises(at.ConfigError):
        at.loop(lambda c, x: (c + x, None), jnp.ones(2), jnp.ones((4, 2)), length=3, name="n1")
    with pytest.raises(at.ConfigError):
        at.loop(lambda c, x: (c + x[0] + x[1], None), jnp.ones(2), (jnp.ones((4, 2)), jnp.ones((5, 2))), name="n2")
    with pytest.raises(at.ConfigError):
        at.loop(lambda c, x: (c + x, None), jnp.ones(2), jnp.float32(1.0), name="n3")


def test_default_fori_with_stacked_outputs_is_refused():
    with pytest.raises(at.ConfigError) as e:
        at.loop(lambda c, _: (c + 1.0, c), jnp.ones(2), length=3, name="stacks", repr="fori")
    assert "stacks" in str(e.value)


# --- at.loop inside a transformation inside the tuned function -----------------------------------

P = np.float32(0.7)
XS = (np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)) * 0.5


def grad_inside(p, xs):
    """A training step: the tuned function takes a gradient through an at.loop."""

    def loss(p):
        c, _ = at.loop(lambda c, x: (jnp.tanh(c * p + x), None), xs[0], xs, name="rnn")
        return (c**2).sum()

    return jax.grad(loss)(p)


def vmap_inside(p, xs):
    return jax.vmap(lambda row: at.loop(lambda c, x: (jnp.tanh(c * p + x), None), row, xs, name="rnn")[0])(xs)


def jvp_inside(p, xs):
    """Forward-mode derivative through an at.loop whose xs depend on the input."""

    def run(p):
        return at.loop(lambda c, x: (jnp.tanh(c * p + x), None), xs[0], xs * p, name="rnn")[0]

    return jax.jvp(run, (p,), (jnp.ones_like(p),))


CHOICES = [{"repr": "for"}, {"repr": "fori", "unroll": 2}]


@pytest.mark.parametrize("fn", [grad_inside, jvp_inside, vmap_inside])
def test_every_site_takes_every_choice_or_refuses_it_with_config_error(fn):
    """Whatever at.sites lists can be configured: a choice either works (same values)
    or is refused with a ConfigError, never a crash inside the re-emission."""
    want = jax.jit(fn)(P, XS)
    for site in at.sites(fn, P, XS):
        for choice in CHOICES:
            try:
                got = jax.jit(at.with_config(fn, {site.id: choice}))(P, XS)
            except at.ConfigError:
                continue
            for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{site.id} {choice}")


@pytest.mark.parametrize("fn", [grad_inside, jvp_inside, vmap_inside])
def test_at_loop_under_a_transformation_is_one_loop_site(fn):
    loops = [s for s in at.sites(fn, P, XS) if s.kind == "loop"]
    assert [(s.id, s.name, s.length) for s in loops] == [("rnn", "rnn", 4)]


def test_for_on_the_at_loop_under_grad_unrolls_it():
    assert "rnn" in [s.id for s in at.sites(grad_inside, P, XS)]
    g = at.with_config(grad_inside, {"rnn": {"repr": "for"}})
    np.testing.assert_allclose(g(P, XS), grad_inside(P, XS), rtol=1e-5, atol=1e-6)
    assert whiles(g, P, XS) < whiles(grad_inside, P, XS)


# --- how an at.loop is recognised: a named scope, not a function name ---------------------------


def test_a_plain_scan_whose_body_has_a_tag_like_name_is_not_an_at_loop():
    def body(c, _):
        return c + 1.0, None

    body.__name__ = body.__qualname__ = "_autotune_loop__fake__3_0_1_0_scan_1"  # the old name-based tag
    (site,) = at.sites(lambda x: jax.lax.scan(body, x, None, length=3)[0], jnp.ones(2))
    assert (site.kind, site.name) == ("scan", None)


def test_one_body_function_in_two_loops_keeps_each_name_and_default():
    def body(c, _):
        return jnp.sin(c) + 0.1, None

    def f(x):
        a = at.loop(body, x, length=4, name="first", unroll=2)[0]
        return at.loop(body, a, length=4, name="second", repr="for")[0]

    for fn in (f, jax.jit(f)):  # JAX caches the traced body; the tags must not be shared
        sites = {s.id: s for s in at.sites(lambda x: fn(x), jnp.ones(3))}  # noqa: B023 (called here)
        assert set(sites) == {"first", "second"}
        assert sites["first"].default == at.SiteChoice("scan", 2)
        assert sites["second"].default == at.SiteChoice("for")


def test_a_user_named_scope_around_the_loop_and_a_jitted_callee_reached_twice():
    @jax.jit
    def callee(x):
        return at.loop(lambda c, _: (c * 0.5, None), x, length=3, name="inner")[0]

    def f(x):
        with jax.named_scope("user_block"):
            y = at.loop(lambda c, _: (c + 1.0, None), x, length=2, name="outer")[0]
        return callee(callee(y))

    sites = at.sites(f, jnp.ones(3))
    assert [(s.id, s.kind) for s in sites] == [("outer", "loop"), ("inner", "loop"), ("inner#2", "loop")]
    got = at.with_config(f, {"outer": {"repr": "for"}, "inner": {"repr": "fori"}, "inner#2": {"repr": "for"}})
    np.testing.assert_allclose(got(jnp.ones(3)), f(jnp.ones(3)), rtol=1e-6)


def test_a_rewritten_program_keeps_its_loops_recognisable():
    def f(x):
        return at.loop(lambda c, _: (jnp.tanh(c), None), x, length=4, name="t")[0]

    g = at.with_config(f, {"t": {"unroll": 2}})
    assert [(s.id, s.kind) for s in at.sites(g, jnp.ones(3))] == [("t", "loop")]


def test_checkpointed_loop_under_grad_takes_every_choice():
    def loss(p, xs):
        f = jax.checkpoint(lambda p: at.loop(lambda c, x: (jnp.tanh(c * p + x), None), xs[0], xs, name="rnn")[0])
        return (f(p) ** 2).sum()

    g = jax.grad(loss)
    want = jax.jit(g)(P, XS)
    assert [s.id for s in at.sites(g, P, XS) if s.kind == "loop"] == ["rnn"]
    for choice in ({"repr": "for"}, {"repr": "fori", "unroll": 2}, {"repr": "scan", "unroll": 4}):
        np.testing.assert_allclose(jax.jit(at.with_config(g, {"rnn": choice}))(P, XS), want, rtol=1e-5, atol=1e-6)


def test_a_default_unroll_above_the_trip_count_is_clamped_and_valid():
    def f(x):
        return at.loop(lambda c, _: (c * 0.5, None), x, length=3, name="short", unroll=10)[0]

    (site,) = at.sites(f, jnp.ones(2))
    assert site.default == at.SiteChoice("scan", 3)
    np.testing.assert_allclose(at.with_config(f, {})(jnp.ones(2)), 0.125 * np.ones(2))
