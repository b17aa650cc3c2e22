"""`make demo`: tune a workload whose winner depends on the call count, then use it from a fresh process.

1. lists the loop sites of studies/demo_unroll.py (a sampler: 48 steps over a fixed schedule);
2. runs ``autotune tune`` on it against a fresh cache (a real Optuna study, about a minute);
3. re-picks from the stored measurements for 10 calls and for 1,000,000 calls: the plain
   scan compiles fastest, the unrolled loop runs fastest, so the two winners differ;
4. runs scripts/demo_fresh.py in a fresh process: plain ``jax.jit`` against the tuned
   config, first call and steady state side by side.

``tests/test_demo.py`` runs steps 2 and 3 and checks the two winners differ.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY = os.path.join(ROOT, "studies", "demo_unroll.py")
FRESH = os.path.join(ROOT, "scripts", "demo_fresh.py")
FUNCTION = "demo_unroll:sample"
# A few calls (a script run once) and a service's day: the compile decides one, the run the other.
FEW_CALLS, MANY_CALLS = 10, 1_000_000
AUTOTUNE = [sys.executable, "-m", "autotune"]


def demo_env(cache: str) -> dict[str, str]:
    """The environment of every step: the demo's own cache, unbuffered output."""
    return dict(os.environ, AUTOTUNE_CACHE=cache, PYTHONUNBUFFERED="1")


def run(cmd: list[str], env: dict[str, str], show: bool = True) -> str:
    """Run one step; print its command line and output when ``show``; return its stdout."""
    words = ["autotune", *cmd[3:]] if cmd[:3] == AUTOTUNE else ["python", *cmd[1:]]
    shown = [os.path.relpath(w, ROOT) if os.path.isabs(w) and w.startswith(ROOT) else w for w in words]
    if show:
        print("\n$ " + " ".join(shown), flush=True)
        subprocess.run(cmd, env=env, check=True, cwd=ROOT)
        return ""
    return subprocess.run(cmd, env=env, check=True, cwd=ROOT, capture_output=True, text=True).stdout


def winner(env: dict[str, str], calls: int) -> str:
    """The config ``autotune best`` re-picks for ``calls`` calls, as the cache stores it (JSON text)."""
    out = run(AUTOTUNE + ["best", "--json", "--function", FUNCTION, "--expected-calls", str(calls)], env, show=False)
    (entry,) = json.loads(out)
    return json.dumps(entry["config"], sort_keys=True)


def main() -> int:
    work = tempfile.mkdtemp(prefix="autotune-demo-")
    env = demo_env(os.path.join(work, "cache.db"))
    run(AUTOTUNE + ["sites", STUDY], env)
    run(AUTOTUNE + ["tune", STUDY], env)
    print(f"\n# The same measurements re-picked for {FEW_CALLS} calls and for {MANY_CALLS:,} calls:", flush=True)
    run(AUTOTUNE + ["best", "--function", FUNCTION, "--expected-calls", str(FEW_CALLS)], env)
    run(AUTOTUNE + ["best", "--function", FUNCTION, "--expected-calls", str(MANY_CALLS)], env)
    print("\n# A fresh process: plain jax.jit against the tuned config", flush=True)
    run([sys.executable, FRESH], env)
    cache = env["AUTOTUNE_CACHE"]
    print(f"\ncache: {cache}")
    print(f"figures: AUTOTUNE_CACHE={cache} autotune report --function {FUNCTION} --out {os.path.join(work, 'report')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
