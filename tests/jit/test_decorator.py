"""@at.autotuned: a drop-in for jax.jit that applies the cached config."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _presets import STEADY
from _repo import repo_env

import autotune as at


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


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_tune_then_cache_hit_in_this_and_a_fresh_process(tmp_path):
    cache = str(tmp_path / "c.db")
    module = tmp_path / "mod_under_test.py"
    module.write_text(
        textwrap.dedent(f"""
        import jax.numpy as jnp, autotune as at
        @at.autotuned(cache={cache!r}, expected_calls=100)
        def smooth(x):
            return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=8, name="smooth")[0]
        X = jnp.zeros(16)
    """)
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import mod_under_test as m
    finally:
        sys.path.remove(str(tmp_path))
    assert m.smooth.config_for(m.X).source == "default"
    r = m.smooth.tune(m.X, timing=STEADY, confirm_rounds=1, isolate=False, storage=str(tmp_path / "s.db"))
    hit = m.smooth.config_for(m.X)
    assert hit.source == "cache" and hit.config == r.best_config
    np.testing.assert_allclose(m.smooth(m.X), jax.jit(m.smooth.autotune.fun)(m.X), rtol=1e-6)
    script = "import mod_under_test as m; l = m.smooth.config_for(m.X); print(l.source, l.config.to_json())"
    env = repo_env()
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
    base = dict(
        function_key="tests:f",
        fingerprint=lookup.fingerprint,
        signature=lookup.signature,
        config={"l": {"repr": "for", "unroll": 1}},
        sites={"l": {"kind": "loop", "length": 8, "has_ys": True}},
        measurements={"run_s": 1e-6},
        objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
        cost=1.0,
    )
    other_jax = dict(at.program._keys.device_info(), jax="0.0.1")
    cache.put(at.CacheEntry(device=other_jax, **base))
    assert f.config_for(x, xs).source == "default"
    cache.put(at.CacheEntry(device=at.program._keys.device_info(), **{**base, "fingerprint": "0" * 32}))
    assert f.config_for(x, xs).source == "default"
    cache.put(at.CacheEntry(device=at.program._keys.device_info(), **base))
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


@pytest.mark.slow  # a real study with on_miss's own options (8 trials, full timing, a worker)
def test_on_miss_tune_tunes_after_first_call(tmp_path):
    f = make(str(tmp_path / "c.db"), on_miss="tune")
    x, xs = jnp.ones(4), jnp.ones((8, 4))
    f(x, xs)
    assert f.config_for(x, xs).source == "cache"


def test_bad_options():
    with pytest.raises(at.ConfigError, match="on_miss"):
        at.autotuned(lambda x: x, on_miss="sometimes")


@pytest.mark.parametrize("said", ["false", "yes", 1, None])
def test_tier_up_takes_a_bool_only(said):
    """``tier_up="false"`` would be truthy: like ``at.Objective(tier_up="yes")`` it is rejected by name."""
    with pytest.raises(at.ConfigError, match=r"tier_up=.*True or False"):
        at.autotuned(key="m:f", tier_up=said)(lambda x: x)


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
        at.Cache(str(path)).put(
            at.CacheEntry(
                function_key="x:y",
                fingerprint="f" * 32,
                signature="s",
                device=at.program._keys.device_info(),
                config={},
                sites={},
                measurements={},
                objective={"expected_calls": 1, "compile_weight": 1, "runtime_weight": 1},
                cost=1.0,
            )
        )
        with sqlite3.connect(path) as con:
            con.execute("UPDATE autotune_schema_version SET version = 99")
    f = make(str(path))
    x, xs = jnp.ones(4), jnp.ones((8, 4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = f(x, xs)
        f(x * 2, xs)  # a second signature: no second warning
        f(x, xs[:4])
    ours = [w for w in caught if "autotune" in str(w.message)]
    if fault == "missing-dir":
        assert ours == []  # nothing cached yet is not a fault
    else:
        assert len(ours) == 1, [str(w.message) for w in ours]
        assert "default config" in str(ours[0].message)
    np.testing.assert_allclose(out["c"], jax.jit(f.autotune.fun)(x, xs)["c"], rtol=1e-6)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_shared_study_writes_only_improvements(tmp_path):
    import dataclasses

    f = make(str(tmp_path / "c.db"))
    x, xs = jnp.ones(4), jnp.ones((8, 4))
    storage = str(tmp_path / "s.db")
    # Measured in this process: the study and the cache are the point, not the worker.
    fast = {"sampler": "random", "storage": storage, "timing": STEADY, "isolate": False}
    r = f.tune(x, xs, n_trials=2, **fast)
    cache = at.Cache(str(tmp_path / "c.db"))
    first = f.config_for(x, xs).entry
    # The same study again with nothing new to measure: the entry is not rewritten.
    again = f.tune(x, xs, n_trials=2, **fast)
    assert again.finished and again.stored == "kept" and f.config_for(x, xs).entry == first
    # An entry that claims this study but names a config the study never confirmed (a hand edit)
    # is no measurement of it: its cost, from another moment, is never set against this run's
    # rounds, so the study's next confirmation replaces it.
    # (scan×2: the seeded random sampler's three draws are scan×1, scan×4 and for. A config the
    # study did re-time would be judged against the winner in those rounds, and may stand.)
    hand_edit = at.Config.from_dict({"l": {"repr": "scan", "unroll": 2}})
    foreign = dataclasses.replace(first, cost=r.best_cost / 1000, config=hand_edit.to_dict())
    cache.put(foreign)
    r3 = f.tune(x, xs, n_trials=3, **fast)
    assert hand_edit not in {p.config for p in r3.confirmed}, "the premise: this study never re-timed it"
    assert r3.stored == "written" and f.config_for(x, xs).entry.config == r3.best_config.to_dict()
    other = f.tune(x, xs, n_trials=2, study_name="a-new-study", **fast)
    assert f.config_for(x, xs).entry.study_name == other.study_name == "a-new-study"


# ------------------------------------------- programs the project never saw: optimistix, lineax

EXAMPLES = "install the examples extra: pip install -e '.[examples]' (CI does: make test EXTRAS=test,examples)"


def newton_root(y0, a):
    """A vmapped Newton root find: lineax's linear_solve holds a bare Jaxpr with constvars."""
    optx = pytest.importorskip("optimistix", reason=f"needs optimistix and lineax: {EXAMPLES}")
    return optx.root_find(
        lambda y, args: jnp.tanh(y) - 0.5 * y + args, optx.Newton(rtol=1e-6, atol=1e-6), y0, args=a
    ).value


def root_loss(a, y0):
    return jnp.sum(jax.vmap(newton_root)(y0, a) ** 2)


Y0, A = jnp.ones((4, 3)), jnp.linspace(0.0, 1.0, 12).reshape(4, 3)


def assert_runs_as_jit(fn, args, cache, key, recwarn):
    tuned = at.autotuned(fn, cache=cache, key=key)
    got, want = tuned(*args), jax.jit(fn)(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(g, w)
    assert not [str(w.message) for w in recwarn if "autotune" in str(w.message)]
    return tuned


def test_a_vmapped_optimistix_newton_root_find_runs_as_under_jit(tmp_path, recwarn):
    tuned = assert_runs_as_jit(jax.vmap(newton_root), (Y0, A), str(tmp_path / "c.db"), "tests:root", recwarn)
    assert tuned.autotune.last_lookup.source == "default"


def test_value_and_grad_through_a_root_find_runs_as_under_jit(tmp_path, recwarn):
    """The implicit adjoint: the backward pass solves a linear system through lineax."""
    assert_runs_as_jit(jax.value_and_grad(root_loss), (A, Y0), str(tmp_path / "c.db"), "tests:root_vg", recwarn)


@pytest.mark.slow
def test_tuning_a_root_find_stores_an_entry_the_next_call_applies(tmp_path, recwarn):
    cache = str(tmp_path / "c.db")
    tuned = assert_runs_as_jit(jax.value_and_grad(root_loss), (A, Y0), cache, "tests:root_tune", recwarn)
    storage = str(tmp_path / "s.db")  # one round of confirmation: the entry is the point, not the pick
    result = tuned.tune(
        A, Y0, n_trials=2, confirm_rounds=1, isolate=False, progress=False, timing=STEADY, storage=storage
    )
    assert result is not None and tuned.config_for(A, Y0).source == "cache"
    fresh = at.autotuned(jax.value_and_grad(root_loss), cache=cache, key="tests:root_tune")
    value, grad = fresh(A, Y0)
    assert fresh.autotune.last_lookup.source == "cache"
    want_value, want_grad = jax.jit(jax.value_and_grad(root_loss))(A, Y0)
    np.testing.assert_allclose(value, want_value, rtol=1e-5)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)


# ------------------------------------------------ a failure of ours: the default, one warning


class NoRepr:
    """A value jax.jit takes as a static argument or primitive parameter (hashable, comparable)
    that has no text form: the key and the fingerprint, which describe it, cannot."""

    def __hash__(self):
        return 7

    def __eq__(self, other):
        return isinstance(other, NoRepr)

    def __repr__(self):
        raise RuntimeError("NoRepr has no text form")


def tagged_primitive():
    from jax.extend import core as jex
    from jax.interpreters import mlir

    prim = jex.Primitive("autotune_test_tagged")

    def impl(x, *, tag):
        return jnp.sin(x) + 1.0

    prim.def_impl(impl)
    prim.def_abstract_eval(lambda x, *, tag: x)
    mlir.register_lowering(prim, mlir.lower_fun(impl, multiple_results=False))
    return prim


TAGGED = tagged_primitive()


def smooth_static(x, tag):
    return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="l")[0]


def smooth_tagged(x):
    return TAGGED.bind(at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="l")[0], tag=NoRepr())


@pytest.mark.parametrize(
    "fn, static, step", [(smooth_static, (1,), "key its call signature"), (smooth_tagged, (), "fingerprint it")]
)
def test_a_failure_of_ours_runs_the_default_with_one_warning_naming_the_function(tmp_path, fn, static, step):
    import warnings

    key = f"tests:{fn.__name__}"  # warnings are once per process, function and error type
    tuned = at.autotuned(fn, cache=str(tmp_path / "c.db"), key=key, static_argnums=static)
    plain = jax.jit(fn, static_argnums=static)
    extra = (NoRepr(),) if static else ()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 4):  # a second signature fails the same way: no second warning
            np.testing.assert_array_equal(tuned(jnp.ones(n), *extra), plain(jnp.ones(n), *extra))
    ours = [str(w.message) for w in caught if "autotune" in str(w.message)]
    assert len(ours) == 1, ours
    assert step in ours[0] and key in ours[0] and "RuntimeError: NoRepr has no text form" in ours[0]
    assert tuned.autotune.last_lookup.source == "default (error)"


def test_an_error_of_the_function_itself_is_raised_as_under_jit(tmp_path, recwarn):
    def bad(x):
        return x @ jnp.ones((5, 5))  # shapes do not fit: jax.jit raises TypeError

    with pytest.raises(TypeError) as under_jit:
        jax.jit(bad)(jnp.ones(3))
    with pytest.raises(TypeError) as under_autotune:
        at.autotuned(bad, cache=str(tmp_path / "c.db"), key="tests:bad")(jnp.ones(3))
    assert str(under_autotune.value) == str(under_jit.value)
    assert not [w for w in recwarn if "autotune" in str(w.message)]


# ------------------------------------------- the first call: no SQLAlchemy, the config applied

FIRST_CALL = textwrap.dedent("""
    import json, sys
    import jax, jax.numpy as jnp
    import first_call_app as app
    x = jnp.linspace(0.0, 1.0, int(sys.argv[1]))
    y = app.smooth(x)
    loaded = "sqlalchemy" in sys.modules
    lookup = app.smooth.autotune.last_lookup
    same = bool(jnp.allclose(y, jax.jit(app.smooth.autotune.fun)(x), rtol=1e-6))
    print(json.dumps({"sqlalchemy": loaded, "source": lookup.source, "config": lookup.config.to_json(),
                      "loops_in_hlo": app.smooth.lower(x).as_text().count("stablehlo.while"), "same": same}))
""")


@pytest.mark.slow
def test_the_first_call_reads_the_cache_without_sqlalchemy_and_applies_the_entry(tmp_path):
    cache = str(tmp_path / "c.db")
    (tmp_path / "first_call_app.py").write_text(
        textwrap.dedent(f"""
        import jax.numpy as jnp, autotune as at
        @at.autotuned(cache={cache!r}, key="tests:first_call")
        def smooth(x):
            return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=8, name="l")[0]
    """)
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import first_call_app as app
    finally:
        sys.path.remove(str(tmp_path))
    lookup = app.smooth.config_for(jnp.zeros(16))
    at.Cache(cache).put(
        at.CacheEntry(  # "for": the loop is unrolled, no while loop is left in the program
            function_key="tests:first_call",
            fingerprint=lookup.fingerprint,
            signature=lookup.signature,
            device=at.program._keys.device_info(),
            config={"l": {"repr": "for", "unroll": 1}},
            sites={"l": {"kind": "loop", "length": 8, "has_ys": False}},
            measurements={},
            objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
            cost=1.0,
        )
    )
    env = repo_env(tmp_path)

    def first_call(n):
        out = subprocess.run(
            [sys.executable, "-c", FIRST_CALL, str(n)], capture_output=True, text=True, env=env, timeout=300
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    hit, miss = first_call(16), first_call(5)  # 16: the entry's signature; 5: none stored
    assert hit["source"] == "cache" and at.Config.from_json(hit["config"]) == at.Config({"l": {"repr": "for"}})
    assert miss["source"] == "default" and miss["config"] == at.Config().to_json()
    assert hit["loops_in_hlo"] == 0 and miss["loops_in_hlo"] == 1, (hit, miss)
    assert hit["same"] and miss["same"]
    assert not hit["sqlalchemy"] and not miss["sqlalchemy"], (hit, miss)


LIGHT = textwrap.dedent("""
    import sys, threading
    import autotune as at
    loaded = lambda *names: [n for n in names if n in sys.modules]
    print(loaded("sqlalchemy", "optuna", "autotune.program._compat", "autotune.program._sites"))
    f = at.autotuned(lambda x: x, key="tests:light")
    for t in threading.enumerate():  # the first call's modules load on a background thread
        if t.name == "autotune-prefetch":
            t.join()
    print(loaded("sqlalchemy", "optuna", "autotune.program._sites", "autotune.program._rewrite",
                 "autotune.cache._fastread"))
""")


def test_import_loads_the_decorator_only_and_decorating_prefetches_the_call_path():
    from autotune.jit import _decorator, _record

    assert _decorator._ENV_RECORD == _record.ENV_RECORD
    env = repo_env()
    env.pop("AUTOTUNE_RECORD", None)
    out = subprocess.run([sys.executable, "-c", LIGHT], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    after_import, after_decorating = [eval(line) for line in out.stdout.strip().splitlines()[-2:]]
    assert after_import == []
    assert after_decorating == ["autotune.program._sites", "autotune.program._rewrite", "autotune.cache._fastread"]


def test_what_the_decorator_hands_out_does_not_depend_on_the_cache(tmp_path):
    # A miss and a hit hand out the same type with the same attributes (the report: a miss was a
    # plain jit without `.function`); the objective travels whole, built from the keywords once.
    cache_path = str(tmp_path / "c.db")
    missed = make(cache_path, expected_calls=50, processes=2, compilation_cache=False)
    x, xs = jnp.ones(4), jnp.ones((8, 4))
    lookup = missed.config_for(x, xs)
    at.Cache(cache_path).put(
        at.CacheEntry(
            device=at.program._keys.device_info(),
            function_key="tests:f",
            fingerprint=lookup.fingerprint,
            signature=lookup.signature,
            config={"l": {"repr": "for", "unroll": 1}},
            sites={"l": {"kind": "loop", "length": 8, "has_ys": True}},
            measurements={"run_s": 1e-6},
            objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
            cost=1.0,
        )
    )
    hit = make(cache_path, expected_calls=50, processes=2, compilation_cache=False)
    assert hit.config_for(x, xs).source == "cache" and lookup.source == "default"
    assert type(missed) is type(hit)
    names = ("tune", "sites", "config_for", "with_options", "function", "lower", "key", "expected_calls", "autotune")
    for f in (missed, hit):
        assert all(hasattr(f, name) for name in names), [n for n in names if not hasattr(f, n)]
        assert f.autotune.objective == at.Objective(50, processes=2, compilation_cache=False)
    wider = hit.autotune.with_options(expected_calls=7)
    assert wider.objective == at.Objective(7, processes=2, compilation_cache=False)
    assert wider.expected_calls == 7 and wider.compilation_cache is False
    assert make(cache_path).autotune.compilation_cache is None  # not said: detected when used
