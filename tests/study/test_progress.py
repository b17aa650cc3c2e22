"""Progress: shown by default at a terminal (a real pseudo-terminal), silent through a pipe."""

import re
import subprocess
import sys
import textwrap

import pytest
from _cli import on_terminal
from _repo import repo_env

SCRIPT = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    def f(x):
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="p")[0]

    r = at.tune(f, jnp.zeros(4), storage={storage!r}, isolate=False, timing={{"target_s": 0.01}}, confirm_rounds=1
                {extra})
    print("DONE", r.best_config)
""")


def run_under_pty(script: str) -> str:
    """Run ``script`` with stdout and stderr on a real pseudo-terminal; return what it wrote."""
    return on_terminal([sys.executable, "-c", script], env=repo_env(), columns=100)[1]


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_progress_is_shown_at_a_terminal_and_not_through_a_pipe(tmp_path):
    at_terminal = run_under_pty(SCRIPT.format(storage=str(tmp_path / "a.db"), extra=""))
    # The standing best stays on the line from the first measured trial until confirmation ends,
    # then gives way to the winner (the last status).
    assert "DONE" in at_terminal and "tuning" in at_terminal
    assert re.search(r"best \S+ s: p=\S+", at_terminal), at_terminal[-2000:]
    assert re.search(r"winner p=\S+ at \S+ s", at_terminal), at_terminal[-2000:]
    piped = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(storage=str(tmp_path / "b.db"), extra="")],
        capture_output=True,
        text=True,
        env=repo_env(),
        timeout=300,
    )
    assert "DONE" in piped.stdout and "tuning" not in piped.stderr
    quiet = run_under_pty(SCRIPT.format(storage=str(tmp_path / "c.db"), extra=", progress=False"))
    assert "DONE" in quiet and "tuning" not in quiet
