"""scripts/tpu_session.sh, the TPU runs one device command each, tried on the CPU as its header says
(``NO_WHEELS=1``, the venv's Python, small studies): the parts run and write where ``OUT`` says."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _presets import CLI_FAST, ONE_ROUND_CLI
from _repo import ROOT, repo_env

SCRIPT = ROOT / "scripts" / "tpu_session.sh"


def session(part: str, out, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = repo_env(NO_WHEELS="1", PYTHON=sys.executable, OUT=str(out), AUTOTUNE_STUDY_SIZE="small", **extra)
    cmd = ["bash", str(SCRIPT), part, *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_an_unknown_part_is_one_line_naming_the_parts(tmp_path):
    r = session("nope", tmp_path)
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert "unknown part 'nope'" in line and "e2e-tier" in line and "bench-one NAME" in line


@pytest.mark.slow
def test_the_check_part_tunes_a_study_in_its_worker(tmp_path):
    # The CLI's timing preset and one confirmation round: the part's plumbing, not the pick.
    r = session("check", tmp_path, *CLI_FAST, *ONE_ROUND_CLI, TRIAL_TIMEOUT="120")
    assert r.returncode == 0, r.stderr
    assert "autotune tune: exit 0" in r.stdout and '"without isolation" warnings: 0' in r.stdout
    (result,) = json.loads((tmp_path / "check.json").read_text())
    assert result["function"] == "accel_rnn:encode" and result["trials"]
    assert "tuning accel_rnn:encode" in (tmp_path / "check.log").read_text()


@pytest.mark.slow
def test_bench_one_runs_one_study_with_the_arguments_after_it_and_streams_its_progress(tmp_path):
    # The benchmark at its smallest after --quick (the arguments the test checks arrive): no XLA
    # options (tests/test_bench.py runs the loop-only approach), one trial more than the default,
    # 0.01 s of timed calls, one confirmation round.
    smallest = ("--xla", "off", "--min-trials", "1", "--target-s", "0.01", *ONE_ROUND_CLI)
    r = session("bench-one", tmp_path, "accel_rnn", "--quick", "--grid-max", "4", *smallest, TRIAL_TIMEOUT="120")
    assert r.returncode == 0, r.stderr
    result = json.loads((tmp_path / "tpu-accel_rnn.json").read_text())
    assert [s["study"] for s in result["studies"]] == ["accel_rnn"]
    assert result["settings"]["grid_max"] == 4 and not result["partial"]
    assert "grid" in (tmp_path / "tpu-accel_rnn.log").read_text()  # the progress lines, not --quiet


@pytest.mark.slow
def test_the_builders_part_tunes_a_study_with_and_without_builders(tmp_path):
    r = session("builders", tmp_path, "accel_rk4", "--trials", "2", "--builders", "2", *CLI_FAST)
    assert r.returncode == 0, r.stderr
    result = json.loads((tmp_path / "builders-accel_rk4.json").read_text())
    assert [row["builders"] for row in result["rows"]] == [0, 2]
    assert result["wall_ratio"] > 0 and "compiles in" in result["rows"][1]["compiled_in"][0]
    assert "wall with 2 builders" in (tmp_path / "builders-accel_rk4.log").read_text()
