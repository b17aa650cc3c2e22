"""benchmarks.bench: a tiny real run in a subprocess, and the report helpers on synthetic data."""

import json
import os
import statistics
import subprocess
import sys
import time

import pytest
from _exclusive import exclusive_env
from _repo import ROOT, repo_env, tiny_bench
from _wait import wait_until

from benchmarks import _burner, _studies, _study_run, _tables, bench
from benchmarks import _final as _bench_final

APPROACH_KEYS = {"cost", "compile_cost_s", "run_cost_s", "trials", "tuning_wall_s", "config"}


def check_shape(result):
    assert isinstance(result["jax"], str) and isinstance(result["device"], str)
    assert isinstance(result["studies"], list) and result["studies"]
    for st in result["studies"]:
        assert isinstance(st["study"], str)
        assert isinstance(st["expected_calls"], (int, float)) and st["expected_calls"] >= 1
        assert isinstance(st["grid_size"], int) and st["grid_size"] >= 1
        extra = {_studies.LOOP_ONLY, _studies.PRODUCT}  # where XLA's options are searched
        assert set(_studies.APPROACHES) <= set(st["approaches"]) <= {*_studies.APPROACHES, *extra}
        for name, row in st["approaches"].items():
            assert APPROACH_KEYS <= set(row), (name, row)
            assert isinstance(row["config"], dict)
            assert isinstance(row["trials"], int)
            assert row["tuning_wall_s"] >= 0
            if row["cost"] is not None:
                assert row["cost"] > 0 and row["compile_cost_s"] > 0 and row["run_cost_s"] > 0
        assert st["approaches"]["grid"]["trials"] == st["grid_size"]
        assert [c["expected_calls"] for c in st["crossover"]] == _studies.CROSSOVER_CALLS
        if "final" in st:  # the final re-measure's processes: one ratio of default/tuned each
            assert len(st["default_over_tuned_per_process"]) == st["final"]["processes"]


@pytest.mark.slow
def test_bench_quick_one_study_json_shape(tmp_path):
    out_json, out_md = tmp_path / "b.json", tmp_path / "b.md"
    cmd = tiny_bench("lambda_returns", out_json, "--quick", "--grid-max", "4", "--min-trials", "2")
    cmd += ["--final-processes", "2", "--out", str(out_md), "--max-memory", "1GiB"]
    env = repo_env()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out_json.read_text())
    check_shape(result)
    st = result["studies"][0]
    assert result["settings"]["max_memory"] == st["max_memory"] == 2**30  # every approach under one budget
    assert all(p["memory_bytes"] > 0 for p in st["grid_points"] if p.get("state") == "complete")
    loops = [p for p in st["grid_points"] if "@xla" not in p["config"]]  # the XLA stage's variants come on top
    assert st["study"] == "lambda_returns" and len(loops) == 4 and st["sampled"] is True
    assert st["grid_size"] == len(st["grid_points"]) >= 4
    assert st["approaches"]["default"]["config"] == st["grid_points"][0]["config"]
    assert result["settings"]["final_processes"] == 2 and result["settings"]["burner"] is False
    final = st["final"]
    assert len(set(final["pids"])) == 2 and final["parent_pid"] not in final["pids"]
    assert all(len(r["cost_per_process"]) == 2 for r in st["approaches"].values())
    assert "SUMMARY" in proc.stdout
    md = out_md.read_text()
    assert "| lambda_returns |" in md and "## Crossover" in md and "2 fresh process(es)" in md


def _fake_study(costs):
    pts = [
        {
            "config": {"s": {"repr": "scan", "unroll": u}},
            "label": f"s=scan×{u}",
            "state": "complete",
            "compile_cost_s": c,
            "run_cost_s": r,
            "cost": c + 1000 * r,
        }
        for u, (c, r) in costs.items()
    ]
    return pts


def test_crossover_flips_with_call_count():
    from autotune import Objective

    # u1: cheap compile, slow run; u8: dear compile, fast run.
    pts = _fake_study({1: (0.1, 1e-3), 8: (1.0, 1e-4)})
    rows = _study_run.crossover(pts, Objective(1000))
    winners = {r["expected_calls"]: r["config"]["s"]["unroll"] for r in rows}
    assert winners[1] == 1 and winners[100_000] == 8
    assert rows[0]["default_cost"] == pytest.approx(0.1 + 1e-3)


def test_grid_sample_keeps_default_and_is_fixed():
    import jax.numpy as jnp
    from jax import lax

    import autotune as at
    from autotune.program._space import Space

    def f(x):
        x = lax.scan(lambda c, _: (c + 1.0, None), x, length=64)[0]
        return lax.scan(lambda c, _: (c * 0.5, None), x, length=64)[0]

    space = Space(at.sites(f, jnp.zeros(2)))
    assert len(space) > 16
    a, sampled = _study_run.grid_configs(space, 16, seed=0)
    b, _ = _study_run.grid_configs(space, 16, seed=0)
    assert sampled and len(a) == 16 and a == b and a[0] == space.default()
    full, sampled = _study_run.grid_configs(space, 1000, seed=0)
    assert not sampled and len(full) == len(space)


def test_summary_and_markdown():
    approaches = {
        n: {
            "cost": c,
            "compile_cost_s": 0.1,
            "run_cost_s": 1e-4,
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
        "crossover": _study_run.crossover(_fake_study({1: (0.1, 1e-3)}), __import__("autotune").Objective(1000)),
    }
    s = _tables.summary([st])
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
    md = _tables.markdown(result)
    assert "| fake | 1000 | 8 | grid |" in md and "target <= 1.02: met" in md


@pytest.mark.slow
def test_e2e_bench_smallest_mode_writes_its_table_and_json(tmp_path):
    """benchmarks.e2e for one study, one run, ten calls: the shape of what it writes, not the speed."""
    out_json, out_md = tmp_path / "e2e.json", tmp_path / "e2e.md"
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.e2e",
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
    # A device that admits one process, as a TPU chip: the bench's own process must never open it,
    # or the tuner's worker and every timed script would be refused.
    env = exclusive_env(tmp_path)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out_json.read_text())
    assert isinstance(result["jax"], str) and result["device"] == "cpu"
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


def test_a_verdict_needs_the_runs_spread_to_lie_on_one_side_of_the_target():
    """benchmarks._tables.verdict: met / not met only when the bootstrap interval of the paired
    ratios' median lies wholly at or below / above the target; the same runs, the same interval."""
    assert _tables.verdict([0.95, 0.97, 0.96, 0.98, 0.94], 1.02)["verdict"] == "met"
    assert _tables.verdict([1.05, 1.10, 1.07, 1.12, 1.06], 1.02)["verdict"] == "not met"
    spread = [0.90, 1.10, 1.00, 0.95, 1.08]  # a median of 1.0 that five noisy runs cannot place
    v = _tables.verdict(spread, 1.02)
    assert v["verdict"] == "undecided" and v["median"] == 1.0
    assert v["interval"][0] < 1.02 < v["interval"][1] and v["interval"] == _tables.verdict(spread, 1.02)["interval"]
    assert _tables.verdict([0.5, 0.5], 1.02)["verdict"] == "undecided"  # two runs decide nothing


def test_e2e_judges_tier_up_on_paired_runs_and_rejudges_a_saved_result(tmp_path):
    """benchmarks.e2e.judge pairs each tier-up run with the run of the mode whose median is lower;
    ``--judge`` re-judges a saved result written before the verdicts (docs/results holds some)."""
    from benchmarks.e2e import judge

    def runs(*walls):
        return [{"wall_s": w} for w in walls]

    faster = {"plain": runs(5.0, 5.2, 5.1, 5.3, 5.0), "tuned": runs(5.1, 5.0, 5.4, 5.2, 5.1)}
    faster["tiered"] = runs(4.5, 4.6, 4.4, 4.7, 4.5)
    median = {m: {"wall_s": statistics.median(r["wall_s"] for r in v)} for m, v in faster.items()}
    j = judge(faster, median)
    assert j["over_better"]["mode"] == "plain" and j["over_better"]["verdict"] == "met" and j["below_both"]
    # the same tier-up runs against a better mode that sometimes wins: the spread cannot tell
    close = {**faster, "plain": runs(4.3, 4.9, 4.5, 4.2, 4.6)}
    median["plain"] = {"wall_s": 4.5}
    j = judge(close, median)
    assert j["over_better"]["verdict"] == "undecided" and not j["met"] and not j["below_both"]

    saved = json.loads(open(os.path.join(ROOT, "docs", "results", "tier-up-sampler.json")).read())
    assert "over_better" not in saved["tier_up"][0]["per_calls"][0]
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(saved))
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.e2e", "--judge", str(path)], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| tier_sampler |")]
    assert len(rows) == len(saved["tier_up"][0]["per_calls"]) and all("interval" not in r for r in rows)
    assert all(r.split("|")[-3].strip() in ("met", "**not met**", "undecided") for r in rows)


@pytest.mark.slow
def test_e2e_tier_up_mode_times_the_three_modes_and_the_slowdown_beside_the_winners_compile(tmp_path):
    """benchmarks.e2e --tier-up for one study, one run, ten calls: every mode timed, the slowdown
    measured beside the winner's real compile (`benchmarks.e2e.beside_winner`)."""
    out_json, out_md = tmp_path / "tier.json", tmp_path / "tier.md"
    cmd = [sys.executable, "-m", "benchmarks.e2e", "--tier-up", "--study", "lambda_returns", "--trials", "2"]
    cmd += ["--runs", "1", "--tier-calls", "10", "--run-seconds", "0.02", "--quiet"]
    cmd += ["--json", str(out_json), "--out", str(out_md)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=exclusive_env(tmp_path), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (st,) = json.loads(out_json.read_text())["tier_up"]
    (row,) = st["per_calls"]
    assert row["calls"] == 10 and all(len(row["runs"][m]) == 1 for m in ("plain", "tuned", "tiered"))
    assert row["tiered_over_best"] > 0 and set(row["ratio"]) == {"tiered/plain", "tiered/tuned"}
    # one run decides nothing: the target's verdict waits for the runs' spread
    assert row["over_better"]["verdict"] == "undecided" and row["met"] is False and row["below_both"] is False
    (s,) = st["slowdown"]
    assert s["function"] == "lambda_returns:advantages" and s["slowdown"] >= 1.0 and s["alone_s"] > 0
    assert "| lambda_returns | 10 |" in out_md.read_text() and "| undecided | no |" in out_md.read_text()


@pytest.mark.slow
def test_e2e_told_processes_tell_the_decorators_the_calls_they_make(tmp_path):
    """``--told``: the tuned and tier-up processes' decorators take the process's call count as
    their ``expected_calls``; without it they keep the study's (20,000 for lambda_returns)."""
    from benchmarks.e2e import run_once

    path = os.path.join(ROOT, "studies", "lambda_returns.py")
    for mode in ("tuned", "tiered"):
        assert run_once(mode, path, str(tmp_path), 3, told=True)["expected_calls"] == [3]
        assert run_once(mode, path, str(tmp_path), 3)["expected_calls"] == [20_000]


@pytest.mark.slow
def test_final_measure_runs_every_config_in_separate_fresh_processes():
    """The final judgement's samples come from K processes of their own, none of them this one,
    each measuring every config every round; the ratios are the median of per-process ratios."""
    from autotune import Config, Objective
    from autotune.program._space import Space
    from autotune.record._studyfile import load_examples

    path = os.path.join(ROOT, "studies", "lambda_returns.py")
    ex = load_examples(path)[0]
    other = next(c for c in Space(ex.sites()).configs() if c != Config())
    configs = [Config().to_dict(), other.to_dict()]
    measured = _bench_final.final_measure(path, 0, configs, processes=2, rounds=2, timing={"target_s": 0.01})
    pids = [p["pid"] for p in measured["processes"]]
    assert measured["parent_pid"] == os.getpid() and os.getpid() not in pids
    assert len(set(pids)) == 2 and not measured["errors"]
    for process, pid in enumerate(pids):
        own = [s for s in measured["samples"] if s["process"] == process]
        assert {s["pid"] for s in own} == {pid}
        keys = [_bench_final.config_key(c) for c in configs]
        assert sorted((s["round"], s["key"]) for s in own) == sorted((r, k) for r in range(2) for k in keys)
        assert all(s["compile_cost_s"] > 0 and s["run_cost_s"] > 0 for s in own)
    final = _bench_final.aggregate(measured, Objective(ex.fn.expected_calls), processes=2)
    default, tuned = (final[_bench_final.config_key(c)] for c in configs)
    assert default["rounds"] == 4 and len(default["cost_per_process"]) == 2
    median, each = _bench_final.ratio(default, tuned)
    assert len(each) == 2 and median == pytest.approx((each[0] + each[1]) / 2)


@pytest.mark.timing  # "the bench goes on" is a wall-clock bound
def test_a_final_process_past_its_timeout_is_killed_and_recorded_as_failed():
    """A final-measure process that outlives ``timeout_s`` (a config compiling for minutes on an
    accelerator) is stopped: the bench goes on and says which process failed and why."""
    path = os.path.join(ROOT, "studies", "lambda_returns.py")
    started = time.monotonic()
    measured = _bench_final.final_measure(
        path, 0, [{}], processes=2, rounds=1, timing={"target_s": 0.01}, timeout_s=0.2
    )
    assert time.monotonic() - started < 60
    assert [p["pid"] for p in measured["processes"]] == [None, None] and not measured["samples"]
    assert all("ran past 0.2 s and was killed" in p["error"] for p in measured["processes"])


def test_final_ratio_is_the_median_of_the_per_process_ratios():
    from autotune import Objective

    def sample(key, process, compile_s, run_s):
        return {"key": key, "process": process, "pid": 100 + process, "compile_cost_s": compile_s, "run_cost_s": run_s}

    # Process 1 runs "a" slowly (its placement): the pooled medians and the per-process ratios tell it apart.
    samples = [sample("a", 0, 1.0, 1e-3), sample("b", 0, 1.0, 2e-3)]
    samples += [sample("a", 1, 1.0, 9e-3), sample("b", 1, 1.0, 2e-3)]
    samples += [sample("a", 2, 1.0, 1e-3), sample("b", 2, 1.0, 2e-3)]
    final = _bench_final.aggregate({"samples": samples}, Objective(1000, 1.0, 1.0), processes=3)
    assert final["a"]["cost"] == pytest.approx(2.0) and final["b"]["cost"] == pytest.approx(3.0)
    assert final["a"]["cost_per_process"] == pytest.approx([2.0, 10.0, 2.0])
    median, each = _bench_final.ratio(final["b"], final["a"])
    assert each == pytest.approx([1.5, 0.3, 1.5]) and median == pytest.approx(1.5)
    # A process without a sample of either config has no ratio; the median is over the others.
    final["a"]["cost_per_process"][2] = None
    assert _bench_final.ratio(final["b"], final["a"])[0] == pytest.approx((1.5 + 0.3) / 2)


def test_final_order_puts_each_config_at_each_position_and_beside_both_neighbours():
    for n in (2, 3, 5):
        orders = [_bench_final.order_for(n, p, r, rounds=n) for p in range(2) for r in range(n)]
        assert all(sorted(o) == list(range(n)) for o in orders)
        for position in range(n):  # over 2n rounds each config is at each position twice
            assert sorted(o[position] for o in orders) == sorted(list(range(n)) * 2)
        after = {(o[i], o[i + 1]) for o in orders for i in range(n - 1)}
        assert all((b, a) in after for a, b in after)


def test_burner_keeps_a_core_busy_and_is_killed_at_the_end_even_on_an_error():
    assert bench.burner is _burner.burner  # the one burner, which --burner uses
    with _burner.burner(False) as none:
        assert none is None
    with pytest.raises(KeyboardInterrupt):
        with _burner.burner(True) as proc:
            assert proc.poll() is None
            raise KeyboardInterrupt
    assert proc.poll() is not None


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_burner_ends_when_the_bench_is_killed_outright():
    """A bench killed with no chance to clean up (SIGKILL; here os._exit) leaves no core busy."""
    code = (
        "import os\nfrom benchmarks import _burner\n"
        "with _burner.burner() as proc:\n"
        "    print(proc.pid, flush=True)\n"
        "    os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    pid = int(out.stdout.split()[0])
    # a timeout, not a threshold: the burner checks every few ms
    alive = not wait_until(lambda: not _running(pid), timeout=60, interval=0.1)
    if alive:  # the test fails; the burner it found must not outlive it
        os.kill(pid, 9)
    assert not alive


def test_the_stages_replayed_on_a_grid_hold_its_pick_once_they_reach_its_loop_config():
    from benchmarks import _xla_grid

    def pt(unroll, xla, cost):
        config = {"s": {"repr": "scan", "unroll": unroll}, **({"@xla": [xla]} if xla else {})}
        return {"config": config, "state": "complete", "cost": cost}

    # the loop configs cheapest first: ×1, ×2, ×4; the grid's pick is ×2 under O1
    grid = [pt(1, None, 1.0), pt(2, None, 1.1), pt(4, None, 1.2), pt(1, "O1", 0.9), pt(2, "O1", 0.5), pt(4, "O1", 2.0)]
    assert _xla_grid.replay(grid, 1) == (4, 0.9 / 0.5)  # the 3 loop configs and ×1 under O1
    assert _xla_grid.replay(grid, 2) == (5, 1.0) and _xla_grid.replay(grid, 3) == (6, 1.0)
    assert _xla_grid.replay(grid[:3], 1) is None  # a loop-only grid: nothing to replay
