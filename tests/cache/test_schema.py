"""The schema version and its upgrade path (autotune/cache/_schema.py), on the committed
fixture tests/fixtures/cache_v1.db: a cache file written by the code before schema version 2."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa
from _entries import make_entry
from _privileges import read_only_dir, rerun_without_dac_override
from _repo import repo_env

from autotune._errors import CacheError
from autotune.cache import SCHEMA_VERSION, Cache, PendingRecord
from autotune.cache._schema import MIGRATIONS, OLDEST_READABLE

HERE = Path(__file__).resolve().parents[1]
FIXTURE = HERE / "fixtures" / "cache_v1.db"
ENV = repo_env(HERE)
V2_COLUMNS = ("default_config", "complete_range", "retune")


def v1_copy(folder: Path) -> Path:
    path = folder / "v1.db"
    shutil.copyfile(FIXTURE, path)
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def version_of(path: Path, read_only: bool = False) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) if read_only else sqlite3.connect(path)
    try:
        return con.execute("SELECT version FROM autotune_schema_version").fetchone()[0]
    finally:
        con.close()


def columns_of(path: Path, table: str) -> list[str]:
    with sqlite3.connect(path) as con:
        return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]


def schema_of(url: str) -> dict:
    """Tables, columns (name, type, nullable), unique constraints and indexes, as SQLAlchemy sees them."""
    engine = sa.create_engine(url)
    try:
        insp = sa.inspect(engine)
        return {
            t: {
                "columns": [(c["name"], str(c["type"]), c["nullable"]) for c in insp.get_columns(t)],
                "unique": sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(t)),
                "indexes": sorted((tuple(i["column_names"]), bool(i["unique"])) for i in insp.get_indexes(t)),
            }
            for t in sorted(insp.get_table_names())
        }
    finally:
        engine.dispose()


def record(key: str = "m:f") -> PendingRecord:
    return PendingRecord(
        function_key=key,
        fingerprint="fp",
        signature="(f32[3],)",
        device=make_entry().device,
        location={"module": "m", "qualname": "f"},
        abstract={"leaves": ["f32[3]"]},
        objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
    )


def test_the_migrations_lead_from_every_readable_version_to_the_current_one():
    version = OLDEST_READABLE
    for start, end, migrate in MIGRATIONS:
        assert start == version and end == start + 1 and callable(migrate)
        version = end
    assert version == SCHEMA_VERSION == 2
    assert version_of(FIXTURE) == 1


def test_a_v1_file_is_read_as_it_is_and_never_written(tmp_path):
    path = v1_copy(tmp_path)
    before = digest(path)
    with Cache(path) as cache:
        entries = cache.entries()
        assert [e.function_key for e in entries] == ["fixture:plain", "fixture:smooth", "fixture:smooth"]
        tuned = next(e for e in entries if e.pareto and e.device["platform"] == "cpu")
        assert len(tuned.pareto) == 4 and tuned.default_config is None and tuned.complete_range is None
        assert tuned.retune is None and tuned.retune_command(10) is None
        assert cache.lookup(tuned.function_key, tuned.fingerprint, tuned.signature, tuned.device_key) == tuned
        # no range recorded: only the tuned call count is covered; a re-pick says so
        n = tuned.objective["expected_calls"]
        assert tuned.covers(n) and not tuned.covers(n * 10)
        wider = tuned.goal.overridden(expected_calls=n * 10)
        assert not cache.lookup(*tuned_key(tuned), objective=wider).covers(n * 10)
        assert cache.pending() == []
        assert cache.export_json(tmp_path / "out.json") == 3
    assert digest(path) == before and version_of(path) == 1


def tuned_key(e):
    return (e.function_key, e.fingerprint, e.signature, e.device_key)


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_v1_file_in_a_read_only_directory_is_read(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    path = v1_copy(ro)
    with read_only_dir(ro) as enforced:
        if not enforced:
            rerun_without_dac_override(__file__, "test_a_v1_file_in_a_read_only_directory_is_read", ENV, 120)
            return
        assert len(Cache(path).entries()) == 3 and sorted(p.name for p in ro.iterdir()) == ["v1.db"]
        with pytest.raises(CacheError, match="writable"):
            Cache(path).put(make_entry())
        assert version_of(path, read_only=True) == 1


def test_the_first_write_upgrades_in_place_and_keeps_every_entry(tmp_path):
    path = v1_copy(tmp_path)
    old = Cache(path).entries()
    with Cache(path) as cache:
        new = make_entry(
            "after:upgrade",
            config={"outer": {"repr": "scan", "unroll": 1}},
            pareto=[{"config": {"outer": {"repr": "scan", "unroll": 1}}, "compile_s": 1.0, "run_s": 1e-3}],
            default_config={"outer": {"repr": "scan", "unroll": 1}},
            complete_range={"from_calls": 0.0, "to_calls": None, "why": "every config was measured"},
            retune="autotune tune x.py --expected-calls {calls}",
        )
        cache.put(new)
        assert version_of(path) == SCHEMA_VERSION
        assert cache.entries() == sorted(old + [new], key=lambda e: (e.function_key, e.created_at))
        assert cache.record(record()) and [r.function_key for r in cache.pending()] == ["m:f"]
    with sqlite3.connect(path) as con:
        nulls = con.execute(
            "SELECT default_config, complete_range, retune FROM autotune_entries WHERE function_key LIKE 'fixture:%'"
        ).fetchall()
    assert nulls == [(None, None, None)] * 3
    fresh = tmp_path / "fresh.db"
    Cache(fresh).put(make_entry())
    assert schema_of(f"sqlite:///{path}") == schema_of(f"sqlite:///{fresh}")


def test_a_failed_upgrade_rolls_back_whole(tmp_path):
    path = v1_copy(tmp_path)
    with sqlite3.connect(path) as con:  # another program's table in the way of the migration
        con.execute("CREATE TABLE autotune_pending (x INTEGER)")
    with pytest.raises(CacheError, match=r"autotune_pending already exists"):
        Cache(path).put(make_entry())
    assert version_of(path) == 1 and not set(V2_COLUMNS) & set(columns_of(path, "autotune_entries"))
    assert len(Cache(path).entries()) == 3


WRITER = textwrap.dedent("""
    import os, sys, time
    from autotune.cache import Cache
    from _entries import make_entry
    url, n = sys.argv[1], int(sys.argv[2])
    open(os.path.join(sys.argv[3], f"ready{n}"), "w").close()
    while not os.path.exists(os.path.join(sys.argv[3], "go")):
        time.sleep(0.005)
    cache = Cache(url)
    for i in range(5):
        cache.put(make_entry(f"proc{n}:f{i}"))
""")


def run_writers(url: str, folder: Path, n: int) -> None:
    """``n`` processes, released at once, each putting 5 entries into ``url``."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, str(i), str(folder)], env=ENV, stderr=subprocess.PIPE, text=True
        )
        for i in range(n)
    ]
    try:
        while not all((folder / f"ready{i}").exists() for i in range(n)):
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        (folder / "go").touch()
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_concurrent_first_writers_upgrade_exactly_once(tmp_path):
    path = v1_copy(tmp_path)
    run_writers(str(path), tmp_path, 4)
    assert version_of(path) == SCHEMA_VERSION
    keys = [e.function_key for e in Cache(path).entries()]
    assert len(keys) == 3 + 20 and {f"proc{n}:f{i}" for n in range(4) for i in range(5)} <= set(keys)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_v1_database_on_postgresql_upgrades_in_place(pg_url, tmp_path):
    with Cache(pg_url) as cache:
        cache.put(make_entry("old:f"))
    engine = sa.create_engine(pg_url)
    with engine.begin() as con:  # back to the version-1 tables, as the previous release wrote them
        con.exec_driver_sql("DROP TABLE autotune_pending")
        for column in V2_COLUMNS:
            con.exec_driver_sql(f"ALTER TABLE autotune_entries DROP COLUMN {column}")
        con.exec_driver_sql("UPDATE autotune_schema_version SET version = 1")
    v1_schema = schema_of(pg_url)
    with Cache(pg_url) as cache:
        (old,) = cache.entries()
        assert old.default_config is None and cache.pending() == []
    assert schema_of(pg_url) == v1_schema  # reads wrote nothing
    run_writers(pg_url, tmp_path, 3)
    with engine.connect() as con:
        assert con.exec_driver_sql("SELECT version FROM autotune_schema_version").scalar() == SCHEMA_VERSION
    engine.dispose()
    with Cache(pg_url) as cache:
        assert len(cache.entries()) == 1 + 15 and cache.record(record()) and not cache.record(record())
