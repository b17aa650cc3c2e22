"""@at.autotuned on methods and on functions with a leading static argument: .sites / .tune /
.config_for / .lower take exactly the arguments a call takes. Methods of an Equinox
``eqx.Module`` and of a flax ``struct.dataclass`` (a traced pytree ``self``) need the
``examples`` extra; they skip with the reason without it."""

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _presets import FAST, ONE_ROUND
from jax import lax

import autotune as at


def tune_options(tmp_path):
    return dict(n_trials=3, timing=FAST, confirm_rounds=1, storage=str(tmp_path / "s.db"))


def check(fn, args, tmp_path, expected):
    """Every entry point takes a call's arguments; after .tune the cache is hit."""
    np.testing.assert_allclose(fn(*args), expected, rtol=1e-6)
    (site,) = [s for s in fn.sites(*args) if s.length and s.length > 1]
    assert site.length == 8
    assert fn.config_for(*args).source == "default"
    assert "stablehlo" in fn.lower(*args).as_text() or "func" in fn.lower(*args).as_text()
    r = fn.tune(*args, **tune_options(tmp_path))
    assert all(t.state not in ("error", "crashed") for t in r.trials), [(t.state, t.reason) for t in r.trials]
    assert fn.config_for(*args).source == "cache"
    np.testing.assert_allclose(fn(*args), expected, rtol=1e-6)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_plain_function_with_static_argnums_0(tmp_path):
    @at.autotuned(static_argnums=0, cache=str(tmp_path / "c.db"), key="tests:static0")
    def f(n, x):
        return lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x, length=n)[0]

    x = jnp.ones(4)
    check(f, (8, x), tmp_path, jax.jit(f.autotune.fun, static_argnums=0)(8, x))


class Model:
    """A hashable object used as a static `self`."""

    def __init__(self, n, cache):
        self.n, self.cache = n, cache

    def __hash__(self):
        return hash(self.n)

    def __eq__(self, other):
        return isinstance(other, Model) and other.n == self.n

    @at.autotuned(static_argnums=0, key="tests:Model.step")
    def step(self, x):
        return lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x, length=self.n)[0]


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_method_with_a_static_self(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "c.db"))
    m = Model(8, None)
    x = jnp.ones(4)
    assert m.step.__self__ is m and Model.step.key == "tests:Model.step"
    check(m.step, (x,), tmp_path, lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x, length=8)[0])
    np.testing.assert_allclose(Model.step(m, x), m.step(x))  # called on the class: self passed by hand


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Params:
    """A pytree module (as flax.struct.dataclass and eqx.Module are): `self` is traced."""

    w: jax.Array
    n: int = dataclasses.field(default=8, metadata=dict(static=True))

    @at.autotuned(key="tests:Params.apply")
    def apply(self, x):
        return lax.scan(lambda c, _: (jnp.tanh(c * self.w), None), x, length=self.n)[0]


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_method_of_a_pytree_module_traces_self(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "c.db"))
    p = Params(jnp.full(4, 0.5))
    x = jnp.ones(4)
    expected = lax.scan(lambda c, _: (jnp.tanh(c * p.w), None), x, length=8)[0]
    check(p.apply, (x,), tmp_path, expected)
    # Another instance with other weights but the same structure reuses the tuned entry.
    assert Params(jnp.full(4, 0.25)).apply.config_for(x).source == "cache"
    # grad through a tuned method, as through jax.jit
    g = jax.grad(lambda w: p.apply.autotune(Params(w), x).sum())(p.w)
    assert g.shape == (4,) and bool(jnp.all(jnp.isfinite(g)))


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_donate_argnums_0_is_honoured(tmp_path):
    @at.autotuned(donate_argnums=0, cache=str(tmp_path / "c.db"), key="tests:donate0")
    def f(x):
        return lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x, length=8)[0]

    r = f.tune(jnp.ones(4), **tune_options(tmp_path))
    assert r.best.run_s > 0
    x = jnp.ones(4)
    f(x)
    assert x.is_deleted()  # donated, like jax.jit(f, donate_argnums=0)


@pytest.mark.parametrize("bad", [(), (1,)])
def test_bound_methods_need_their_arguments(bad, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "c.db"))
    m = Model(8, None)
    with pytest.raises(TypeError):
        m.step.sites(*bad, jnp.ones(4), jnp.ones(4))


# Library modules as `self` (the examples extra).

STEPS = 8
# A short real study: 3 trials, little runtime sampling, one confirmation round.
TUNE = dict(n_trials=3, progress=False, timing={"target_s": 0.01}, **ONE_ROUND)


def smooth(decay, x):
    return lax.scan(lambda c, _: (decay * c + 1.0, c), x, length=STEPS)


def reference(decay, x):
    return jax.jit(smooth)(decay, x)


def check_method(method, x, expected, cache_path):
    """The bound method's whole interface, on exactly a call's arguments."""
    np.testing.assert_allclose(np.asarray(method(x)[0]), np.asarray(expected[0]), rtol=1e-6)
    [site] = method.sites(x)
    assert site.kind == "scan" and site.length == STEPS and "?" not in site.id
    assert method.config_for(x).source == "default"
    assert "while" in method.lower(x).as_text()  # the default config: the scan stays a loop
    with warnings.catch_warnings():
        # A custom pytree `self` may be measured in-process (jax.export needs a registered
        # serialisation for it); that warning is not what this test is about.
        warnings.simplefilter("ignore", RuntimeWarning)
        result = method.tune(x, **TUNE)
    assert result is not None and result.trials and result.trials[0].state == "complete"
    lookup = method.config_for(x)
    assert lookup.source == "cache", lookup
    assert lookup.config == result.best_config
    assert lookup.entry.function_key == method.key
    # The tuned config is what the call now runs, with the same results.
    np.testing.assert_allclose(np.asarray(method(x)[0]), np.asarray(expected[0]), rtol=1e-6)
    assert cache_path.exists()


def test_equinox_module_method(tmp_path):
    eqx = pytest.importorskip(
        "equinox", reason="needs equinox: install the examples extra, pip install -e '.[examples]'"
    )
    cache = tmp_path / "cache.db"

    class Smoother(eqx.Module):
        decay: jax.Array
        scale: float = eqx.field(static=True)

        @at.autotuned(expected_calls=10_000, cache=str(cache), key="test_methods:Smoother.run")
        def run(self, x):
            c, ys = smooth(self.decay, x)
            return c * self.scale, ys

    m = Smoother(jnp.float32(0.5), 2.0)
    c, ys = reference(jnp.float32(0.5), jnp.ones(4))
    check_method(m.run, jnp.ones(4), (c * 2.0, ys), cache)
    # self is traced: another instance of the same structure shares the signature and the entry.
    other = Smoother(jnp.float32(0.25), 2.0)
    assert other.run.config_for(jnp.ones(4)).source == "cache"
    np.testing.assert_allclose(
        np.asarray(other.run(jnp.ones(4))[0]), np.asarray(reference(jnp.float32(0.25), jnp.ones(4))[0] * 2.0), rtol=1e-6
    )
    # A static field is part of the signature: another value is another (untuned) signature.
    assert Smoother(jnp.float32(0.5), 3.0).run.config_for(jnp.ones(4)).source == "default"


def test_flax_struct_dataclass_method(tmp_path):
    pytest.importorskip("flax", reason="needs flax: install the examples extra, pip install -e '.[examples]'")
    from flax import struct

    cache = tmp_path / "cache.db"

    @struct.dataclass
    class Smoother:
        decay: jax.Array
        scale: float = struct.field(pytree_node=False)

        @at.autotuned(expected_calls=10_000, cache=str(cache), key="test_methods:FlaxSmoother.run")
        def run(self, x):
            c, ys = smooth(self.decay, x)
            return c * self.scale, ys

    m = Smoother(jnp.float32(0.5), 2.0)
    c, ys = reference(jnp.float32(0.5), jnp.ones(4))
    check_method(m.run, jnp.ones(4), (c * 2.0, ys), cache)
    assert Smoother(jnp.float32(0.9), 2.0).run.config_for(jnp.ones(4)).source == "cache"
    # vmap over the traced instance: its leaves are batched like any argument.
    batch = Smoother(jnp.array([0.5, 0.25], jnp.float32), 2.0)
    out = jax.vmap(lambda s, x: s.run(x)[0])(batch, jnp.ones((2, 4)))
    np.testing.assert_allclose(
        np.asarray(out[1]), np.asarray(reference(jnp.float32(0.25), jnp.ones(4))[0] * 2.0), rtol=1e-6
    )
