"""``@at.autotuned`` on methods (autotune/_methods.py): of an Equinox ``eqx.Module`` and of a
flax ``struct.dataclass`` (``self`` is a traced pytree), and of a hashable class with
``static_argnums=0`` (``self`` is static). On ``instance.method``, ``.sites``, ``.tune``,
``.config_for`` and ``.lower`` take exactly a call's arguments, and after ``.tune(x)`` the
lookup comes from the cache.

The Equinox and flax cases need the ``examples`` extra; they skip with the reason without it.
"""

from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import autotune as at

STEPS = 8
# A short real study: 3 trials, little runtime sampling, one confirmation round.
TUNE = dict(n_trials=3, progress=False, timing={"target_s": 0.01}, confirm_top=1, confirm_rounds=1)


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
    eqx = pytest.importorskip("equinox", reason="needs equinox: install the examples extra, pip install -e '.[examples]'")
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
    np.testing.assert_allclose(np.asarray(other.run(jnp.ones(4))[0]),
                               np.asarray(reference(jnp.float32(0.25), jnp.ones(4))[0] * 2.0), rtol=1e-6)
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
    np.testing.assert_allclose(np.asarray(out[1]), np.asarray(reference(jnp.float32(0.25), jnp.ones(4))[0] * 2.0),
                               rtol=1e-6)


def make_static_class(cache: str):
    """A hashable configuration class whose method takes ``self`` as a static argument."""

    @dataclasses.dataclass(frozen=True)
    class Static:
        decay: float
        scale: float

        @at.autotuned(expected_calls=10_000, cache=cache, key="test_methods:Static.run", static_argnums=0)
        def run(self, x):
            c, ys = smooth(self.decay, x)
            return c * self.scale, ys

    return Static


def test_static_hashable_self(tmp_path):
    cache = tmp_path / "cache.db"
    Static = make_static_class(str(cache))
    m = Static(0.5, 2.0)
    c, ys = reference(0.5, jnp.ones(4))
    check_method(m.run, jnp.ones(4), (c * 2.0, ys), cache)
    # self's value is part of the signature (it is static): an equal instance finds the entry,
    # a different one does not.
    assert Static(0.5, 2.0).run.config_for(jnp.ones(4)).source == "cache"
    assert Static(0.25, 2.0).run.config_for(jnp.ones(4)).source == "default"


def test_plain_function_with_static_first_argument(tmp_path):
    cache = tmp_path / "cache.db"

    @at.autotuned(expected_calls=10_000, cache=str(cache), key="test_methods:scaled", static_argnums=0)
    def scaled(scale, x):
        c, ys = smooth(0.5, x)
        return c * scale, ys

    x = jnp.ones(4)
    [site] = scaled.sites(3.0, x)
    assert site.length == STEPS
    assert "while" in scaled.lower(3.0, x).as_text()  # the default config: the scan stays a loop
    result = scaled.tune(3.0, x, **TUNE)
    assert result.trials[0].state == "complete"
    assert scaled.config_for(3.0, x).source == "cache"
    assert scaled.config_for(4.0, x).source == "default"
    np.testing.assert_allclose(np.asarray(scaled(3.0, x)[0]), np.asarray(reference(0.5, x)[0] * 3.0), rtol=1e-6)
