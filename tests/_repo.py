"""The repository as the tests see it: its root, an environment that imports it, and a
subprocess runner; one definition each, imported by the test modules (fixtures of the same
names live in conftest.py).

    >>> from _repo import ROOT, python, repo_env
    >>> r = python("-c", "import autotune", env=repo_env())
    >>> r.returncode
    0
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"


def repo_env(*first: str | os.PathLike, base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """``base`` (default: this process's environment) with the repository importable, on CPU.

    Args:
        first: folders put on ``PYTHONPATH`` before the repository (a test's own modules).
        extra: variables set last (they win over everything else).
    """
    env = dict(os.environ if base is None else base)
    env["JAX_PLATFORMS"] = "cpu"
    paths = [os.fspath(p) for p in first] + [str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(extra)
    return env


def python(*argv: str | os.PathLike, cwd=None, env=None, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """``python ARGV`` (this interpreter) with stdout and stderr captured as text, stdin closed;
    ``env`` defaults to :func:`repo_env`."""
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(
        [sys.executable, *map(os.fspath, argv)],
        cwd=cwd,
        env=repo_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def mode(path) -> int:
    """A file's permission bits (``0o600``...)."""
    return stat.S_IMODE(os.stat(path).st_mode)


def tiny_bench(study: str, out_json, *flags: str) -> list[str]:
    """``python -m benchmarks.bench`` on one study at the smallest budgets (a plumbing check, not a
    measurement): one round, one confirm round, 0.01 s of timed calls, JSON to ``out_json``;
    ``flags`` add to or repeat these (argparse keeps the last)."""
    return [
        sys.executable,
        "-m",
        "benchmarks.bench",
        "--study",
        study,
        "--min-trials",
        "1",
        "--rounds",
        "1",
        "--final-processes",
        "1",
        "--target-s",
        "0.01",
        "--confirm-top",
        "1",
        "--confirm-rounds",
        "1",
        "--quiet",
        "--json",
        os.fspath(out_json),
        *flags,
    ]
