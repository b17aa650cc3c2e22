"""autotune/cli/__init__.py: `autotune` as a real subprocess: one-line errors with exit 2,
quiet broken pipes, tracebacks only for bugs, and a light import."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _cli import STUDY, cli_env, run

BROKEN = {
    "raises_study.py": "import autotune as at\n\ndef examples():\n    raise FileNotFoundError('data/x.npy')\n",
    "wrongargs_study.py": textwrap.dedent("""
        import jax.numpy as jnp, autotune as at

        @at.autotuned
        def f(x):
            return at.loop(lambda c, _: (c + 1.0, None), x, length=2, name="l")[0]

        def examples():
            return [(f, (jnp.zeros(2), jnp.zeros(2)))]
    """),
    "tracetype_study.py": textwrap.dedent("""
        import jax.numpy as jnp, autotune as at

        @at.autotuned
        def f(x, table):
            return at.loop(lambda c, _: (c + table["w"], None), x, length=2, name="l")[0]

        def examples():
            return [(f, (jnp.zeros(2), [1.0]))]
    """),
    "valueerror_study.py": textwrap.dedent("""
        import jax.numpy as jnp, autotune as at

        @at.autotuned
        def f(x):
            raise ValueError("a bug in the user's function")

        def examples():
            return [(f, (jnp.zeros(2),))]
    """),
}


@pytest.fixture
def folder(tmp_path):
    for name, text in BROKEN.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "tiny_study.py").write_text(STUDY)
    (tmp_path / "empty_study.py").write_text("x = 1\n")
    return tmp_path


@pytest.mark.parametrize(
    "args, message",
    [
        (["sites", "raises_study.py"], "examples() raised FileNotFoundError: data/x.npy"),
        (["tune", "raises_study.py"], "examples() raised FileNotFoundError: data/x.npy"),
        (["sites", "wrongargs_study.py"], "examples()[0] passes arguments that wrongargs_study:f(x) does not take"),
        (["tune", "wrongargs_study.py", "--json"], "examples()[0] passes arguments that wrongargs_study:f(x)"),
        (["sites", "tracetype_study.py"], "examples()[0] (tracetype_study:f) could not be traced with its arguments"),
        (["tune", "tracetype_study.py"], "examples()[0] (tracetype_study:f) could not be traced with its arguments"),
        (["tune", "missing.py"], "does not exist"),
        (["tune", "empty_study.py"], "nothing to tune"),
        (["list", "--cache", "notadialect://x"], "notadialect"),
    ],
)
def test_errors_are_one_line_with_exit_2(folder, args, message):
    r = run(*args, cwd=folder, env=cli_env(folder))
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["tune", "tiny_study.py", "--trials", "zero"], "'zero' is not a whole number"),
        (["tune", "tiny_study.py", "--expected-calls", "-5"], "must be a finite number"),
        (["tune", "tiny_study.py", "--run-seconds", "0"], "'0' must be a finite number > 0"),
    ],
)
def test_bad_options_are_one_line_with_exit_2(folder, args, message):
    r = run(*args, cwd=folder, env=cli_env(folder))
    assert r.returncode == 2 and message in r.stderr and "usage:" not in r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("autotune tune: error: argument ")
    assert r.stderr.rstrip().endswith("`autotune tune --help` lists the options.")


def test_version_and_the_exit_status_table():
    from autotune import __version__
    from autotune.cli import EXIT_STATUS, PARTIAL

    r = subprocess.run([sys.executable, "-m", "autotune", "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith(f"autotune {__version__} (Python ")
    assert set(EXIT_STATUS) == {"0", "1", "2", str(PARTIAL), "128 + N"} and "tune --recorded" in EXIT_STATUS["3"]


def test_a_bug_prints_its_traceback_and_says_so(folder):
    r = run("sites", "valueerror_study.py", cwd=folder, env=cli_env(folder))
    assert r.returncode == 1
    assert "Traceback" in r.stderr and "ValueError: a bug in the user's function" in r.stderr
    assert r.stderr.rstrip().endswith("the traceback above shows where.")


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_closed_pipe_ends_quietly(folder, tmp_path):
    from _points import put_entry

    put_entry(tmp_path / "cache.db")
    env = cli_env(folder)
    for args in (["best", "--json"], ["list"]):
        p = subprocess.Popen(
            [sys.executable, "-m", "autotune", *args],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        p.stdout.close()  # the reader is gone before anything is written (like `| head -0`)
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) == 0 and err == "", err
    r = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {sys.executable} -m autotune best --json | head -1"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout == "[\n" and r.stderr == "", r.stderr


def test_importing_the_cli_loads_neither_optuna_nor_matplotlib(tmp_path):
    code = "import sys, autotune.cli; print(sorted(m for m in ('optuna', 'matplotlib') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], env=cli_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "[]", r.stderr


def test_the_console_script_and_python_m_both_work(tmp_path):
    r = run("--help", cwd=tmp_path, env=cli_env(tmp_path))
    assert r.returncode == 0 and "pending" in r.stdout and "report" in r.stdout
    script = Path(sys.executable).parent / "autotune"
    if not script.exists():
        pytest.skip(f"no console script beside {sys.executable} (the package is not pip-installed here)")
    r = subprocess.run([str(script), "--help"], env=cli_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "tune" in r.stdout, r.stderr
    assert os.access(script, os.X_OK)
