"""@at.autotuned: a drop-in for jax.jit that applies the cached config."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autotune as at

FAST = {"target_s": 0.02, "min_reps": 3, "warmup": 1}


def body(c, x):
    return jnp.sin(c) * 0.5 + x, c


def make(cache, **kw):
    @at.autotuned(cache=cache, key="tests:f", **kw)
    def f(x, xs, scale=1.0):
        c, ys = at.loop(body, x, xs, name="l")
        return {"c": c * scale, "ys": ys}

    return f


def test_behaves_like_jit(tmp_path):
    f = make(str(tmp_path / "c.db"))
    x, xs = jnp.ones(4), jnp.ones((8, 4))
    out = f(x, xs, scale=2.0)
    ref = jax.jit(f.autotune.fun)(x, xs, scale=2.0)
    np.testing.assert_array_equal(out["c"], ref["c"])
    np.testing.assert_array_equal(out["ys"], ref["ys"])
    assert "stablehlo" in f.lower(x, xs).as_text() or "func" in f.lower(x, xs).as_text()
    assert f.__name__ == "f"


def test_static_and_donated_args(tmp_path):
    @at.autotuned(cache=str(tmp_path / "c.db"), static_argnums=(1,), donate_argnums=(0,))
    def g(x, n):
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=n, name="g")[0]

    assert float(g(jnp.zeros(()), 3)) == pytest.approx(1.75)
    assert float(g(jnp.zeros(()), 1)) == pytest.approx(1.0)


def test_tune_then_cache_hit_in_this_and_a_fresh_process(tmp_path):
    cache = str(tmp_path / "c.db")
    module = tmp_path / "mod_under_test.py"
    module.write_text(textwrap.dedent(f"""
        import jax.numpy as jnp, autotune as at
        @at.autotuned(cache={cache!r}, expected_calls=100)
        def smooth(x):
            return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=8, name="smooth")[0]
        X = jnp.zeros(16)
    """))
    sys.path.insert(0, str(tmp_path))
    try:
        import mod_under_test as m
    finally:
        sys.path.remove(str(tmp_path))
    assert m.smooth.config_for(m.X).source == "default"
    r = m.smooth.tune(m.X, timing=FAST, storage=str(tmp_path / "s.db"))
    hit = m.smooth.config_for(m.X)
    assert hit.source == "cache" and hit.config == r.best_config
    np.testing.assert_allclose(m.smooth(m.X), jax.jit(m.smooth.autotune.fun)(m.X), rtol=1e-6)
    script = "import mod_under_test as m; l = m.smooth.config_for(m.X); print(l.source, l.config.to_json())"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    source, config = out.stdout.split()
    assert source == "cache" and at.Config.from_json(config) == r.best_config


def test_other_device_or_fingerprint_is_not_applied(tmp_path):
    cache_path = str(tmp_path / "c.db")
    f = make(cache_path)
    x, xs = jnp.ones(4), jnp.ones((8, 4))
    lookup = f.config_for(x, xs)
    cache = at.Cache(cache_path)
    base = dict(function_key="tests:f", fingerprint=lookup.fingerprint, signature=lookup.signature,
                config={"l": {"repr": "for", "unroll": 1}}, sites={"l": {"kind": "loop", "length": 8, "has_ys": True}},
                measurements={"run_s": 1e-6}, objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
                cost=1.0)
    other_jax = dict(at._keys.device_info(), jax="0.0.1")
    cache.put(at.CacheEntry(device=other_jax, **base))
    assert f.config_for(x, xs).source == "default"
    cache.put(at.CacheEntry(device=at._keys.device_info(), **{**base, "fingerprint": "0" * 32}))
    assert f.config_for(x, xs).source == "default"
    cache.put(at.CacheEntry(device=at._keys.device_info(), **base))
    assert f.config_for(x, xs).source == "cache"
    out = f(x, xs)  # the cached "for" config runs and gives the same numbers
    np.testing.assert_allclose(out["ys"], jax.jit(f.autotune.fun)(x, xs)["ys"], rtol=1e-6)


def test_on_miss_warn_warns_once(tmp_path):
    f = make(str(tmp_path / "c.db"), on_miss="warn")
    with pytest.warns(RuntimeWarning, match="no tuned config"):
        f(jnp.ones(4), jnp.ones((8, 4)))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(jnp.ones(4), jnp.ones((8, 4)))


def test_on_miss_tune_tunes_after_first_call(tmp_path):
    f = make(str(tmp_path / "c.db"), on_miss="tune")
    x, xs = jnp.ones(4), jnp.ones((8, 4))
    f(x, xs)
    assert f.config_for(x, xs).source == "cache"


def test_bad_options():
    with pytest.raises(at.ConfigError, match="on_miss"):
        at.autotuned(lambda x: x, on_miss="sometimes")


@pytest.mark.parametrize("fault", ["corrupt", "missing-dir", "newer-schema"])
def test_cache_faults_run_the_default_and_warn_once(tmp_path, fault):
    import sqlite3
    import warnings

    path = tmp_path / "c.db"
    if fault == "corrupt":
        path.write_bytes(os.urandom(4096))
    elif fault == "missing-dir":
        path = tmp_path / "nowhere" / "deeper" / "c.db"
    else:
        at.Cache(str(path)).put(at.CacheEntry(
            function_key="x:y", fingerprint="f" * 32, signature="s", device=at._keys.device_info(),
            config={}, sites={}, measurements={}, objective={"expected_calls": 1, "compile_weight": 1, "runtime_weight": 1},
            cost=1.0))
        with sqlite3.connect(path) as con:
            con.execute("UPDATE autotune_schema_version SET version = 99")
    f = make(str(path))
    x, xs = jnp.ones(4), jnp.ones((8, 4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = f(x, xs)
        f(x * 2, xs)          # a second signature: no second warning
        f(x, xs[:4])
    ours = [w for w in caught if "autotune" in str(w.message)]
    if fault == "missing-dir":
        assert ours == []     # nothing cached yet is not a fault
    else:
        assert len(ours) == 1, [str(w.message) for w in ours]
        assert "default config" in str(ours[0].message)
    np.testing.assert_allclose(out["c"], jax.jit(f.autotune.fun)(x, xs)["c"], rtol=1e-6)


def test_a_shared_study_writes_only_improvements(tmp_path):
    import dataclasses

    f = make(str(tmp_path / "c.db"))
    x, xs = jnp.ones(4), jnp.ones((8, 4))
    storage = str(tmp_path / "s.db")
    r = f.tune(x, xs, n_trials=2, sampler="random", storage=storage, timing=FAST)
    cache = at.Cache(str(tmp_path / "c.db"))
    lookup = f.config_for(x, xs)
    better = dataclasses.replace(lookup.entry, cost=r.best_cost / 1000, config={"l": {"repr": "for", "unroll": 1}})
    cache.put(better)  # as if another box on the same study had found something cheaper
    f.tune(x, xs, n_trials=3, sampler="random", storage=storage, timing=FAST)
    kept = f.config_for(x, xs).entry
    assert kept.cost == better.cost and kept.config == better.config
    other = f.tune(x, xs, n_trials=2, sampler="random", storage=storage, study_name="a-new-study", timing=FAST)
    assert f.config_for(x, xs).entry.study_name == other.study_name == "a-new-study"
