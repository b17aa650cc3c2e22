"""autotune/cli/_cache_cmds.py: `autotune best`, `list`, `export`, `import` on real SQLite caches."""

from __future__ import annotations

import dataclasses
import json

import pytest
from _points import (  # binary-exact: crossovers at 512, 4,096
    FOR,
    RETUNE,
    SCAN,
    THREE,
    UNROLL,
    entry,
    put_entry,
)

from autotune import cli
from autotune.cache import Cache


def test_best_json_includes_the_crossovers(tmp_path, capsys):
    put_entry(tmp_path / "c.db")
    assert cli.main(["best", "--cache", str(tmp_path / "c.db"), "--json"]) == 0
    (e,) = json.loads(capsys.readouterr().out)
    assert e["crossovers"] == [
        {"config": SCAN, "from_calls": 0.0, "to_calls": 512.0},
        {"config": UNROLL, "from_calls": 512.0, "to_calls": 4096.0},
        {"config": FOR, "from_calls": 4096.0, "to_calls": None},
    ]
    # Re-picked for another call count: the config flips, the crossovers stay.
    assert cli.main(["best", "--cache", str(tmp_path / "c.db"), "--json", "--expected-calls", "100000"]) == 0
    (e,) = json.loads(capsys.readouterr().out)
    assert e["config"] == FOR and e["crossovers"][2]["from_calls"] == 4096.0


def test_best_table_shows_the_intervals(tmp_path, capsys):
    put_entry(tmp_path / "c.db")
    assert cli.main(["best", "--cache", str(tmp_path / "c.db")]) == 0
    text = capsys.readouterr().out
    assert "cheapest for calls" in text
    for span in ("[0, 512)", "[512, 4,096)", "[4,096, ∞)"):
        assert span in text
    assert "l=scan×4 ★" in text  # the chosen config is marked in the Pareto sub-table
    assert "{" not in text  # no JSON in any cell
    assert "6.906 s" in text  # the cost, with its unit


def test_best_outside_the_range_says_so_and_prints_the_retune_command(tmp_path, capsys):
    db = str(tmp_path / "c.db")
    put_entry(tmp_path / "c.db", complete_range={"from_calls": 0.0, "to_calls": 2000.0, "why": "pruned"}, retune=RETUNE)
    assert cli.main(["best", "--cache", db]) == 0
    text = capsys.readouterr().out
    assert "[0, 2,000]" in text and "not measured" not in text
    assert cli.main(["best", "--cache", db, "--expected-calls", "100000"]) == 0
    text = capsys.readouterr().out
    assert "the configs were not measured for 100,000 calls" in " ".join(text.split())
    assert "autotune tune /home/me/studies/step.py --expected-calls 100000" in text.replace(" \\\n   ", "")
    assert cli.main(["best", "--cache", db, "--expected-calls", "100000", "--json"]) == 0
    (e,) = json.loads(capsys.readouterr().out)
    assert e["in_range"] is False and e["complete_range"] == {"from_calls": 0.0, "to_calls": 2000.0, "why": "pruned"}
    assert e["retune_command"] == "autotune tune /home/me/studies/step.py --expected-calls 100000"
    assert cli.main(["best", "--cache", db, "--expected-calls", "1500", "--json"]) == 0
    (e,) = json.loads(capsys.readouterr().out)
    assert e["in_range"] is True


def test_an_entry_without_a_range_covers_only_its_own_call_count(tmp_path, capsys):
    put_entry(tmp_path / "c.db")  # no complete_range: tuned before ranges were recorded
    assert cli.main(["best", "--cache", str(tmp_path / "c.db"), "--expected-calls", "1001", "--json"]) == 0
    (e,) = json.loads(capsys.readouterr().out)
    assert e["in_range"] is False and e["complete_range"]["from_calls"] == e["complete_range"]["to_calls"] == 1000
    assert cli.main(["best", "--cache", str(tmp_path / "c.db"), "--expected-calls", "1001"]) == 0
    assert "[1,000, 1,000]" in capsys.readouterr().out


def test_best_shows_device_and_signature_only_when_they_tell_entries_apart(tmp_path, capsys):
    db = tmp_path / "c.db"
    put_entry(db)
    assert cli.main(["best", "--cache", str(db)]) == 0
    text = capsys.readouterr().out
    assert "best configs on cpu" in text and "jax=" not in text and "float32" not in text
    put_entry(db, signature="PyTreeDef(((*,), {}))|float32[16]")
    assert cli.main(["best", "--cache", str(db)]) == 0
    assert "f32[16]" in capsys.readouterr().out
    assert cli.main(["best", "--cache", str(db), "--wide"]) == 0
    wide = capsys.readouterr().out
    assert "cpu|cpu|1|jax=0.10.2|jaxlib=0.10.2" in wide and "float32[16]" in wide


def test_best_filters_and_says_when_nothing_matches(tmp_path, capsys):
    put_entry(tmp_path / "c.db")
    assert cli.main(["best", "--cache", str(tmp_path / "c.db"), "--device", "NVIDIA H200"]) == 1
    assert "no cache entry matches on device 'NVIDIA H200'" in capsys.readouterr().err


def test_list_and_its_wide_form(tmp_path, capsys):
    db = str(tmp_path / "c.db")
    put_entry(tmp_path / "c.db")
    Cache(db).put(dataclasses.replace(entry(), function_key="mod:other", config=FOR, cost=2.5))
    assert cli.main(["list", "--cache", db]) == 0
    text = capsys.readouterr().out
    assert "2 cache entries" in text and "l=for" in text and "2.5 s" in text and "f00d" not in text
    long_signature = "PyTreeDef(((*,), {}))|" + ";".join(["float32[1024,1024]"] * 9)
    Cache(db).put(dataclasses.replace(entry(), function_key="lambda_returns:advantages", signature=long_signature))
    assert cli.main(["list", "--cache", db, "--wide"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("mod:", "lambda"))]
    assert len(rows) == 3 and all("f00d" in line and "cpu|cpu|1" in line for line in rows)  # one line per row
    assert long_signature in rows[0]
    assert cli.main(["list", "--cache", db]) == 0  # 80 columns: a key parts at its ':' at most, never inside
    text = capsys.readouterr().out
    assert (
        "lambda_returns:" in text
        and "advantages" in text
        and "lambda_returns:adva" not in text.replace("lambda_returns:advantages", "")
    )
    assert max(len(line) for line in text.splitlines()) <= 80
    assert cli.main(["list", "--cache", db, "--json"]) == 0
    keys = [e["function_key"] for e in json.loads(capsys.readouterr().out)]
    assert keys == ["lambda_returns:advantages", "mod:other", "mod:step"]


TRAIN_SITES = {  # as an entry keeps them: by id, in no program order
    "fori@train.py:54": {"kind": "scan", "length": 8, "has_ys": False},
    "scan@train.py:42": {"kind": "scan", "length": 32, "has_ys": True},
    "scan@train.py:42#2": {"kind": "scan", "length": 32, "has_ys": True, "derived": True},
}
TRAIN_CONFIG = {sid: {"repr": "scan", "unroll": 2 if sid.startswith("fori") else 1} for sid in TRAIN_SITES}


def test_short_site_names_are_the_functions_own_in_every_listing(tmp_path, capsys):
    """The issue: `best --function` showed s1=fori@train.py:54, `report` s1=scan@train.py:42,
    and `best` over every entry renumbered the same sites."""
    db = str(tmp_path / "c.db")
    put_entry(tmp_path / "c.db")
    point = {"config": TRAIN_CONFIG, "compile_s": 1.0, "run_s": 0.01}
    train = entry(function_key="train:train_step", sites=TRAIN_SITES, config=TRAIN_CONFIG, pareto=[point], cost=11.0)
    Cache(db).put(train)
    for args in (["best"], ["best", "--function", "train:train_step"], ["list"]):
        assert cli.main([*args, "--cache", db]) == 0
        text = capsys.readouterr().out
        assert "s1=scan×1, s2=scan×1," in text and "s3=scan×2" in text, text  # s3 = the fori, unrolled
        assert "s1 = scan@train.py:42\n" in text and "s3 = fori@train.py:54" in text
        assert "s2 = scan@train.py:42#2 (derived)" in text  # grad's backward loop, marked as `sites` does


def test_best_with_an_unknown_function_names_the_nearest_keys(tmp_path, capsys):
    put_entry(tmp_path / "c.db")
    assert cli.main(["best", "--cache", str(tmp_path / "c.db"), "--function", "mod:stpe"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "no cache entry matches function 'mod:stpe'. Functions in the cache: mod:step" in err


def test_export_and_import_say_what_moved(tmp_path, capsys):
    put_entry(tmp_path / "c.db")
    path = str(tmp_path / "x.json")
    assert cli.main(["export", path, "--cache", str(tmp_path / "c.db")]) == 0
    assert (
        f"exported 1 entries and 0 pending records from sqlite:///{tmp_path / 'c.db'} to {path}"
        in capsys.readouterr().out
    )
    assert cli.main(["import", path, "--cache", str(tmp_path / "d.db")]) == 0
    assert "imported 1 entries and 0 pending records into" in capsys.readouterr().out
    assert cli.main(["import", path, "--cache", str(tmp_path / "d.db"), "--max-size", "0.000001"]) == 2
    assert "error:" in capsys.readouterr().err


def test_best_shows_the_tiered_cost_of_a_winner_that_qualifies_for_tier_up(tmp_path, capsys):
    from autotune.select._tiered import tiered_cost

    db = str(tmp_path / "c.db")
    # UNROLL compiles 3 s, the default 1 s; beside the compile the default's calls run at full speed
    # (s = 1), so the 384 calls it serves (1.5 s of UNROLL's) repay its own compile
    pareto = [dataclasses.replace(p, slowdown=1.0) if p.config == SCAN else p for p in THREE]
    put_entry(tmp_path / "c.db", default_config=SCAN.to_dict(), pareto=[p.to_json() for p in pareto])
    assert cli.main(["best", "--cache", db, "--json"]) == 0
    (e,) = json.loads(capsys.readouterr().out)
    assert e["config"] == UNROLL.to_dict()
    assert e["tiered_cost"] == pytest.approx(tiered_cost(1.0, 2.0**-7, 3.0, 2.0**-8, 1000, slowdown=1.0))
    assert cli.main(["best", "--cache", db]) == 0
    text = capsys.readouterr().out
    assert "tiered" in text and "tiered at 1,000" in text  # the best table and the crossover table
    # Re-picked for few calls, the default wins: nothing to tier up
    assert cli.main(["best", "--cache", db, "--json", "--expected-calls", "10"]) == 0
    (e,) = json.loads(capsys.readouterr().out)
    assert e["config"] == SCAN.to_dict() and e["tiered_cost"] is None


def test_best_json_has_a_null_tiered_cost_where_tiering_does_not_pay(tmp_path, capsys):
    # s unmeasured (1.6): the default serves 240 calls beside UNROLL's 3 s compile, 0.94 s of
    # UNROLL's, less than its own 1 s compile: tier_up=True would compile UNROLL up front
    put_entry(tmp_path / "c.db", default_config=SCAN.to_dict())
    assert cli.main(["best", "--cache", str(tmp_path / "c.db"), "--json"]) == 0
    (e,) = json.loads(capsys.readouterr().out)
    assert e["config"] == UNROLL.to_dict() and e["tiered_cost"] is None


def test_best_json_has_a_null_tiered_cost_without_a_default(tmp_path, capsys):
    put_entry(tmp_path / "c.db")
    assert cli.main(["best", "--cache", str(tmp_path / "c.db"), "--json"]) == 0
    (e,) = json.loads(capsys.readouterr().out)
    assert "tiered_cost" in e and e["tiered_cost"] is None
