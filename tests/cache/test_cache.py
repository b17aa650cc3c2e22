"""Tests of autotune.cache on real SQLite files (and real processes for concurrency)."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _entries import CPU, FOR, GPU, OBJECTIVE, PARETO, SCAN, key_of, make_entry
from _privileges import read_only_dir, rerun_without_dac_override
from _repo import TESTS, repo_env
from _wait import wait_until

from autotune._errors import CacheError, CacheImportError, CacheSchemaError
from autotune.cache import SCHEMA_VERSION, Cache, CacheEntry, best_for, default_cache_location, device_key


def count_rows(path: Path) -> int:
    with sqlite3.connect(path) as con:
        return con.execute("SELECT COUNT(*) FROM autotune_entries").fetchone()[0]


# ------------------------------------------------------------------ entries


def test_device_key_is_readable_and_stable():
    assert device_key(CPU) == "cpu|cpu|1|jax=0.10.2|jaxlib=0.10.2"
    assert make_entry(device=dict(reversed(list(CPU.items())))).device_key == device_key(CPU)


def test_entry_dict_round_trip_and_field_errors():
    e = make_entry(pareto=PARETO)
    d = e.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert CacheEntry.from_dict(d) == e
    d["cost"] = "cheap"
    with pytest.raises(CacheImportError, match=r"'mymod:step'.*field 'cost' must be a number"):
        CacheEntry.from_dict(d)


def test_best_for_breaks_ties_by_config_text():
    a = {"config": {"s": {"repr": "scan", "unroll": 2}}, "compile_s": 1.0, "run_s": 1.0}
    b = {"config": {"s": {"repr": "for", "unroll": 1}}, "compile_s": 1.0, "run_s": 1.0}
    assert best_for([a, b], 10)["config"] == b["config"]  # '{"s":{"repr":"for"...' sorts first
    assert best_for([b, a], 10)["config"] == b["config"]
    assert best_for([], 10) is None


# -------------------------------------------------------------------- cache


def test_put_lookup_round_trip(tmp_path):
    with Cache(tmp_path / "c.db") as cache:
        e = make_entry()
        cache.put(e)
        assert cache.lookup(*key_of(e)) == e


def test_put_replaces_the_entry_with_the_same_key(tmp_path):
    cache = Cache(tmp_path / "c.db")
    cache.put(make_entry(cost=3.0))
    newer = make_entry(cost=1.0, config={"outer": {"repr": "for", "unroll": 1}})
    cache.put(newer)
    assert cache.entries() == [newer]
    assert count_rows(tmp_path / "c.db") == 1


@pytest.mark.parametrize("position,other", [(1, "beef"), (2, "(f32[9],)"), (3, device_key(GPU))])
def test_lookup_with_another_key_part_misses(tmp_path, position, other):
    cache = Cache(tmp_path / "c.db")
    e = make_entry()
    cache.put(e)
    key = list(key_of(e))
    key[position] = other
    assert cache.lookup(*key) is None


def test_entries_filter_and_order(tmp_path):
    cache = Cache(tmp_path / "c.db")
    b_cpu = make_entry("b:f", created_at="2024-01-01T00:00:02+00:00")
    a_gpu = make_entry("a:f", device=GPU, created_at="2024-01-01T00:00:03+00:00")
    a_cpu = make_entry("a:f", created_at="2024-01-01T00:00:01+00:00")
    for e in (b_cpu, a_gpu, a_cpu):
        cache.put(e)
    assert cache.entries() == [a_cpu, a_gpu, b_cpu]
    assert cache.entries(function_key="a:f") == [a_cpu, a_gpu]
    assert cache.entries(device_key=device_key(CPU)) == [a_cpu, b_cpu]
    assert cache.entries("a:f", device_key(GPU)) == [a_gpu]
    assert cache.delete("a:f") == 2
    assert cache.entries() == [b_cpu]


def test_neighbours_are_the_functions_entries_on_the_device_under_every_other_key(tmp_path):
    cache = Cache(tmp_path / "c.db")
    assert cache.neighbours("a:f", device_key(CPU), fingerprint="f00d", signature="(f32[8],)") == []  # no file
    own = make_entry("a:f", created_at="2024-01-01T00:00:01+00:00")
    wider = make_entry("a:f", signature="(f32[16],)", created_at="2024-01-01T00:00:02+00:00")
    edited = make_entry("a:f", fingerprint="beef", created_at="2024-01-01T00:00:03+00:00")
    for e in (own, wider, edited, make_entry("a:f", device=GPU, signature="(f32[4],)"), make_entry("b:f")):
        cache.put(e)
    assert cache.neighbours("a:f", device_key(CPU), fingerprint="f00d", signature="(f32[8],)") == [wider, edited]
    assert cache.neighbours("a:f", device_key(CPU), fingerprint="new", signature="(f32[2],)") == [own, wider, edited]
    assert cache.neighbours("c:f", device_key(CPU), fingerprint="f00d", signature="(f32[8],)") == []


def test_lookup_with_expected_calls_rechooses_from_the_pareto_front(tmp_path):
    cache = Cache(tmp_path / "c.db")
    e = make_entry(config=FOR, pareto=PARETO)
    cache.put(e)
    few = cache.lookup(*key_of(e), objective=e.goal.overridden(expected_calls=1))
    assert few.config == SCAN
    assert few.cost == pytest.approx(0.5 + 1 * 1e-3)
    assert few.objective == {**OBJECTIVE, "expected_calls": 1}
    assert few.default_cost is None  # computed under the stored objective
    many = cache.lookup(*key_of(e), objective=e.goal.overridden(expected_calls=100_000))
    assert many.config == FOR
    assert many.cost == pytest.approx(10.0 + 1e5 * 1e-4)
    # weights alone count too: make compile time free -> the fastest runtime wins
    assert cache.lookup(*key_of(e), objective=e.goal.overridden(expected_calls=1, compile_weight=0.0)).config == FOR
    # the stored objective, or no pareto front: the entry as stored
    assert cache.lookup(*key_of(e), objective=e.goal.overridden(expected_calls=1000)) == e
    plain = make_entry("plain:f", config=FOR)
    cache.put(plain)
    assert cache.lookup(*key_of(plain), objective=plain.goal.overridden(expected_calls=1)) == plain


def test_put_rejects_an_invalid_entry_and_writes_nothing(tmp_path):
    cache = Cache(tmp_path / "c.db")
    with pytest.raises(CacheError, match=r"'mymod:step'.*config\.nowhere.*not in the entry's sites"):
        cache.put(make_entry(config={"nowhere": {"repr": "scan", "unroll": 1}}))
    assert cache.entries() == []


# --------------------------------------------------------------- locations


def test_default_location_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "env.db"))
    assert Cache().url == f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("AUTOTUNE_CACHE", f"sqlite:///{tmp_path / 'url.db'}")
    assert Cache().url == f"sqlite:///{tmp_path / 'url.db'}"
    monkeypatch.delenv("AUTOTUNE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_location() == str(tmp_path / "xdg" / "autotune" / "cache.db")
    assert Cache().url == f"sqlite:///{tmp_path / 'xdg' / 'autotune' / 'cache.db'}"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Cache().url == f"sqlite:///{tmp_path / 'home' / '.cache' / 'autotune' / 'cache.db'}"


def test_paths_and_urls(tmp_path, monkeypatch):
    expected = f"sqlite:///{tmp_path / 'c.db'}"
    assert Cache(tmp_path / "c.db").url == expected
    assert Cache(str(tmp_path / "c.db")).url == expected
    assert Cache(expected).url == expected
    monkeypatch.chdir(tmp_path)
    assert Cache("c.db").url == expected
    assert Cache("sqlite:///c.db").url == expected
    # a URL and a path name the same database
    Cache(expected).put(make_entry())
    assert Cache(tmp_path / "c.db").entries() == [make_entry(created_at=Cache(expected).entries()[0].created_at)]


@pytest.mark.parametrize("bad", ["nosuchdialect://host/db", "sqlite:/:/x://", "://nothing"])
def test_a_malformed_url_is_a_cache_error(bad):
    with pytest.raises(CacheError, match=r"is not a SQLAlchemy URL or a file path.*sqlite:///path/cache.db"):
        Cache(bad)


def test_reading_a_missing_cache_creates_nothing(tmp_path):
    cache = Cache(tmp_path / "new" / "dir" / "c.db")
    assert cache.lookup("m:f", "fp", "sig", device_key(CPU)) is None
    assert cache.entries() == []
    assert cache.delete() == 0
    assert cache.export_json(tmp_path / "out.json") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_reading_an_empty_database_creates_no_tables(tmp_path):
    sqlite3.connect(tmp_path / "empty.db").close()
    assert Cache(tmp_path / "empty.db").lookup("m:f", "fp", "sig", "dev") is None
    with sqlite3.connect(tmp_path / "empty.db") as con:
        assert con.execute("SELECT name FROM sqlite_master").fetchall() == []


# ------------------------------------------------------------ concurrency

WRITER = textwrap.dedent("""
    import os, sys, time
    from autotune.cache import Cache
    sys.path.insert(0, os.environ["TEST_DIR"])
    from _entries import make_entry
    path, n = sys.argv[1], int(sys.argv[2])
    open(f"{path}.ready{n}", "w").close()
    while not os.path.exists(f"{path}.go"):
        time.sleep(0.005)
    cache = Cache(path)
    for i in range(25):
        cache.put(make_entry(f"proc{n}:f{i}"))
""")


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_four_processes_write_one_file_concurrently(tmp_path):
    path = tmp_path / "shared" / "c.db"
    env = repo_env(TEST_DIR=str(TESTS))
    path.parent.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(n)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]

    def all_ready() -> bool:
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs if p.poll() is not None]
        return all((path.parent / f"c.db.ready{n}").exists() for n in range(4))

    assert wait_until(all_ready, timeout=60, interval=0.01), "the writers never got ready"
    (path.parent / "c.db.go").touch()
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    entries = Cache(path).entries()
    assert len(entries) == 100
    assert {e.function_key for e in entries} == {f"proc{n}:f{i}" for n in range(4) for i in range(25)}


# ------------------------------------------------------------ broken caches


def test_a_corrupt_file_is_a_clear_cache_error(tmp_path):
    path = tmp_path / "c.db"
    path.write_bytes(b"not sqlite" + os.urandom(4086))
    cache = Cache(path)
    with pytest.raises(CacheError, match=r"autotune cache at sqlite:///.*c\.db.*not a SQLite database.*another cache"):
        cache.lookup("m:f", "fp", "sig", "dev")
    with pytest.raises(CacheError, match="not a SQLite database"):
        cache.put(make_entry())


@pytest.mark.parametrize("version,words", [(99, "Upgrade jax-autotune"), (0, "cannot migrate")])
def test_another_schema_version_is_a_schema_error(tmp_path, version, words):
    path = tmp_path / "c.db"
    Cache(path).put(make_entry())
    with sqlite3.connect(path) as con:
        con.execute("UPDATE autotune_schema_version SET version = ?", (version,))
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT version FROM autotune_schema_version").fetchall() == [(version,)]
    cache = Cache(path)
    pattern = rf"sqlite:///.*c\.db uses .*schema version {version}.*schema version {SCHEMA_VERSION}.*{words}"
    with pytest.raises(CacheSchemaError, match=pattern):
        cache.lookup(*key_of(make_entry()))
    with pytest.raises(CacheSchemaError, match=pattern):
        cache.put(make_entry("other:f"))
    assert count_rows(path) == 1


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_read_only_directory_can_be_read_but_not_written(tmp_path):
    ro = tmp_path / "ro dir #1?"
    ro.mkdir()
    with Cache(ro / "c.db") as closed:  # closed: no c.db-wal / c.db-shm left for readers to use
        closed.put(make_entry())
    still_open = Cache(ro / "open.db")  # open: c.db-wal holds the data
    still_open.put(make_entry())
    with read_only_dir(ro) as enforced:
        if not enforced:
            rerun_without_dac_override(
                __file__,
                "test_a_read_only_directory_can_be_read_but_not_written",
                repo_env(),
                60,
                "test_writing_under_a_file_fails_cleanly and test_writing_a_read_only_database_fails_cleanly "
                "cover the failure path",
            )
            return
        assert Cache(ro / "c.db").lookup(*key_of(make_entry())).function_key == "mymod:step"
        assert Cache(ro / "open.db").lookup(*key_of(make_entry())).function_key == "mymod:step"
        still_open.close()
        with pytest.raises(CacheError, match=r"autotune cache at .*ro dir #1\?/c\.db.*readonly.*writable"):
            Cache(ro / "c.db").put(make_entry("other:f"))
        with pytest.raises(CacheError, match=r"autotune cache at .*ro dir #1\?/new\.db.*writable"):
            Cache(ro / "new.db").put(make_entry())
        assert Cache(ro / "new.db").entries() == []


def test_writing_under_a_file_fails_cleanly(tmp_path):
    (tmp_path / "afile").write_text("I am a file, not a directory")
    cache = Cache(tmp_path / "afile" / "c.db")
    with pytest.raises(CacheError, match=r"Could not write an entry to the autotune cache at .*afile/c\.db.*writable"):
        cache.put(make_entry())
    assert cache.lookup(*key_of(make_entry())) is None


def test_writing_a_read_only_database_fails_cleanly(tmp_path):
    path = tmp_path / "c.db"
    Cache(path).put(make_entry())
    ro = Cache(f"sqlite:///file:{path}?mode=ro&uri=true")
    assert ro.lookup(*key_of(make_entry())) == Cache(path).entries()[0]
    with pytest.raises(CacheError, match=r"Could not write an entry to the autotune cache.*readonly.*writable"):
        ro.put(make_entry("other:f"))
    assert count_rows(path) == 1


def test_with_choice_keeps_the_key_and_drops_a_stale_default_cost(tmp_path):
    e = make_entry(pareto=PARETO, config=FOR)
    chosen = e.with_choice(SCAN, 0.5, {**OBJECTIVE, "expected_calls": 1})
    assert key_of(chosen) == key_of(e) and chosen.created_at == e.created_at
    assert (chosen.config, chosen.cost, chosen.default_cost) == (SCAN, 0.5, None)
    assert e.with_choice(SCAN, 0.5).default_cost == e.default_cost  # same objective: still valid
    cache = Cache(tmp_path / "c.db")
    cache.put(chosen)
    assert cache.lookup(*key_of(chosen)) == chosen
    assert dataclasses.asdict(cache.entries()[0]) == dataclasses.asdict(chosen)
