"""`make demo`: tune the seed workload from scratch, then show a fresh process using the result.

1. lists the loop sites of studies/seed_rollout.py;
2. runs `autotune tune studies/seed_rollout.py` against a fresh cache (a real Optuna study);
3. re-scores the stored trials for other call counts (the winner flips with the call count);
4. starts a fresh Python process that imports the study and calls the decorated function:
   `config_for` says the config came from the cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY = os.path.join(ROOT, "studies", "seed_rollout.py")

FRESH_PROCESS = r"""
import sys, time
sys.path.insert(0, {studies!r})
import seed_rollout as s
params, state = s.init()
lookup = s.execute.config_for(params, state)
print(f"fresh process: config_for -> source={{lookup.source!r}} config={{lookup.config}}")
t0 = time.perf_counter(); s.train(); t1 = time.perf_counter()
print(f"fresh process: seed training loop (4 x 250 calls of execute) took {{t1 - t0:.2f}} s with the tuned config")
assert lookup.source == "cache", "the fresh process did not pick up the cached config"
"""


def run(cmd: list[str], env: dict[str, str]) -> None:
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, env=env, check=True)


def main() -> int:
    work = tempfile.mkdtemp(prefix="autotune-demo-")
    env = dict(os.environ, AUTOTUNE_CACHE=os.path.join(work, "cache.db"), PYTHONUNBUFFERED="1")
    autotune = [sys.executable, "-m", "autotune"]
    run(autotune + ["sites", STUDY], env)
    run(autotune + ["tune", STUDY], env)
    run(autotune + ["best", "--expected-calls", "1"], env)
    run(autotune + ["best", "--expected-calls", "1000000"], env)
    run([sys.executable, "-c", FRESH_PROCESS.format(studies=os.path.dirname(STUDY))], env)
    print(f"\ncache: {env['AUTOTUNE_CACHE']}  (try: AUTOTUNE_CACHE={env['AUTOTUNE_CACHE']} autotune list)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
