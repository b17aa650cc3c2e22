"""A decorated function, its reference and a real cache entry for it (tests/measuring/test_faults.py,
test_url.py, and the lookup processes test_faults starts)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from _repo import repo_env

import autotune as at
from autotune.program import _keys

ENV = repo_env(PYTHONDONTWRITEBYTECODE="1")
FOR = {"l": {"repr": "for"}}


def smooth_body(c, _):
    return c * 0.5 + 1.0, None


def make(cache):
    @at.autotuned(cache=str(cache), key="faults:smooth")
    def smooth(x):
        return at.loop(smooth_body, x, length=8, name="l")[0]

    return smooth


def reference(x):
    return jax.jit(lambda x: at.loop(smooth_body, x, length=8, name="l")[0])(x)


def put_entry(cache_path, fn, x, config=FOR, **device_changes):
    """A cache entry for ``fn`` on ``x`` under the real key (this program, signature, device)."""
    lookup = fn.config_for(x)
    entry = at.CacheEntry(
        function_key=fn.key,
        fingerprint=lookup.fingerprint,
        signature=lookup.signature,
        device={**_keys.device_info(), **device_changes},
        config=config,
        sites={"l": {"kind": "loop", "length": 8, "has_ys": False}},
        measurements={"run_s": 1e-6},
        objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
        cost=1.0,
    )
    with at.Cache(str(cache_path)) as cache:
        cache.put(entry)
    return entry


def call_and_count(fn):
    """Call ``fn`` on two signatures (two cache lookups); return (config source, our RuntimeWarnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for x in (jnp.zeros(3), jnp.ones(5), jnp.ones(5) * 2):
            np.testing.assert_allclose(fn(x), reference(x), rtol=1e-6)
        source = fn.config_for(jnp.zeros(3)).source
    ours = [w for w in caught if issubclass(w.category, RuntimeWarning) and "autotune" in str(w.message)]
    return source, ours
