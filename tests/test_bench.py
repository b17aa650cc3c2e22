"""scripts/bench.py: a tiny real run in a subprocess, and the report helpers on synthetic data."""

import json
import os
import subprocess
import sys

import pytest
from _repo import ROOT, repo_env

sys.path.insert(0, os.path.join(ROOT, "scripts"))

import bench  # noqa: E402

APPROACH_KEYS = {"cost", "compile_s", "run_s", "trials", "tuning_wall_s", "config"}


def check_shape(result):
    assert isinstance(result["jax"], str) and isinstance(result["device"], str)
    assert isinstance(result["studies"], list) and result["studies"]
    for st in result["studies"]:
        assert isinstance(st["study"], str)
        assert isinstance(st["expected_calls"], (int, float)) and st["expected_calls"] >= 1
        assert isinstance(st["grid_size"], int) and st["grid_size"] >= 1
        assert set(bench.APPROACHES) <= set(st["approaches"]) <= {*bench.APPROACHES, bench.LOOP_ONLY}
        for name, row in st["approaches"].items():
            assert APPROACH_KEYS <= set(row), (name, row)
            assert isinstance(row["config"], dict)
            assert isinstance(row["trials"], int)
            assert row["tuning_wall_s"] >= 0
            if row["cost"] is not None:
                assert row["cost"] > 0 and row["compile_s"] > 0 and row["run_s"] > 0
        assert st["approaches"]["grid"]["trials"] == st["grid_size"]
        assert [c["expected_calls"] for c in st["crossover"]] == bench.CROSSOVER_CALLS


@pytest.mark.slow
def test_bench_quick_one_study_json_shape(tmp_path):
    out_json, out_md = tmp_path / "b.json", tmp_path / "b.md"
    cmd = [
        sys.executable,
        os.path.join(ROOT, "scripts", "bench.py"),
        "--quick",
        "--study",
        "lambda_returns",
        "--grid-max",
        "4",
        "--min-trials",
        "2",
        "--rounds",
        "1",
        "--target-s",
        "0.01",
        "--confirm-top",
        "1",
        "--confirm-rounds",
        "1",
        "--quiet",
        "--json",
        str(out_json),
        "--out",
        str(out_md),
    ]
    env = repo_env()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out_json.read_text())
    check_shape(result)
    st = result["studies"][0]
    assert st["study"] == "lambda_returns" and st["grid_size"] == 4 and st["sampled"] is True
    assert st["approaches"]["default"]["config"] == st["grid_points"][0]["config"]
    assert "SUMMARY" in proc.stdout
    md = out_md.read_text()
    assert "| lambda_returns |" in md and "## Crossover" in md


def _fake_study(costs):
    pts = [
        {
            "config": {"s": {"repr": "scan", "unroll": u}},
            "label": f"s=scan-u{u}",
            "state": "complete",
            "compile_s": c,
            "run_s": r,
            "cost": c + 1000 * r,
        }
        for u, (c, r) in costs.items()
    ]
    return pts


def test_crossover_flips_with_call_count():
    from autotune import Objective

    # u1: cheap compile, slow run; u8: dear compile, fast run.
    pts = _fake_study({1: (0.1, 1e-3), 8: (1.0, 1e-4)})
    rows = bench.crossover(pts, Objective(1000))
    winners = {r["expected_calls"]: r["config"]["s"]["unroll"] for r in rows}
    assert winners[1] == 1 and winners[100_000] == 8
    assert rows[0]["default_cost"] == pytest.approx(0.1 + 1e-3)


def test_grid_sample_keeps_default_and_is_fixed():
    import jax.numpy as jnp
    from jax import lax

    import autotune as at
    from autotune._space import Space

    def f(x):
        x = lax.scan(lambda c, _: (c + 1.0, None), x, length=64)[0]
        return lax.scan(lambda c, _: (c * 0.5, None), x, length=64)[0]

    space = Space(at.sites(f, jnp.zeros(2)))
    assert len(space) > 16
    a, sampled = bench.grid_configs(space, 16, seed=0)
    b, _ = bench.grid_configs(space, 16, seed=0)
    assert sampled and len(a) == 16 and a == b and a[0] == space.default()
    full, sampled = bench.grid_configs(space, 1000, seed=0)
    assert not sampled and len(full) == len(space)


def test_summary_and_markdown():
    approaches = {
        n: {
            "cost": c,
            "compile_s": 0.1,
            "run_s": 1e-4,
            "trials": 8 if n == "grid" else 3,
            "tuning_wall_s": w,
            "config": {},
            "label": "x=for",
        }
        for n, c, w in [
            ("grid", 1.0, 10.0),
            ("tuned", 1.01, 3.0),
            ("random", 1.2, 3.0),
            ("default", 2.0, 0.0),
            ("for", 5.0, 0.0),
            ("unroll8", 1.5, 0.0),
        ]
    }
    st = {
        "study": "fake",
        "expected_calls": 1000,
        "grid_size": 8,
        "sampled": False,
        "approaches": approaches,
        "regret": 1.01,
        "random_regret": 1.2,
        "random_over_tuned": 1.2 / 1.01,
        "default_over_tuned": 2.0 / 1.01,
        "for_over_tuned": 5.0 / 1.01,
        "unroll8_over_tuned": 1.5 / 1.01,
        "wall_tuned_over_grid": 0.3,
        "sites": [{"id": "x", "short": "x", "kind": "loop", "length": 4, "depth": 0}],
        "crossover": bench.crossover(_fake_study({1: (0.1, 1e-3)}), __import__("autotune").Objective(1000)),
    }
    s = bench.summary([st])
    assert s["median_regret"] == pytest.approx(1.01)
    assert all(s["targets"].values())
    result = {
        "summary": s,
        "studies": [st],
        "date": "d",
        "jax": "j",
        "jaxlib": "j",
        "python": "p",
        "device": "cpu",
        "machine": "m",
        "settings": {},
        "wall_s": 1.0,
    }
    check_shape(result)
    md = bench.markdown(result)
    assert "| fake | 1000 | 8 | grid |" in md and "target <= 1.02: met" in md


@pytest.mark.slow
def test_e2e_bench_smallest_mode_writes_its_table_and_json(tmp_path):
    """scripts/e2e_bench.py for one study, one run, ten calls: the shape of what it writes, not the speed."""
    out_json, out_md = tmp_path / "e2e.json", tmp_path / "e2e.md"
    cmd = [
        sys.executable,
        os.path.join(ROOT, "scripts", "e2e_bench.py"),
        "--study",
        "lambda_returns",
        "--trials",
        "2",
        "--runs",
        "1",
        "--calls",
        "10",
        "--run-seconds",
        "0.02",
        "--quiet",
        "--json",
        str(out_json),
        "--out",
        str(out_md),
    ]
    env = repo_env()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out_json.read_text())
    assert isinstance(result["jax"], str) and isinstance(result["device"], str)
    assert result["settings"]["runs"] == 1 and result["settings"]["calls"] == 10
    (st,) = result["scripts"]
    assert st["script"] == "lambda_returns" and st["path"] == os.path.join("studies", "lambda_returns.py")
    (fn,) = st["functions"]
    assert fn["function"] == "lambda_returns:advantages" and fn["expected_calls"] == 20_000
    assert fn["best_cost"] > 0 and fn["default_cost"] > 0 and isinstance(fn["best_config"], dict)
    assert st["calls"] == [10] and st["tuning_wall_s"] > 0
    for mode in ("plain", "tuned"):
        (run,) = st["runs"][mode]
        assert run["wall_s"] > run["import_s"] + run["first_call_s"] + run["calls_s"] > 0, run
        assert run["cpu_s"] > 0
        assert st["median"][mode]["wall_s"] == run["wall_s"]
    assert set(st["ratio"]) == {"wall_s", "cpu_s", "first_call_s", "calls_s"} and all(
        v > 0 for v in st["ratio"].values()
    )
    assert st["met"] == (st["ratio"]["wall_s"] <= result["settings"]["target"])
    assert "| lambda_returns |" in out_md.read_text() and "| lambda_returns |" in proc.stdout
