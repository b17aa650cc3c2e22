"""The `autotune` command, run as a real subprocess."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

STUDY = textwrap.dedent("""
    import jax.numpy as jnp, autotune as at

    @at.autotuned(expected_calls=100)
    def smooth(x):
        return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=4, name="smooth")[0]

    def examples():
        return [(smooth, (jnp.zeros(8),))]
""")


def cli(*args, cwd, env):
    return subprocess.run([sys.executable, "-m", "autotune", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def env(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return dict(os.environ, AUTOTUNE_CACHE=str(tmp_path / "cache.db"),
                PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))


def test_tune_best_list_export_import(tmp_path, env):
    (tmp_path / "tiny_study.py").write_text(STUDY)
    r = cli("sites", "tiny_study.py", "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert [s["id"] for s in json.loads(r.stdout)] == ["smooth"]
    r = cli("tune", "tiny_study.py", "--run-seconds", "0.02", "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    (res,) = json.loads(r.stdout)
    assert res["function"] == "tiny_study:smooth" and res["trials"][0]["config"] == {"smooth": {"repr": "scan", "unroll": 1}}
    r = cli("best", "--json", cwd=tmp_path, env=env)
    (entry,) = json.loads(r.stdout)
    assert entry["config"] == res["best_config"]
    r = cli("best", "--function", "nope:nothing", cwd=tmp_path, env=env)
    assert r.returncode == 1 and "no cache entry" in r.stderr
    assert "tiny_study:smooth" in cli("list", cwd=tmp_path, env=env).stdout
    assert cli("export", "out.json", cwd=tmp_path, env=env).returncode == 0
    other = dict(env, AUTOTUNE_CACHE=str(tmp_path / "other.db"))
    assert cli("import", "out.json", cwd=tmp_path, env=other).returncode == 0
    assert json.loads(cli("best", "--json", cwd=tmp_path, env=other).stdout)[0]["config"] == res["best_config"]
    # Re-running resumes the study: the trial count does not grow for an exhausted grid.
    again = json.loads(cli("tune", "tiny_study.py", "--run-seconds", "0.02", "--json", cwd=tmp_path, env=env).stdout)
    assert len(again[0]["trials"]) == len(res["trials"])


@pytest.mark.parametrize("args, message", [
    (["tune", "missing.py"], "does not exist"),
    (["tune", "empty_study.py"], "nothing to tune"),
    (["list", "--cache", "notadialect://x"], "notadialect"),
    (["tune", "tiny_study.py", "--trials", "zero"], "not a whole number"),
    (["tune", "tiny_study.py", "--expected-calls", "-5"], "must be a finite number"),
])
def test_clear_errors(tmp_path, env, args, message):
    (tmp_path / "empty_study.py").write_text("x = 1\n")
    (tmp_path / "tiny_study.py").write_text(STUDY)
    r = cli(*args, cwd=tmp_path, env=env)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr
