"""`Lookup`: which config a call signature gets; its one-line repr and notebook table; and
warnings of the decorator shown at the user's line, not autotune's."""

import subprocess
import sys
import textwrap

import jax.numpy as jnp

import autotune as at
from autotune.cache import CacheEntry
from autotune.jit._lookup import Lookup


def smooth(x):
    return at.loop(lambda c, _: (0.5 * c + 1.0, None), x, length=8, name="smooth")[0]


def _entry(cost=0.5, default_cost=1.0):
    return CacheEntry(
        function_key="m:f",
        fingerprint="fp",
        signature="sig",
        device={"platform": "cpu"},
        config={"smooth": {"repr": "scan", "unroll": 4}},
        sites={"smooth": {"kind": "loop", "length": 8, "has_ys": False}},
        measurements={"run_s": 0.001},
        objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
        cost=cost,
        default_cost=default_cost,
    )


def test_repr_of_a_cached_config_names_notation_source_gain_and_cost():
    config = at.Config.from_dict({"smooth": {"repr": "scan", "unroll": 4}})
    lookup = Lookup(config, "cache", _entry(), "fp", "sig", "cpu")
    assert repr(lookup) == "Lookup(smooth=scan×4 from cache, 2× the default, cost 0.5 s)"
    html = lookup._repr_html_()
    assert "<table>" in html and "smooth=scan×4" in html and "2×" in html and "cache" in html


def test_repr_of_the_default_and_of_an_error_is_one_line():
    assert repr(Lookup(at.Config(), "default", None, "fp", "sig", "cpu")) == "Lookup(default from default)"
    failed = Lookup(at.Config(), "default (error)", None, "?", "?", "?", "TypeError: boom\n  in the middle")
    assert repr(failed) == "Lookup(default from default (error), error: TypeError: boom in the middle)"
    assert "boom" in failed._repr_html_() and "\n" not in repr(failed)


def test_config_for_returns_a_lookup_with_that_repr(tmp_path):
    f = at.autotuned(smooth, key="tests:smooth", cache=str(tmp_path / "c.db"))
    lookup = f.config_for(jnp.zeros(4))
    assert lookup.source == "default" and repr(lookup) == "Lookup(default from default)"


def test_warnings_point_at_the_users_line(tmp_path):
    """The decorator's warnings (an unstable key at decoration, a cache miss inside jit's
    trace) name the user's file and line, not a line of autotune or JAX."""
    script = tmp_path / "user_script.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import jax.numpy as jnp
            import autotune as at

            def make():
                @at.autotuned(on_miss="warn", cache={str(tmp_path / "c.db")!r})
                def inner(x):
                    return at.loop(lambda c, _: (0.5 * c, None), x, length=4, name="l")[0]
                return inner

            f = make()
            y = f(jnp.zeros(3))
            """
        )
    )
    lines = script.read_text().splitlines()
    decorated = next(i for i, line in enumerate(lines, 1) if "@at.autotuned" in line)
    called = next(i for i, line in enumerate(lines, 1) if "f(jnp.zeros(3))" in line)
    from _repo import repo_env

    proc = subprocess.run(
        [sys.executable, "-W", "always", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=repo_env(),
    )
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert f"{script}:{decorated}: RuntimeWarning: autotune: " in err and "no stable function key" in err
    assert f"{script}:{called}: RuntimeWarning: autotune: no tuned config" in err
    assert "autotune/jit/_decorator.py" not in err and "autotune/jit/_lookup.py" not in err


def test_a_warning_at_the_users_line_never_breaks_a_python_c_program(tmp_path):
    """``python -c``: the user's "file" has no source a loader can give; the warning still shows."""
    from _repo import repo_env

    code = (
        "import jax.numpy as jnp, autotune as at\n"
        f"f = at.autotuned(lambda x: x + 1, on_miss='warn', key='m:f', cache={str(tmp_path / 'c.db')!r})\n"
        "print(f(jnp.ones(2)).sum())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=repo_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "4.0"
    assert "<string>:3: RuntimeWarning: autotune: no tuned config for m:f" in proc.stderr
