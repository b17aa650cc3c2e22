"""@at.autotuned applies a cached config's XLA options: a jit per XLA choice, calls routed per
signature; a function without such an entry stays a plain jax.jit; options that fail mean the
default config and one warning."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autotune as at
from autotune.program import _xla

OPT_LEVEL = b"xla_backend_optimization_level"


def f(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, None, length=8, name="l")[0]


def _store(path: str, xla: list[str]) -> None:
    """A cache entry for ``f`` on ``jnp.ones(4)``: the loop fully unrolled, with XLA options ``xla``."""
    lookup = at.autotuned(f, cache=path, key="tests:xla_f").config_for(jnp.ones(4))
    at.Cache(path).put(
        at.CacheEntry(
            device=at.program._keys.device_info(),
            function_key="tests:xla_f",
            fingerprint=lookup.fingerprint,
            signature=lookup.signature,
            config={"l": {"repr": "for", "unroll": 1}, "@xla": xla},
            sites={"l": {"kind": "loop", "length": 8, "has_ys": False}},
            measurements={"run_s": 1e-6},
            objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
            cost=1.0,
        )
    )


def _built_with(compiled, key: bytes) -> bool:
    return key in compiled.runtime_executable().serialize()


def test_without_an_xla_entry_it_stays_a_plain_jit(tmp_path):
    g = at.autotuned(f, cache=str(tmp_path / "c.db"), key="tests:xla_f")
    assert type(g) is type(jax.jit(f))  # calls cost exactly a jit dispatch
    assert not _built_with(g.lower(jnp.ones(4)).compile(), OPT_LEVEL)


def test_a_stored_xla_entry_is_applied(tmp_path):
    path = str(tmp_path / "c.db")
    _store(path, ["O0"])
    g = at.autotuned(f, cache=path, key="tests:xla_f")
    x = jnp.ones(4)
    lookup = g.config_for(x)
    assert lookup.source == "cache" and str(lookup.config) == "l=for, xla:O0"
    assert _built_with(g.lower(x).compile(), OPT_LEVEL)  # the executable of this signature has the option
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(g(x), jax.jit(f)(x), rtol=1e-6)
        np.testing.assert_allclose(g(jnp.ones(3)), jax.jit(f)(jnp.ones(3)), rtol=1e-6)  # no entry: the plain jit
    assert not _built_with(g.lower(jnp.ones(3)).compile(), OPT_LEVEL)


def test_a_plain_jit_decorated_before_the_entry_warns_once(tmp_path):
    path = str(tmp_path / "c.db")
    g = at.autotuned(f, cache=path, key="tests:xla_f")  # handed out before the entry: a plain jit
    _store(path, ["nollvm"])
    x = jnp.ones(4)
    with pytest.warns(RuntimeWarning, match=r"sets XLA options \(xla:nollvm\).*compiles without them"):
        out = g(x)
    np.testing.assert_allclose(out, jax.jit(f)(x), rtol=1e-6)


def test_options_that_fail_mean_the_default_and_one_warning(tmp_path, monkeypatch):
    bogus = _xla.XlaOption("bogus", "bogus", ("cpu",), {"xla_no_such_option_for_a_test": 1})
    monkeypatch.setitem(_xla._BY_NAME, "bogus", bogus)  # test data: an option this jaxlib refuses
    path = str(tmp_path / "c.db")
    _store(path, ["bogus"])
    g = at.autotuned(f, cache=path, key="tests:xla_f")
    x = jnp.ones(4)
    with pytest.warns(RuntimeWarning, match="sets XLA options xla:bogus, which failed here") as caught:
        out = g(x)
    assert len([w for w in caught if "xla:bogus" in str(w.message)]) == 1
    np.testing.assert_allclose(out, jax.jit(f)(x), rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(g(x), out)  # later calls: the default, no second warning
    assert g.last_lookup.config == at.Config()
