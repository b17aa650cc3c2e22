"""autotune.program._compat: the JAX internals the package uses, on the installed JAX version."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from autotune import TraceError
from autotune.program import _compat

THIS = os.path.realpath(__file__)
X = jnp.linspace(0.1, 1.0, 3, dtype=jnp.float32)


def eqns_of(fn, *args):
    inner, _ = _compat.unpack(jax.make_jaxpr(fn)(*args))
    return inner.eqns


def first(fn, *args, primitive):
    (eqn,) = [e for e in eqns_of(fn, *args) if e.primitive.name == primitive]
    return eqn


def line_of(text):
    with open(THIS) as f:
        (n,) = [i for i, line in enumerate(f, 1) if line.rstrip().endswith(text)]
    return n


def test_unpack_gives_an_open_jaxpr_and_its_consts():
    w = np.arange(3, dtype=np.float32)
    inner, consts = _compat.unpack(jax.make_jaxpr(lambda x: x * w)(X))
    assert hasattr(inner, "eqns") and hasattr(inner, "invars") and hasattr(inner, "constvars")
    assert len(consts) == len(inner.constvars) == 1
    np.testing.assert_array_equal(np.asarray(consts[0]), w)


def test_sub_jaxprs_addresses_and_replacement():
    eqn = first(lambda x, p: lax.cond(p, jnp.sin, jnp.cos, x), X, True, primitive="cond")
    subs = list(_compat.sub_jaxprs(eqn.params))
    assert [addr for addr, _ in subs] == [("branches", 0), ("branches", 1)]
    assert all(_compat.is_jaxpr(j) for _, j in subs)
    swapped = _compat.replace_sub_jaxprs(eqn.params, {("branches", 0): subs[1][1]})
    assert type(swapped["branches"]) is type(eqn.params["branches"])
    assert swapped["branches"][0] is subs[1][1] and eqn.params["branches"][0] is subs[0][1]
    scan = first(lambda x: lax.scan(lambda c, _: (c, None), x, None, length=2)[0], X, primitive="scan")
    assert [addr for addr, _ in _compat.sub_jaxprs(scan.params)] == [("jaxpr",)]


def test_while_parts_and_const_counts():
    a, b, c = (np.full(3, v, np.float32) for v in (1.0, 2.0, 3.0))

    def fn(x):
        return lax.while_loop(lambda v: (v * a).sum() < 50.0, lambda v: v * b + c, x)

    eqn = first(fn, X, primitive="while")
    (cond_addr, cond), (body_addr, body) = _compat.while_jaxprs(eqn)
    assert (cond_addr, body_addr) == (("cond_jaxpr",), ("body_jaxpr",))
    assert _compat.while_const_counts(eqn) == (1, 2)
    assert len(eqn.invars) == 1 + 2 + 1
    assert _compat.traced_for(body) == "while_body" and _compat.traced_for(cond) == "while_cond"
    assert not _compat.has_effects(body)


def test_traced_for_and_function():
    def body(c, _):  # DEF-LINE
        return c + 1.0, None

    scan = first(lambda x: lax.scan(body, x, None, length=2)[0], X, primitive="scan")
    jx = scan.params["jaxpr"]
    assert _compat.traced_for(jx) == "scan"
    name, file, line = _compat.traced_function(jx)
    assert name == "body" and os.path.realpath(file) == THIS and line == line_of("# DEF-LINE")
    fori = first(lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2.0, x), X, primitive="scan")
    assert _compat.traced_for(fori.params["jaxpr"]) == "fori_loop"
    dyn = first(lambda x, n: lax.fori_loop(0, n, lambda i, c: c * 2.0, x), X, jnp.int32(3), primitive="while")
    assert _compat.traced_for(_compat.while_jaxprs(dyn)[1][1]) == "fori_loop"


def test_effects():
    def fn(x):
        jax.debug.callback(lambda v: None, x)
        return x

    body_with = first(lambda x: lax.while_loop(lambda v: v.sum() < 9.0, lambda v: fn(v) + 1.0, x), X, primitive="while")
    assert _compat.has_effects(_compat.while_jaxprs(body_with)[1][1])
    eqn = first(fn, X, primitive="debug_callback")
    assert _compat.eqn_effects(eqn) != [] and all(isinstance(e, str) for e in _compat.eqn_effects(eqn))


def test_variables_literals_tracers_avals():
    (eqn,) = eqns_of(lambda x: x + 2.0, X)
    var, lit = eqn.invars
    assert not _compat.is_literal(var) and _compat.is_literal(lit)
    assert float(_compat.literal_value(lit)) == 2.0
    assert _compat.is_aval(var.aval) and not _compat.is_aval(X)
    seen = []
    jax.make_jaxpr(lambda x: seen.append(_compat.is_tracer(x)) or x)(X)
    assert seen == [True] and not _compat.is_tracer(X)
    import jax.extend.core as jex

    assert _compat.is_dropvar(jex.DropVar(var.aval)) and not _compat.is_dropvar(var)


def test_name_scopes_keep_scopes_and_transforms():
    def fn(x):
        with jax.named_scope("outer"):
            with jax.named_scope("inner"):
                return jnp.sin(x)

    (eqn,) = eqns_of(fn, X)
    assert _compat.name_scopes(eqn) == [("scope", "outer"), ("scope", "inner")]
    eqns = eqns_of(lambda x: jax.jvp(fn, (x,), (x,)), X)
    assert ("transform", "jvp") in _compat.name_scopes(eqns[0])
    assert ("scope", "inner") in _compat.name_scopes(eqns[0])


def test_frames():
    eqn = first(lambda x: lax.scan(lambda c, _: (c, None), x, None, length=2)[0], X, primitive="scan")  # FRAME
    frame = _compat.user_frame(eqn)
    assert os.path.realpath(frame.file) == THIS and frame.line == line_of("# FRAME")
    assert _compat.library_frame(eqn) == frame
    # A loop JAX builds inside its own jit has no user or library frame, only JAX's own.
    eqns = [e for e in eqns_of(lambda x: jax.scipy.special.exp1(x), X)]
    loops = []

    def collect(eqns):
        for e in eqns:
            if e.primitive.name in ("scan", "while"):
                loops.append(e)
            for _, sub in _compat.sub_jaxprs(e.params):
                collect(_compat.unpack(sub)[0].eqns)

    collect(eqns)
    assert loops
    for e in loops:
        assert _compat.user_frame(e) is None and _compat.library_frame(e) is None
        assert _compat.outermost_frame(e) is not None


def test_key_data_and_structs():
    key = jax.random.key(3)
    np.testing.assert_array_equal(np.asarray(_compat.key_data(key)), np.asarray(jax.random.key_data(key)))
    assert _compat.key_data(X) is None and _compat.key_data(3.0) is None
    s = _compat.to_struct(_compat.aval_of(X))
    assert (s.shape, s.dtype) == ((3,), jnp.float32)
    with pytest.raises(TraceError, match="re-trace"):
        _compat.to_struct(object())


def test_retrace_like_gives_a_jaxpr_that_can_take_the_original_place():
    scan = first(lambda x: lax.scan(lambda c, _: (jnp.sin(c), None), x, None, length=2)[0], X, primitive="scan")
    body = scan.params["jaxpr"]
    inner, _ = _compat.unpack(body)
    new = _compat.retrace_like(body, lambda c: [jnp.cos(c)], [v.aval for v in inner.invars])
    assert _compat.is_jaxpr(new) and type(new) is type(body)
    w = jnp.ones(3)  # a captured array where JAX wants a const-free jaxpr is refused on JAX 0.12;
    try:  # on 0.10 a scan body is a ClosedJaxpr and may hold consts
        got = _compat.retrace_like(body, lambda c: [c * w], [v.aval for v in inner.invars])
        assert type(got) is type(body)
    except TraceError as e:
        assert "constant" in str(e)


def test_bind_like_replays_an_equation_in_its_source_context():
    def fn(x):
        with jax.named_scope("kept"):
            return jnp.sin(x)

    (eqn,) = eqns_of(fn, X)
    np.testing.assert_array_equal(_compat.bind_like(eqn, eqn.params, [X])[0], jnp.sin(X))
    (again,) = eqns_of(lambda x: _compat.bind_like(eqn, eqn.params, [x])[0], X)
    assert _compat.name_scopes(again) == [("scope", "kept")]
    assert _compat.user_frame(again) == _compat.user_frame(eqn)


def test_single_device_shardings_are_made_and_recognised_without_a_deprecation_warning():
    """jax 0.12.1 deprecated the class SingleDeviceSharding; both helpers avoid it on every line."""
    import warnings

    from jax.sharding import NamedSharding, PartitionSpec

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        one = _compat.single_device_sharding(jax.devices()[0])
        assert _compat.is_single_device_sharding(one)
        assert _compat.is_single_device_sharding(jax.device_put(X, jax.devices()[0]).sharding)
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("a",))
        assert not _compat.is_single_device_sharding(NamedSharding(mesh, PartitionSpec("a")))
    assert jax.device_put(X, one).sharding.device_set == {jax.devices()[0]}


def test_no_persistent_cache_restores_the_flag():
    before = jax.config.jax_enable_compilation_cache
    with _compat.no_persistent_cache():
        assert jax.config.jax_enable_compilation_cache is False
        jax.jit(lambda x: x + 1.0)(X).block_until_ready()
    assert jax.config.jax_enable_compilation_cache == before
    _compat.clear_jax_caches()


def test_scan_counts_split_a_scans_operands_into_consts_carry_and_xs():
    import jax
    import jax.numpy as jnp
    from jax import lax

    from autotune.program import _compat

    w = jnp.arange(5.0)

    def f(c, xs):
        return lax.scan(lambda c, x: ((c[0] + x, c[1] * w), c[0]), c, xs)

    jaxpr = jax.make_jaxpr(f)((jnp.ones(2), jnp.ones(5)), jnp.ones((3, 2)))
    [eqn] = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
    n_consts, n_carry = _compat.scan_counts(eqn.params)
    # Whatever JAX moves between consts and carry, the groups add up and the xs come last.
    assert n_consts >= 1 and n_carry >= 1 and n_consts + n_carry + 1 == len(eqn.invars)
    assert eqn.invars[-1].aval.shape == (3, 2)
