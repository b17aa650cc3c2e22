"""Multi-device programs on 8 host CPU devices: the worker measures the program the user runs
(same mesh, shardings, per-device bytes), a worker that cannot run it means in-process with
one warning, and the signature knows the mesh. Each scenario runs in a process of its own
(tests/_sharded.py), since the device count is fixed when JAX starts."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from _repo import ROOT, TESTS, repo_env


def scenario(case: str, home: Path, devices: int | None = 8, stdin: str | None = None, timeout: float = 900) -> dict:
    """Run a case of tests/_sharded.py with its own cache and studies (in ``home``), on
    ``devices`` host devices (None: no XLA_FLAGS, the case sets the count itself)."""
    env = repo_env(TESTS, XDG_CACHE_HOME=str(home))
    env.pop("XLA_FLAGS", None)
    if devices is not None:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    proc = subprocess.run(
        [sys.executable, "-c", "import _sharded; _sharded.main()", case],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.timing  # measured runtimes of three programs, compared
def test_a_sharded_step_is_measured_in_the_worker_as_the_user_runs_it(tmp_path):
    out = scenario("tune", tmp_path)
    assert out["devices"] == 8
    per_device, whole = out["placement"]["bytes_per_device"], out["whole_bytes"]
    assert out["placement"]["devices"] == list(range(8)) and per_device < whole / 4
    trial = out["trial"]
    assert trial["state"] == "complete" and not trial["warnings"], trial["warnings"]  # isolated, no fallback
    # The trial's program holds the user's per-device bytes, not the whole arrays of a one-device program.
    assert trial["memory"]["argument"] == per_device == out["sharded_memory"]["argument"]
    assert out["one_device_memory"]["argument"] == whole
    assert "@mesh(data=8)" in trial["signature"]
    for mode in ("export", "import"):  # closures cross as jax.export bytes, callbacks are imported
        m = out["modes"][mode]
        assert m["mode"] == mode and m["isolated"] and m["memory"]["argument"] == per_device
        assert math.isclose(m["loss"], out["loss"], rel_tol=1e-5)
    # Runtime: the worker re-timed in turn with the user's program and the one-device program here.
    # (The least of several rounds each: load only ever slows a round down.)
    least = out["least"]
    assert least["sharded"] / least["one_device"] > 2.5, out["times"]  # the one-device program is far off
    assert 0.5 < least["worker"] / least["sharded"] < 2.0, out["times"]
    # The study's own trial is nearer the user's program than the one-device one.
    run = trial["run_s"]
    assert abs(math.log(run / least["sharded"])) < abs(math.log(run / least["one_device"])), (run, out["times"])


@pytest.mark.slow
def test_a_worker_without_the_devices_means_in_process_with_one_warning(tmp_path):
    out = scenario("fallback", tmp_path)
    trial = out["trial"]
    assert len(trial["warnings"]) == 1, trial["warnings"]
    assert "measuring in-process" in trial["warnings"][0] and "sees only devices [0, 1]" in trial["warnings"][0]
    assert trial["state"] == "complete"
    assert trial["memory"]["argument"] == out["placement"]["bytes_per_device"]  # still the user's program


@pytest.mark.slow
def test_shardings_cross_as_json_and_a_process_without_the_devices_says_so(tmp_path):
    out = scenario("codec", tmp_path)
    assert all(out["same"].values()), out["same"]
    wire = out["wire"]["dict"]
    assert wire["rows"]["sharding"]["mesh"]["axes"] == ["a", "b"] and wire["rows"]["sharding"]["spec"] == ["a", None]
    assert wire["explicit"]["sharding"]["mesh"]["axis_types"] == ["Explicit", "Auto"]
    assert wire["device3"]["sharding"] == {"kind": "single", "device": 3, "platform": "cpu", "memory_kind": "device"}
    assert "sharding" not in wire["loose"] and "sharding" not in wire["host"]
    fewer = scenario("decode", tmp_path, devices=2, stdin=json.dumps(out["wire"]))
    assert "device ids [0, 1, 2, 3, 4, 5, 6, 7]" in fewer["error"] and "sees 2 cpu device(s)" in fewer["error"]


@pytest.mark.slow
def test_the_signature_knows_the_mesh_and_is_the_same_in_two_processes(tmp_path):
    first, second = scenario("keys", tmp_path / "a"), scenario("keys", tmp_path / "b")
    for name in ("2x4", "8x1", "renamed"):
        # the decorator's lookup (at jit's trace) and the tuner key a call alike
        assert first[name]["tuned"] == first[name]["called"], name
    assert first["2x4 again"]["called"] is None  # the same mesh: jit does not trace again
    texts = {name: first[name]["tuned"] for name in ("2x4", "8x1", "renamed", "single")}
    assert len(set(texts.values())) == 4, texts
    assert "@mesh(data=2,model=4)" in texts["2x4"] and "@mesh(data=8,model=1)" in texts["8x1"]
    assert "@mesh(batch=2,model=4)" in texts["renamed"] and "@" not in texts["single"]
    assert first["2x4 again"]["tuned"] == texts["2x4"]
    assert {k: v["tuned"] for k, v in first.items()} == {k: v["tuned"] for k, v in second.items()}


@pytest.mark.slow
def test_a_device_count_set_with_jax_config_reaches_the_worker(tmp_path):
    out = scenario("config_devices", tmp_path, devices=None)
    assert out["devices"] == 4 and out["worker_devices"] == [0, 1, 2, 3], out
    assert out["isolated"] and not out["warnings"], out["warnings"]
    assert out["memory"]["argument"] == 64 * 16 * 4 // 4  # a quarter of the batch per device
