"""_keys: function keys that survive `python app.py` vs `import app`, signatures, device keys, study names."""

import textwrap
import warnings

import jax.numpy as jnp
import pytest
from _repo import python

import autotune as at
from autotune.program import _keys

APP = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    @at.autotuned(cache={cache!r})
    def step(x):
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=8, name="s")[0]

    if __name__ == "__main__":
        import sys
        if sys.argv[1:] == ["tune"]:
            step.tune(jnp.zeros(4), n_trials=2, timing={{"target_s": 0.01}}, confirm_rounds=1, isolate=False)
        print("KEY", step.key, "SOURCE", step.config_for(jnp.zeros(4)).source)
""")


def run(args, cwd, **kw):
    return python(*args, cwd=cwd, **kw)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_script_function_has_the_same_key_run_as_a_script_and_imported(tmp_path):
    (tmp_path / "app.py").write_text(APP.format(cache=str(tmp_path / "cache.db")))
    tuned = run(["app.py", "tune"], tmp_path)
    assert tuned.returncode == 0, tuned.stderr
    assert "KEY app:step SOURCE cache" in tuned.stdout
    imported = run(
        [
            "-c",
            "import app, jax.numpy as jnp; print('KEY', app.step.key, 'SOURCE', "
            "app.step.config_for(jnp.zeros(4)).source)",
        ],
        tmp_path,
    )
    assert "KEY app:step SOURCE cache" in imported.stdout, imported.stderr
    # Under `python -m`, the module's own name.
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "app.py").write_text(APP.format(cache=str(tmp_path / "cache2.db")))
    as_module = run(["-m", "pkg.app"], tmp_path)
    assert "KEY pkg.app:step" in as_module.stdout, as_module.stderr


def test_a_lambda_or_closure_warns_once_and_names_key():
    def outer():
        @at.autotuned
        def inner(x):
            return x + 1

        return inner

    with pytest.warns(RuntimeWarning, match="key="):
        outer()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outer()  # once per key
        at.autotuned(key="tests:named")(lambda x: x)  # an explicit key: no warning
    assert _keys.unstable_key_reason("m:<lambda>") and _keys.unstable_key_reason("m:f.<locals>.g")
    assert _keys.unstable_key_reason("m:Class.method") is None


def test_signature_device_key_and_study_name_are_deterministic():
    sig = _keys.signature((jnp.zeros((2, 3), jnp.float32), 4), {"k": jnp.ones(2, jnp.int32)})
    assert "float32[2,3]" in sig and "static:4" in sig and "int32[2]" in sig
    info = _keys.device_info()
    assert (
        _keys.device_key(info) == f"{info['platform']}|{info['device_kind']}|{info['device_count']}|"
        f"jax={info['jax']}|jaxlib={info['jaxlib']}"
    )
    obj = at.Objective(expected_calls=1000)
    name = _keys.study_name("m:f", "0123456789abcdef", sig, info, obj)
    assert name == _keys.study_name("m:f", "0123456789abcdef", sig, info, obj)
    assert name.startswith("m:f@0123456789/") and name.endswith("calls=1000,cw=1,rw=1")
    assert _keys.study_name("m:f", "0123456789abcdef", sig, info, obj, "pareto").endswith("/pareto")


def test_the_study_name_keeps_timing_modes_apart():
    info, obj = _keys.device_info(), at.Objective(expected_calls=1000)
    names = {
        mode: _keys.study_name("m:f", "0123456789abcdef", "sig", info, obj, timing=mode)
        for mode in ("steady", "blocking")
    }
    assert names["steady"] != names["blocking"]
    assert "/steady/" in names["steady"] and "/blocking/" in names["blocking"]


def test_a_typed_prng_key_argument_has_a_signature_and_tunes(tmp_path):
    import jax

    @at.autotuned(cache=str(tmp_path / "c.db"), key="tests:noisy")
    def noisy(key, x):
        return at.loop(lambda c, _: (c * 0.5 + jax.random.normal(key, c.shape), None), x, length=4, name="n")[0]

    key = jax.random.key(0)
    assert "key<fry>" in _keys.signature((key, jnp.zeros(2)))
    out = noisy(key, jnp.zeros(2))
    assert out.shape == (2,) and noisy.config_for(key, jnp.zeros(2)).source == "default"


def test_a_leaf_on_a_mesh_has_its_axes_in_the_signature_the_same_concrete_abstract_and_traced():
    import jax
    import numpy as np
    from jax.sharding import AxisType, Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = np.array(jax.devices()[:1]).reshape(1, 1)
    x = jnp.ones((4, 2))
    on = {axes: jax.device_put(x, NamedSharding(Mesh(devices, axes), P(axes[0]))) for axes in (("a", "b"), ("c", "b"))}
    texts = {axes: _keys.signature((v,)) for axes, v in on.items()}
    assert texts[("a", "b")].endswith("float32[4,2]@mesh(a=1,b=1)") and "@mesh(c=1,b=1)" in texts[("c", "b")]
    assert "@" not in _keys.signature((x,)) and "@" not in _keys.signature((jax.device_put(x, jax.devices()[0]),))
    # The tuner (program_key traces a probe), the decorator (inside jit's trace) and a
    # ShapeDtypeStruct all read the same abstract value.
    a = on[("a", "b")]
    assert _keys.program_key(lambda v: v * 2, (a,), {}, {})[1] == texts[("a", "b")]
    struct = jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding)
    assert _keys.signature((struct,)) == texts[("a", "b")]
    explicit = Mesh(devices, ("a", "b"), axis_types=(AxisType.Explicit, AxisType.Auto))
    text = _keys.signature((jax.device_put(x, NamedSharding(explicit, P("a"))),))
    assert text.endswith("@mesh(a=1,b=1;Explicit,Auto)P('a', None)"), text  # explicit axes: the spec is in the type
