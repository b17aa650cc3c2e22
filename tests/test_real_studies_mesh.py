"""The real studies on an 8-device mesh (studies/real_sharded_train.py: a jitted step, batch
sharded over "data"; studies/real_shard_map.py: the same RNN written with shard_map). They run in
processes started with their devices (tests/_mesh.py): sites, shardings and sample configs match
the default, `autotune tune` tunes each end to end, too few devices is one line naming the flag,
and the benchmark runs a mesh study in a process of its own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from _mesh import mesh_process
from _real import MESH, READABLE, SPECS, cli_tunes_the_study
from _repo import ROOT, repo_env, tiny_bench


@pytest.mark.slow
@pytest.mark.parametrize("name", MESH)
def test_cli_tunes_the_study(name, tmp_path):
    cli_tunes_the_study(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", MESH)
def test_mesh_study_runs_on_its_devices_and_configs_match_the_default(name):
    spec = SPECS[name]
    out = mesh_process(name, "check")
    # The batch (64 sequences) is split over the 8 devices of the "data" axis: 8 each.
    assert out["devices"] == spec.devices and out["batch_devices"] == spec.devices
    assert [s[0] for s in out["batch_shards"]] == [64 // spec.devices]
    sites = out["sites"]
    assert [s["kind"] for s in sites] == list(spec.kinds) and [s["length"] for s in sites] == list(spec.lengths)
    assert out["same_as_at_sites"] and out["space"] >= 4
    assert all(READABLE.match(s["id"]) and s["source"] for s in sites), sites
    assert any(re.fullmatch(spec.library_site, s["id"]) for s in sites), sites
    assert out["finite"]
    # Every sample config runs the sharded program (for shard_map: the loop rewritten under the
    # mesh's axis names) with the default's results and the same output shardings.
    for c in out["configs"]:
        assert "error" not in c and c["mismatch"] is None and c["same_shardings"], c


@pytest.mark.slow
def test_mesh_study_with_too_few_devices_is_one_line_naming_the_flag():
    env = repo_env(XLA_FLAGS="--xla_force_host_platform_device_count=2")
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", "sites", os.path.join("studies", "real_shard_map.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "needs 8 devices" in text and "runs with 2 cpu device(s)" in text, text
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=8 autotune tune studies/real_shard_map.py" in text


@pytest.mark.slow
def test_bench_runs_a_mesh_study_in_a_process_of_its_own(tmp_path):
    out_json = tmp_path / "b.json"
    cmd = tiny_bench("real_sharded_train", out_json, "--grid-max", "2")
    env = repo_env()
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out_json.read_text())
    [st] = result["studies"]
    assert result["device"].endswith(" x1") and st["device"].endswith(" x8"), (result["device"], st.get("device"))
    assert st["study"] == "real_sharded_train" and st["grid_size"] == 2
    assert st["approaches"]["default"]["cost"] is not None
