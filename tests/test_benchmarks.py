"""The benchmarks package (``python -m benchmarks.<name>``): no module imports a module that
imports it back, deferred imports (inside a function) counted; the package's index names every
module it holds; the smoke runs of its scripts (marked slow: ``make test-fast`` leaves them out)."""

import ast
import re
from pathlib import Path

import pytest
from _repo import ROOT

import benchmarks

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


def test_the_package_index_names_every_module_and_nothing_else():
    """``benchmarks/__init__.py``'s docstring lists each script (``- ``name``: ...``) and each helper."""
    doc = benchmarks.__doc__
    scripts = set(re.findall(r"^- ``(\w+)``", doc, re.M))
    helpers = set(re.findall(r"``(_\w+)``", doc))
    on_disk = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert scripts == {m for m in on_disk if not m.startswith("_")}, "the index's scripts are not the package's"
    assert helpers == {m for m in on_disk if m.startswith("_")}, "the index's helpers are not the package's"


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_shapes_benchmark_tunes_a_second_signature_seeded_and_fresh_and_judges_both_winners(tmp_path):
    """``python -m benchmarks.shapes --quick``: one case, four trials; the shape of what it writes."""
    import json

    from _repo import python

    out = tmp_path / "shapes.json"
    r = python("-m", "benchmarks.shapes", "--quick", "--quiet", "--json", str(out), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    result = json.loads(out.read_text())
    (row,) = result["rows"]
    assert row["case"] == row["study"] == "lambda_returns" and row["first"]["seeding"] is None
    assert row["fresh"]["seeding"] is None and row["seeded"]["seeding"]["neighbours"]  # only one was seeded
    assert row["wall_ratio"] == row["seeded"]["wall_s"] / row["fresh"]["wall_s"] > 0
    assert row["cost_ratio"] > 0 and result["summary"]["runs"] == 1
    assert "| lambda_returns | batch ×2" in r.stdout and "wall seeded/fresh: median" in r.stdout
