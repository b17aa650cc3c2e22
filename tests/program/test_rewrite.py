"""at.with_config: same values for every config, and the loop structure really changes."""

import inspect
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import autotune as at


def assert_tree_close(got, want, rtol=2e-5, atol=2e-6):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


def assert_tree_equal(got, want):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def whiles(fn, *args, **kwargs):
    """How many while loops the lowered StableHLO of ``jit(fn)`` holds."""
    return jax.jit(fn).lower(*args, **kwargs).as_text().count("stablehlo.while")


def ops(fn, op, *args):
    """How many ``op`` instructions the optimised HLO of ``jit(fn)`` holds.

    The compiled text is used because JAX 0.10 outlines loop bodies into
    private functions in StableHLO, which hides unrolling there."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    return len(re.findall(rf"\b{op}\(", text))


def site_by(sites, *, name=None, length=None, kind=None):
    found = [
        s
        for s in sites
        if (name is None or s.name == name)
        and (length is None or s.length == length)
        and (kind is None or s.kind == kind)
    ]
    assert len(found) == 1, (found, sites)
    return found[0]


# --- one program with every kind of site ------------------------------------------------------


def program(x, xs):
    def body(c, x):
        c = jnp.sin(c) * 0.9 + x
        c = lax.fori_loop(0, 3, lambda i, d: jnp.tanh(d) + 0.01 * i, c)
        return c, c.sum()

    c, ys = lax.scan(body, x, xs)

    def refine(c, _):
        c = lax.scan(lambda d, _: (jnp.cos(d) * 0.5, None), c, None, length=4)[0]
        return c * 1.1, None

    c = at.loop(refine, c, length=6, name="refine")[0]
    return c, ys


def program_inputs():
    rng = np.random.default_rng(1)
    return (rng.standard_normal(3).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32) * 0.3)


def program_sites():
    sites = at.sites(program, *program_inputs())
    return {
        "scan": site_by(sites, kind="scan", length=8),
        "fori": site_by(sites, kind="scan", length=3),
        "loop": site_by(sites, name="refine"),
        "inner": site_by(sites, kind="scan", length=4),
    }


def test_program_has_the_expected_sites():
    s = program_sites()
    assert s["fori"].id.split("/")[-1].startswith("fori@") and s["fori"].parent == s["scan"].id
    assert s["inner"].parent == "refine" and s["loop"].kind == "loop"
    assert len(at.sites(program, *program_inputs())) == 4


CHOICES = [
    ("scan", {"repr": "for"}),
    ("scan", {"unroll": 2}),
    ("scan", {"unroll": 4}),
    ("scan", {"unroll": 8}),
    ("fori", {"repr": "for"}),
    ("fori", {"unroll": 2}),
    ("fori", {"repr": "fori"}),
    ("loop", {"repr": "for"}),
    ("loop", {"repr": "fori"}),
    ("loop", {"repr": "fori", "unroll": 3}),
    ("loop", {"unroll": 4}),
    ("inner", {"repr": "for"}),
    ("inner", {"unroll": 2}),
    ("inner", {"repr": "fori", "unroll": 4}),
]


@pytest.mark.parametrize("key, choice", CHOICES, ids=[f"{k}-{c}" for k, c in CHOICES])
def test_outputs_equal_for_every_single_site_choice(key, choice):
    args = program_inputs()
    want = jax.jit(program)(*args)
    cfg = {program_sites()[key].id: choice}
    got = jax.jit(at.with_config(program, cfg))(*args)
    assert_tree_close(got, want)


@pytest.mark.parametrize("choice", [{"repr": "for"}, {"repr": "scan", "unroll": 2}, "mixed"])
def test_outputs_equal_when_every_site_is_configured(choice):
    args = program_inputs()
    s = program_sites()
    if choice == "mixed":
        cfg = {
            s["scan"].id: {"unroll": 4},
            s["fori"].id: {"repr": "for"},
            s["loop"].id: {"repr": "fori", "unroll": 2},
            s["inner"].id: {"repr": "for"},
        }
    else:
        cfg = {site.id: choice for site in s.values()}
    want = jax.jit(program)(*args)
    assert_tree_close(jax.jit(at.with_config(program, cfg))(*args), want)
    assert_tree_close(at.with_config(program, cfg)(*args), want)  # eager too


def test_default_config_is_bit_identical():
    args = program_inputs()
    want = jax.jit(program)(*args)
    for cfg in ({}, None, at.Config()):
        assert_tree_equal(jax.jit(at.with_config(program, cfg))(*args), want)
    s = program_sites()
    explicit_defaults = {site.id: {"repr": "scan", "unroll": 1} for site in s.values()}
    assert_tree_equal(jax.jit(at.with_config(program, explicit_defaults))(*args), want)


# --- bit-equality with the same program written by hand -----------------------------------------


def make_scan(unroll):
    def f(x, xs):
        return lax.scan(lambda c, x: (jnp.sin(c) * 0.9 + x, c * x), x, xs, unroll=unroll)

    return f


@pytest.mark.parametrize(
    "source_unroll, choice, equivalent_unroll",
    [
        (1, {"unroll": 2}, 2),
        (1, {"unroll": 4}, 4),
        (1, {"repr": "for"}, True),
        (4, {"unroll": 1}, 1),
        (True, {"unroll": 2}, 2),
        (2, {}, 2),
    ],
)
def test_rewrite_is_bit_identical_to_the_hand_written_unroll(source_unroll, choice, equivalent_unroll):
    x, xs = program_inputs()
    f = make_scan(source_unroll)
    (site,) = at.sites(f, x, xs)
    assert site.id == at.sites(make_scan(equivalent_unroll), x, xs)[0].id  # same line, same id
    cfg = {site.id: choice} if choice else {}
    got = jax.jit(at.with_config(f, cfg))(x, xs)
    want = jax.jit(make_scan(equivalent_unroll))(x, xs)
    assert_tree_equal(got, want)
    assert_tree_close(got, jax.jit(make_scan(1))(x, xs))


# --- loop structure in the compiled program ---------------------------------------------------------


def two_scans(x):
    a = lax.scan(lambda c, _: (jnp.sin(c) * 0.9 + 0.1, None), x, None, length=8)[0]
    b = lax.scan(lambda c, _: (jnp.tanh(c) * 0.9 + 0.1, c), a, None, length=8)
    return b


def two_scan_ids(x):
    first, second = at.sites(two_scans, x)  # outermost first, in program order
    assert first.id != second.id and first.length == second.length == 8
    return first.id, second.id


def test_full_unroll_removes_that_sites_while_loop():
    x = jnp.ones(3)
    sin_id, tanh_id = two_scan_ids(x)
    assert whiles(two_scans, x) == 2
    assert whiles(at.with_config(two_scans, {sin_id: {"repr": "for"}}), x) == 1
    assert whiles(at.with_config(two_scans, {sin_id: {"unroll": 8}}), x) == 1
    assert whiles(at.with_config(two_scans, {sin_id: {"repr": "for"}, tanh_id: {"repr": "for"}}), x) == 0
    assert whiles(at.with_config(two_scans, {sin_id: {"unroll": 2}}), x) == 2


@pytest.mark.parametrize("k", [2, 4])
def test_unroll_k_multiplies_the_body_and_leaves_other_sites_alone(k):
    x = jnp.ones(3)
    sin_id, _ = two_scan_ids(x)
    sin0, tanh0 = ops(two_scans, "sine", x), ops(two_scans, "tanh", x)
    assert sin0 >= 1 and tanh0 >= 1
    g = at.with_config(two_scans, {sin_id: {"unroll": k}})
    assert ops(g, "sine", x) == k * sin0
    assert ops(g, "tanh", x) == tanh0
    full = at.with_config(two_scans, {sin_id: {"repr": "for"}})
    assert ops(full, "sine", x) == 8 * sin0
    assert_tree_close(jax.jit(g)(x), jax.jit(two_scans)(x))


def test_at_loop_for_and_fori_structure():
    def f(x):
        return at.loop(lambda c, _: (jnp.sin(c) + 0.1, None), x, length=6, name="body")[0]

    x = jnp.ones(3)
    base = ops(f, "sine", x)
    assert whiles(f, x) == 1
    assert whiles(at.with_config(f, {"body": {"repr": "for"}}), x) == 0
    assert ops(at.with_config(f, {"body": {"repr": "for"}}), "sine", x) == 6 * base
    assert whiles(at.with_config(f, {"body": {"repr": "fori"}}), x) == 1
    assert ops(at.with_config(f, {"body": {"repr": "fori", "unroll": 3}}), "sine", x) == 3 * base


# --- sites inside containers get re-emitted -----------------------------------------------------------


def sin_scan(v):
    return lax.scan(lambda c, _: (jnp.sin(c) * 0.9 + 0.1, None), v, None, length=4)[0]


@jax.jit
def jit_callee(v):
    return sin_scan(v)


@jax.custom_jvp
def cjvp(v):
    return sin_scan(v)


@cjvp.defjvp
def _cjvp_jvp(primals, tangents):
    (v,), (t,) = primals, tangents
    return cjvp(v), jnp.cos(v) * t


@jax.custom_vjp
def cvjp(v):
    return sin_scan(v)


cvjp.defvjp(lambda v: (cvjp(v), jnp.cos(v)), lambda res, g: (res * g,))


CONTAINERS = {
    "cond": lambda x: lax.cond(x.sum() > 0, sin_scan, lambda v: v * 2.0, x),
    "switch": lambda x: lax.switch(jnp.int32(x.sum() > 0), [lambda v: v * 2.0, sin_scan], x),
    "while": lambda x: lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, sin_scan(c[1])), (0, x))[1],
    "checkpoint": lambda x: jax.checkpoint(sin_scan)(x),
    "custom_jvp": lambda x: cjvp(x),
    "custom_vjp": lambda x: cvjp(x),
    "jit": lambda x: jit_callee(x) + 1.0,
    "scan-body": lambda x: lax.scan(lambda c, _: (sin_scan(c), None), x, None, length=2)[0],
}
DIFFERENTIABLE = ["cond", "checkpoint", "custom_jvp", "custom_vjp", "jit", "scan-body"]


def inner_site(fn, x):
    return site_by(at.sites(fn, x), length=4)


@pytest.mark.parametrize("where", list(CONTAINERS))
def test_site_in_container_is_unrolled(where):
    fn = CONTAINERS[where]
    x = jnp.linspace(0.1, 0.5, 3, dtype=jnp.float32)
    site = inner_site(fn, x)
    w0, s0 = whiles(fn, x), ops(fn, "sine", x)
    assert w0 >= 1 and s0 >= 1
    full = at.with_config(fn, {site.id: {"repr": "for"}})
    assert whiles(full, x) == w0 - 1
    twice = at.with_config(fn, {site.id: {"unroll": 2}})
    assert ops(twice, "sine", x) == 2 * s0
    assert whiles(twice, x) == w0
    want = jax.jit(fn)(x)
    assert_tree_close(jax.jit(full)(x), want)
    assert_tree_close(jax.jit(twice)(x), want)


@pytest.mark.parametrize("where", DIFFERENTIABLE)
def test_gradient_through_container_with_config(where):
    fn = CONTAINERS[where]
    x = jnp.linspace(0.1, 0.5, 3, dtype=jnp.float32)
    site = inner_site(fn, x)
    want = jax.jit(jax.grad(lambda v: fn(v).sum()))(x)
    for choice in ({"repr": "for"}, {"unroll": 2}):
        g = at.with_config(fn, {site.id: choice})
        got = jax.jit(jax.grad(lambda v, g=g: g(v).sum()))(x)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# --- composition: pytrees, kwargs, jit, grad, vmap ---------------------------------------------------


def pytree_fn(params, batch, *, scale, n):
    def body(c, x):
        h = jnp.tanh(c["h"] @ params["w"] + x["u"] * scale + params["b"])
        return {"h": h, "k": c["k"] + 1}, {"h": h, "norm": (h**2).sum()}

    init = {"h": batch["h0"], "k": jnp.int32(0)}
    carry, ys = lax.scan(body, init, {"u": batch["u"]})
    extra = at.loop(lambda c, _: (c * 0.5 + 1.0, None), carry["h"], length=n, name="tail")[0]
    return {"carry": carry, "ys": ys}, (extra, carry["h"].sum())


def pytree_inputs():
    rng = np.random.default_rng(2)
    params = {"w": rng.standard_normal((3, 3)).astype(np.float32) * 0.5, "b": rng.standard_normal(3).astype(np.float32)}
    batch = {"h0": np.zeros(3, np.float32), "u": rng.standard_normal((5, 3)).astype(np.float32)}
    return params, batch


def pytree_config(params, batch):
    sites = at.sites(pytree_fn, params, batch, scale=0.5, n=3)
    scan = site_by(sites, kind="scan")
    return {scan.id: {"unroll": 2}, "tail": {"repr": "for"}}


def test_pytrees_in_and_out_and_kwargs():
    params, batch = pytree_inputs()
    cfg = pytree_config(params, batch)
    g = at.with_config(pytree_fn, cfg)
    reference = jax.jit(pytree_fn, static_argnames=("scale", "n"))
    want = reference(params, batch, scale=0.5, n=3)
    got = g(params, batch, scale=0.5, n=3)
    assert_tree_close(got, want)
    assert got[0]["carry"]["k"].dtype == want[0]["carry"]["k"].dtype
    assert int(got[0]["carry"]["k"]) == 5
    # another static value is another program: it must not reuse the first one
    assert_tree_close(g(params, batch, scale=2.0, n=3), reference(params, batch, scale=2.0, n=3))


def test_signature_is_kept():
    g = at.with_config(pytree_fn, {})
    assert inspect.signature(g) == inspect.signature(pytree_fn)
    assert g.__name__ == pytree_fn.__name__


def test_under_jit_with_static_argnums_and_donate_argnums():
    params, batch = pytree_inputs()
    cfg = pytree_config(params, batch)

    def positional(params, batch, scale, n):
        return pytree_fn(params, batch, scale=scale, n=n)

    want = jax.jit(positional, static_argnums=(2, 3))(params, batch, 0.5, 3)
    g = jax.jit(at.with_config(positional, cfg), static_argnums=(2, 3), donate_argnums=(1,))
    fresh = jax.tree_util.tree_map(jnp.array, batch)
    assert_tree_close(g(params, fresh, 0.5, 3), want)
    fresh = jax.tree_util.tree_map(jnp.array, batch)
    assert_tree_close(g(params, fresh, 0.5, 3), want)  # second call: cached executable
    h = jax.jit(at.with_config(pytree_fn, cfg), static_argnames=("scale", "n"))
    assert_tree_close(h(params, batch, scale=0.5, n=3), want)


def test_grad_of_rewritten_equals_grad_of_original():
    params, batch = pytree_inputs()
    cfg = pytree_config(params, batch)

    def loss(f):
        def inner(params):
            (out, (extra, total)) = f(params, batch, scale=0.5, n=3)
            return out["ys"]["norm"].sum() + extra.sum() + total

        return inner

    want = jax.jit(jax.grad(loss(pytree_fn)))(params)
    got = jax.jit(jax.grad(loss(at.with_config(pytree_fn, cfg))))(params)
    assert_tree_close(got, want, rtol=1e-5, atol=1e-5)


def test_vmap_of_rewritten():
    x, xs = program_inputs()
    s = program_sites()
    cfg = {s["scan"].id: {"unroll": 2}, "refine": {"repr": "for"}, s["fori"].id: {"repr": "for"}}
    xb = np.stack([x, x * 0.5, -x])
    want = jax.jit(jax.vmap(program, in_axes=(0, None)))(xb, xs)
    assert_tree_close(jax.jit(jax.vmap(at.with_config(program, cfg), in_axes=(0, None)))(xb, xs), want)


def test_one_configured_function_serves_several_shapes():
    def f(xs):
        return lax.scan(lambda c, x: (c * 0.5 + x, None), jnp.zeros(xs.shape[1:]), xs)[0]

    (site,) = at.sites(f, jnp.ones((8, 2)))
    g = at.with_config(f, {site.id: {"unroll": 4}})
    for shape in [(8, 2), (12, 3), (4, 1), (8, 2)]:
        xs = jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape)
        np.testing.assert_allclose(g(xs), f(xs), rtol=1e-6)
    with pytest.raises(at.ConfigError):  # unroll 4 does not fit a 2-step loop
        g(jnp.ones((2, 2)))


def test_closure_over_a_traced_value():
    x = jnp.linspace(0.0, 1.0, 3)

    def make(w):
        return lambda v: lax.scan(lambda c, _: (jnp.sin(c * w), None), v, None, length=4)[0]

    (site,) = at.sites(make(2.0), x)

    def loss(w, cfg):
        return at.with_config(make(w), cfg)(x).sum()

    want = jax.grad(loss)(1.3, {})
    for choice in ({"repr": "for"}, {"unroll": 2}):
        np.testing.assert_allclose(jax.grad(loss)(1.3, {site.id: choice}), want, rtol=1e-5)


# --- ConfigError ---------------------------------------------------------------------------------------


def error_of(fn, cfg, *args):
    with pytest.raises(at.ConfigError) as e:
        at.with_config(fn, cfg)(*args)
    return str(e.value)


def test_unknown_site_id_names_it_and_lists_the_valid_ids():
    args = program_inputs()
    msg = error_of(program, {"nope/scan@x.py:1": {"unroll": 2}}, *args)
    assert "nope/scan@x.py:1" in msg
    for site in program_sites().values():
        assert site.id in msg


def test_unknown_site_id_on_a_function_without_loops():
    msg = error_of(lambda x: x + 1.0, {"ghost": {"repr": "for"}}, jnp.ones(2))
    assert "ghost" in msg


@pytest.mark.parametrize("key", ["scan", "loop", "inner"])
def test_unroll_above_length(key):
    args = program_inputs()
    site = program_sites()[key]
    msg = error_of(program, {site.id: {"unroll": site.length + 1}}, *args)
    assert site.id in msg and str(site.length) in msg
    # the boundary is valid, and "for" ignores unroll
    jax.eval_shape(at.with_config(program, {site.id: {"unroll": site.length}}), *args)
    jax.eval_shape(at.with_config(program, {site.id: {"repr": "for", "unroll": site.length + 1}}), *args)


def test_fori_on_a_loop_that_stacks_outputs():
    args = program_inputs()
    site = program_sites()["scan"]
    msg = error_of(program, {site.id: {"repr": "fori"}}, *args)
    assert site.id in msg and "fori" in msg

    def stacks(x):
        return at.loop(lambda c, _: (c + 1.0, c), x, length=3, name="stacking")

    msg = error_of(stacks, {"stacking": {"repr": "fori"}}, jnp.ones(2))
    assert "stacking" in msg


@pytest.mark.parametrize(
    "choice",
    [
        {"unroll": 0},
        {"unroll": -2},
        {"unroll": 2.5},
        {"unroll": "2"},
        {"unroll": True},
        {"unroll": None},
        {"repr": "while"},
        {"repr": None},
        {"repr": object()},
        {"unrol": 2},
        {"repr": "for", "x": 1},
        "for",
        2,
        None,
        ["scan"],
    ],
    ids=lambda c: repr(c)[:30],
)
def test_invalid_choices_through_with_config_name_the_site(choice):
    args = program_inputs()
    site = program_sites()["loop"]
    msg = error_of(program, {site.id: choice}, *args)
    assert site.id in msg


def test_errors_do_not_poison_the_function():
    args = program_inputs()
    site = program_sites()["scan"]
    g = at.with_config(program, {site.id: {"unroll": 99}})
    for _ in range(2):  # an invalid config stays invalid, call after call
        with pytest.raises(at.ConfigError):
            g(*args)
    assert_tree_close(at.with_config(program, {site.id: {"unroll": 2}})(*args), program(*args))


def scan_grad_inside(p, xs):
    """A training step: the tuned function differentiates through a scan and a fori_loop."""

    def loss(p):
        c, ys = lax.scan(lambda c, x: (jnp.tanh(c * p + x), c.sum()), xs[0], xs)
        c = lax.fori_loop(0, 3, lambda i, d: jnp.sin(d) * p, c)
        return (c**2).sum() + ys.sum()

    return jax.grad(loss)(p)


def test_every_site_of_a_gradient_program_takes_every_choice():
    p, xs = np.float32(0.7), np.linspace(-0.5, 0.5, 12, dtype=np.float32).reshape(4, 3)
    want = jax.jit(scan_grad_inside)(p, xs)
    sites = at.sites(scan_grad_inside, p, xs)
    assert len(sites) >= 2  # forward loops, and the backward loops JAX derives from them
    for site in sites:
        for choice in ({"repr": "for"},):
            try:
                got = jax.jit(at.with_config(scan_grad_inside, {site.id: choice}))(p, xs)
            except at.ConfigError:
                continue
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{site.id} {choice}")
