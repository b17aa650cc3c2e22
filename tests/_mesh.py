"""A study that needs several devices (``HOST_DEVICES``), run in a process of its own.

JAX reads the host-device flag when it starts, once per process, and the test session's JAX
runs on one device: the 8-device studies are loaded, traced and run in a child process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from _repo import ROOT, repo_env

STUDY_DIR = os.path.join(ROOT, "studies")

MESH_SCRIPT = """
import json, sys

sys.path.insert(0, {tests!r})
import jax
import numpy as np

import autotune as at
from autotune.program._space import Space
from autotune.record._studyfile import load_examples
from autotune.study import compare_outputs
from _real import run, sample_configs

path, mode, *rest = sys.argv[1:]
[ex] = load_examples(path)  # asks XLA for HOST_DEVICES host devices: JAX has not started yet
if mode == "lookup":
    found = ex.fn.with_options(cache=rest[0], expected_calls=int(rest[1])).config_for(*ex.args, **ex.kwargs)
    print(json.dumps({{"source": found.source, "config": found.config.to_dict()}}))
    raise SystemExit(0)
sites = ex.fn.sites(*ex.args, **ex.kwargs)
space = Space(sites)
xs = ex.args[1]
out = {{"devices": jax.device_count(), "batch_devices": len(xs.sharding.device_set),
        "batch_shards": sorted({{tuple(s.data.shape) for s in xs.addressable_shards}}),
        "sites": [dict(id=s.id, kind=s.kind, length=s.length, source=s.source) for s in sites],
        "space": len(space),
        "same_as_at_sites": [s.id for s in sites] == [s.id for s in at.sites(ex.fn.fun, *ex.args)]}}
shardings = lambda tree: [str(x.sharding) for x in jax.tree_util.tree_leaves(tree)]
reference = run(ex, space.default())
out["finite"] = all(bool(np.all(np.isfinite(np.asarray(x)))) for x in jax.tree_util.tree_leaves(reference))
out["configs"] = []
for config in sample_configs(space):
    try:
        got = run(ex, config)
    except Exception as exc:
        out["configs"].append(dict(config=str(config), error=f"{{type(exc).__name__}}: {{exc}}"[:800]))
        continue
    out["configs"].append(dict(config=str(config), mismatch=compare_outputs(reference, got),
                               same_shardings=shardings(got) == shardings(reference)))
print(json.dumps(out))
"""


def mesh_process(name: str, mode: str, *rest: str) -> dict:
    """MESH_SCRIPT's JSON for ``studies/NAME.py`` from a process started without XLA_FLAGS's
    device count: loading the study file asks for the devices it declares. ``mode`` is
    ``check`` (sites, shardings, the default and two sample configs run) or ``lookup CACHE CALLS``."""
    flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f)
    env = repo_env(XLA_FLAGS=flags)
    script = MESH_SCRIPT.format(tests=os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [sys.executable, "-c", script, os.path.join(STUDY_DIR, f"{name}.py"), mode, *rest],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
