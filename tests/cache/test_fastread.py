"""The decorator's read path (autotune/cache/_fastread.py), on real SQLite files: it reads what
`Cache.lookup` reads, re-picks by the same rule, never creates a file, and hands every file it
cannot plainly read (another schema, a foreign or corrupt file, a URL with options) to `Cache`."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from _entries import OBJECTIVE, PARETO, SCAN, key_of, make_entry
from _privileges import read_only_dir, rerun_without_dac_override
from _repo import repo_env

from autotune._errors import CacheError, CacheSchemaError
from autotune.cache import Cache
from autotune.cache._fastread import Reader, sqlite_path

HERE = Path(__file__).resolve().parents[1]
FIXTURE = HERE / "fixtures" / "cache_v1.db"
ENV = repo_env(HERE)


def reader(location) -> Reader:
    return Reader(location)


def tuned_entry():
    """An entry that names the cheaper config for 1000 calls and another one for 1 call."""
    return make_entry(config=PARETO[0]["config"], pareto=PARETO, default_config=SCAN, cost=10.1)


def test_it_reads_what_cache_lookup_reads_and_repicks_by_the_same_rule(tmp_path):
    path = tmp_path / "c.db"
    entry = tuned_entry()
    Cache(path).put(entry)
    fast = reader(str(path))
    assert fast.lookup(*key_of(entry)) == Cache(path).lookup(*key_of(entry)) == entry
    for calls in (1, 1000, 1e5):
        goal = entry.goal.overridden(expected_calls=calls)  # the decorator hands its objective whole
        got = fast.lookup(*key_of(entry), objective=goal)
        assert got == Cache(path).lookup(*key_of(entry), objective=goal), calls
    one = entry.goal.overridden(expected_calls=1)
    assert fast.lookup(*key_of(entry), objective=one).config == SCAN  # a re-pick, not the stored config
    assert fast.lookup("other:fn", *key_of(entry)[1:]) is None
    assert fast.opened is None  # Cache was never needed


def test_every_form_of_a_sqlite_location_is_read_directly(tmp_path, monkeypatch):
    path = tmp_path / "c.db"
    entry = make_entry()
    Cache(path).put(entry)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AUTOTUNE_CACHE", str(path))
    for location in (str(path), path, f"sqlite:///{path}", "sqlite:///c.db", "c.db", None, Cache(path)):
        assert sqlite_path(location) == str(path), location
        fast = reader(location)
        assert fast.lookup(*key_of(entry)) == entry, location
        assert fast.opened is (location if isinstance(location, Cache) else None)  # read by sqlite3
    for location in (f"sqlite:///{path}?timeout=3", "sqlite://", "sqlite:///:memory:", "postgresql://u:p@h/db"):
        assert sqlite_path(location) is None, location


def test_a_missing_file_is_no_entry_and_stays_missing(tmp_path):
    path = tmp_path / "nowhere" / "c.db"
    assert reader(str(path)).lookup("m:f", "f", "s", "d") is None
    assert not (tmp_path / "nowhere").exists()


def test_a_read_changes_nothing_on_disk(tmp_path):
    path = tmp_path / "c.db"
    with Cache(path) as cache:  # closed: no -wal/-shm files left (a reader's read marks live in -shm)
        cache.put(make_entry())
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    assert reader(str(path)).lookup(*key_of(make_entry())) is not None
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()} == before


def test_a_schema_version_1_file_is_read_as_it_is(tmp_path):
    path = tmp_path / "v1.db"
    shutil.copyfile(FIXTURE, path)
    (entry,) = Cache(path).entries()[:1]
    fast = reader(str(path))
    assert fast.lookup(*key_of(entry)) == entry and entry.default_config is None
    assert fast.opened is None


def test_an_inconsistent_row_is_refused_with_the_message_of_cache(tmp_path):
    path = tmp_path / "c.db"
    entry = make_entry()
    Cache(path).put(entry)
    other_jax = '{"platform": "cpu", "device_kind": "cpu", "device_count": 1, "jax": "9", "jaxlib": "0.10.2"}'
    with sqlite3.connect(path) as con:  # the device JSON says another jax than the key column
        con.execute("UPDATE autotune_entries SET device = ?", (other_jax,))
    with pytest.raises(CacheError) as slow:
        Cache(path).lookup(*key_of(entry))
    with pytest.raises(CacheError) as fast:
        reader(str(path)).lookup(*key_of(entry))
    assert str(fast.value) == str(slow.value) and "is inconsistent" in str(fast.value)


@pytest.mark.parametrize("damage", ["newer-schema", "foreign", "corrupt"])
def test_a_file_it_cannot_plainly_read_goes_to_cache_which_says_what_is_wrong(tmp_path, damage):
    path = tmp_path / "c.db"
    entry = make_entry()
    if damage == "corrupt":
        path.write_bytes(b"not a database at all" * 300)
    else:
        Cache(path).put(entry)
        with sqlite3.connect(path) as con:
            if damage == "newer-schema":
                con.execute("UPDATE autotune_schema_version SET version = 99")
            else:
                con.execute("DROP TABLE autotune_schema_version")
    fast = reader(str(path))
    with pytest.raises(CacheError) as e:
        fast.lookup(*key_of(entry))
    assert fast.opened is not None  # Cache read it, and its message names the cache
    assert str(path) in str(e.value)
    if damage != "corrupt":
        assert isinstance(e.value, CacheSchemaError)


def test_a_location_only_sqlalchemy_can_read_goes_to_cache(tmp_path):
    path = tmp_path / "c.db"
    entry = dataclasses.replace(make_entry(), objective=dict(OBJECTIVE))
    Cache(path).put(entry)
    fast = reader(f"sqlite:///{path}?timeout=3")
    assert fast.lookup(*key_of(entry)) == entry and fast.opened is not None


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_cache_in_a_read_only_directory_is_read_without_writing(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    entry = make_entry()
    Cache(folder / "c.db").put(entry)  # closed: no -wal/-shm files left
    before = sorted(os.listdir(folder))
    with read_only_dir(folder) as enforced:
        if not enforced:
            rerun_without_dac_override(
                __file__, "test_a_cache_in_a_read_only_directory_is_read_without_writing", ENV, 300, ""
            )
            return
        fast = reader(str(folder / "c.db"))
        assert fast.lookup(*key_of(entry)) == entry and fast.opened is None
        assert sorted(os.listdir(folder)) == before
