"""The benchmarks package (``python -m benchmarks.<name>``): no module imports a module that
imports it back, deferred imports (inside a function) counted."""

import ast
from pathlib import Path

from _repo import ROOT

PACKAGE = ROOT / "benchmarks"


def imports_of(path: Path) -> set[str]:
    """The ``benchmarks.*`` modules a file imports anywhere in it (top level or in a function)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("benchmarks.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "benchmarks":
                out |= {f"benchmarks.{a.name}" for a in node.names}
            elif node.module.startswith("benchmarks."):
                out.add(node.module)
    return out


def graph() -> dict[str, set[str]]:
    return {f"benchmarks.{p.stem}": imports_of(p) for p in sorted(PACKAGE.glob("*.py")) if p.stem != "__init__"}


def test_no_import_cycle_in_benchmarks():
    edges = graph()
    assert "benchmarks.bench" in edges and edges["benchmarks.bench"], "the walk found the bench's imports"
    done: set[str] = set()

    def visit(mod: str, path: list[str]) -> None:
        assert mod not in path, "import cycle: " + " -> ".join([*path[path.index(mod) :], mod])
        if mod in done:
            return
        for dep in sorted(edges.get(mod, ())):
            visit(dep, [*path, mod])
        done.add(mod)

    for mod in edges:
        visit(mod, [])


def test_no_sys_path_insert_in_benchmarks():
    for p in PACKAGE.glob("*.py"):
        assert "sys.path.insert" not in p.read_text(), p.name


def test_the_tpu_rnn_probe_runs_on_the_cpu_and_writes_one_row_per_shape_and_unroll(tmp_path):
    """``python -m benchmarks.tpu_rnn_probe --small``: the same code path as on a TPU, CPU-sized."""
    import json

    from _repo import python

    from benchmarks import tpu_rnn_probe

    out = tmp_path / "probe.json"
    r = python("-m", "benchmarks.tpu_rnn_probe", "--small", "--calls", "2", "--json", str(out), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())["rows"]
    expected = [(list(s), u) for s in tpu_rnn_probe.SMALL_SHAPES for u in tpu_rnn_probe.UNROLLS]
    assert [(row["shape"], row["unroll"]) for row in rows] == expected
    assert all(row["compile_s"] > 0 and row["run_s"] > 0 for row in rows)


def test_the_beside_benchmark_times_the_default_alone_beside_the_stand_in_and_beside_the_winners_build(tmp_path):
    """``python -m benchmarks.beside``: one round, short timings; the shape of what it writes."""
    import json

    from _repo import python

    out = tmp_path / "beside.json"
    args = ("--study", "lambda_returns", "--rounds", "1", "--target-s", "0.01", "--json", str(out))
    r = python("-m", "benchmarks.beside", *args, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(out.read_text())["functions"]
    assert row["function"] == "lambda_returns:advantages"
    assert all(v == {"repr": "for"} for v in row["config"].values()) and row["config"]
    assert row["alone_s"] > 0 and row["stand_in"] >= 1.0 and row["winner"] >= 1.0
    assert row["build_alone_s"] > 0 and row["build_beside_s"] > 0  # the compiles' side too
    assert row["stand_in_compile"] >= 1.0 and row["winner_compile"] >= 1.0
    assert "| lambda_returns:advantages |" in r.stdout


def test_the_levers_benchmark_times_calls_beside_lowering_at_each_interval_and_beside_each_compile_option(tmp_path):
    """``python -m benchmarks.beside_levers``: one round, short timings; the shape of what it writes."""
    import json

    from _repo import python

    out = tmp_path / "levers.json"
    args = ("--study", "demo_unroll", "--rounds", "1", "--target-s", "0.01", "--intervals", "0.001")
    r = python("-m", "benchmarks.beside_levers", *args, "--json", str(out), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(out.read_text())["functions"]
    assert row["function"] == "demo_unroll:sample" and row["config"] == {"steps": {"repr": "for"}}
    assert set(row["lower"]) == {"5 ms (default)", "1 ms"} and set(row["compile"]) == {"none", "split 1"}
    assert all(v["s"] > 0 and v["lower_stretch"] > 0 for v in row["lower"].values())
    assert all(v["s"] > 0 for v in row["compile"].values()) and row["alone_s"] > 0
    assert "switch interval 1 ms" in r.stdout and "options: split 1" in r.stdout


def test_the_tier_routes_benchmark_splits_the_winners_build_and_times_processes_with_a_child(tmp_path):
    """``python -m benchmarks.tier_routes``: one build, one process of each mode; the shape of what it writes."""
    import json

    from _repo import python

    out = tmp_path / "routes.json"
    args = ("--study", "lambda_returns", "--repeats", "1", "--runs", "1", "--calls", "2", "--json", str(out))
    r = python("-m", "benchmarks.tier_routes", *args, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    result = json.loads(out.read_text())
    assert result["study"] == "lambda_returns"
    assert all(result["phases"][k] > 0 for k in ("trace_s", "lower_s", "compile_s", "default_compile_s"))
    (row,) = result["spawn"]
    assert row["calls"] == 2 and row["alone_s"] > 0 and row["with_child_s"] > 0
    assert row["ratio"] == row["with_child_s"] / row["alone_s"]
    assert "| 2 |" in r.stdout and "compile s" in r.stdout


def test_the_tpu_tier_probe_times_three_configs_and_says_whether_tiering_pays(tmp_path):
    """``python -m benchmarks.tpu_tier_probe --small``: the rows and the verdict it writes."""
    import json

    from _repo import python

    out = tmp_path / "tier-probe.json"
    r = python("-m", "benchmarks.tpu_tier_probe", "--small", "--calls", "2", "--json", str(out), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    result = json.loads(out.read_text())
    assert [row["config"] for row in result["rows"]] == ["scan×1", "scan×8", "for"]
    assert all(row["compile_s"] > 0 and row["run_s"] > 0 for row in result["rows"])
    (v,) = result["verdicts"]
    assert isinstance(v["pays"], bool) and v["for_speedup"] > 0 and "tiering pays" in r.stdout
