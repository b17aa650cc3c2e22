"""`make demo`'s decisive part: the demo study's winner changes with the call count.

The demo (scripts/demo.py) tunes studies/demo_unroll.py with the real CLI and asks
``autotune best`` for a few calls and for a million: the plain scan compiles fastest,
the unrolled loop (its schedule folded at compile time) runs several times faster. With
jax >= 0.12 the loop's table is an argument, nothing is folded, and the scan stays
(docs/index.md, "What `make demo` shows").
"""

import json
import os
import subprocess
import sys

import pytest
from _presets import CLI_FAST
from _repo import ROOT

sys.path.insert(0, os.path.join(ROOT, "scripts"))

import demo  # noqa: E402


@pytest.mark.slow
def test_demo_winner_changes_with_the_call_count_and_a_fresh_process_uses_it(tmp_path):
    env = demo.demo_env(str(tmp_path / "cache.db"))
    # The demo's tune with the CLI's timing preset: the two winners differ by a compile (a few calls)
    # and by a run 8x faster or more (a million), which short samples tell apart as well as `make demo`'s.
    demo.run(demo.AUTOTUNE + ["tune", demo.STUDY, "--json", *CLI_FAST], env, show=False)
    few, many = demo.winner(env, demo.FEW_CALLS), demo.winner(env, demo.MANY_CALLS)
    if table_is_an_argument():
        # jax >= 0.12 (docs/index.md): the written-out loop's sines are computed at run time, and it runs
        # slower than the scan under jax.jit. The tuner measures that program, not the exported
        # one that folds them (16 µs against 200), so it never picks the loop.
        assert "for" not in (json.loads(few)["steps"]["repr"], json.loads(many)["steps"]["repr"]), (few, many)
    else:
        assert few != many, f"the same winner {few} for {demo.FEW_CALLS} and {demo.MANY_CALLS} calls"
        # The reason the demo gives: the compile decides a few calls, the run a million.
        assert json.loads(many)["steps"]["repr"] == "for", many
        assert json.loads(few)["steps"]["repr"] != "for", few
    out = subprocess.run([sys.executable, demo.FRESH], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "from cache" in out.stdout and "plain jax.jit" in out.stdout, out.stdout


def table_is_an_argument() -> bool:
    """Whether this jax.jit passes the demo study's 2 KB frequency table to the written-out
    loop as an argument (jax >= 0.12 hoists constants over 1 KB) instead of embedding it."""
    import jax

    import autotune as at
    from autotune.program import _compat
    from autotune.record._studyfile import load_examples

    (ex,) = load_examples(demo.STUDY)
    written_out = at.with_config(ex.fn.fun, at.Config.from_dict({"steps": {"repr": "for"}}))
    return _compat.hoisted_constants(jax.jit(written_out).lower(*ex.args).as_text()) > 0
