"""Pending records for record and replay (autotune/cache/_pending.py and their storage in Cache):
validation, first-recording-wins, value files, export/import, a locked cache, PostgreSQL."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _entries import CPU, GPU, make_record
from _repo import mode, repo_env

from autotune._errors import CacheError, CacheImportError
from autotune._paths import write_private
from autotune.cache import LOCK_WAIT_BUDGET_S, Cache, PendingRecord

HERE = Path(__file__).resolve().parents[1]
ENV = repo_env(HERE)
OBJECTIVE = {"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0}


def with_values(cache: Cache, rec: PendingRecord, arrays: list[np.ndarray]) -> PendingRecord:
    """Store ``arrays`` as .npy files in the cache's values dir and name them in a copy of ``rec``."""
    names = []
    for i, a in enumerate(arrays):
        buf = io.BytesIO()
        np.save(buf, a, allow_pickle=False)
        name = f"{rec.function_key.replace(':', '_')}-{abs(hash(rec.signature)) % 10**8}-{i}.npy"
        write_private(os.path.join(cache.values_dir, name), buf.getvalue())
        names.append(name)
    return PendingRecord(
        **{**rec.__dict__, "values": {"files": names, "bytes": sum(a.nbytes for a in arrays), "note": None}}
    )


# ------------------------------------------------------------------ records


def test_a_record_round_trips_and_names_its_key():
    rec = make_record(values={"files": ["a.npy", None], "bytes": 12, "note": None})
    assert PendingRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    assert rec.key == ("app:step", "f00d", "(f32[3],)", "cpu|cpu|1|jax=0.10.2|jaxlib=0.10.2")
    assert rec.value_files == ["a.npy"]


def _nested(depth: int):
    value = 1
    for _ in range(depth):
        value = [value]
    return {"x": value}


BAD = {
    "missing": ({"abstract": None}, "'abstract' is missing"),
    "not an object": ({"location": ["app", "step"]}, "'location' must be a JSON object"),
    "unknown field": ({"colour": 1}, "'colour' is not a pending record field"),
    "control char": ({"abstract": {"leaves": ["f32\x00"]}}, "control character"),
    "deep": ({"abstract": _nested(40)}, "nested more than 32 levels"),
    "huge": ({"options": {"blob": "x" * (1 << 20)}}, "the limit is 1048576"),
    "nan": ({"location": {"line": float("nan")}}, "must be a finite number"),
    "objective": ({"objective": {"expected_calls": 5}}, "'objective.compile_weight' is missing"),
    "replayable": ({"replayable": "no"}, "'replayable' must be true or false"),
    "why_not missing": ({"replayable": False}, "must say why"),
    "why_not extra": ({"why_not": "because"}, "must be null for a replayable record"),
    "traversal": ({"values": {"files": ["../../etc/passwd.npy"], "bytes": 1}}, "plain .npy file name"),
    "folder": ({"values": {"files": ["a/b.npy"], "bytes": 1}}, "plain .npy file name"),
    "not npy": ({"values": {"files": ["a.pkl"], "bytes": 1}}, "plain .npy file name"),
    "twice": ({"values": {"files": ["a.npy", "a.npy"], "bytes": 1}}, "names one file twice"),
    "bytes": ({"values": {"files": [], "bytes": -1}}, "'values.bytes' must be a non-negative integer"),
    "device": ({"device": {**CPU, "device_count": 0}}, "'device.device_count' must be a positive integer"),
    "long key": ({"function_key": "k" * 5000}, "the limit is 4096"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_invalid_records_are_refused_by_field_and_never_stored(case, tmp_path):
    changes, words = BAD[case]
    d = {**make_record().to_dict(), **changes}
    if d["abstract"] is None:
        del d["abstract"]
    with pytest.raises(CacheImportError) as info:
        PendingRecord.from_dict(d)
    assert re.search(words, str(info.value)), str(info.value)
    if "abstract" in d and "colour" not in d:
        cache = Cache(tmp_path / "c.db")
        with pytest.raises(CacheError, match=r"Cannot record a pending call of function .*nothing was written"):
            cache.record(PendingRecord(**d))
        assert not (tmp_path / "c.db").exists()


def test_the_first_recording_per_signature_wins(tmp_path):
    cache = Cache(tmp_path / "c.db")
    first = make_record(created_at="2024-01-01T00:00:01+00:00")
    assert cache.record(first) is True
    assert cache.record(make_record(location={"module": "elsewhere"})) is False  # same key: a no-op
    other_sig = make_record(signature="(f32[4],)", created_at="2024-01-01T00:00:02+00:00")
    other_dev = make_record(device=GPU, created_at="2024-01-01T00:00:03+00:00")
    b = make_record("b:f", created_at="2024-01-01T00:00:00+00:00")
    assert cache.record(other_sig) and cache.record(other_dev) and cache.record(b)
    assert cache.pending() == [first, other_sig, other_dev, b]
    assert cache.pending("b:f") == [b] and cache.pending("none:f") == []
    with sqlite3.connect(tmp_path / "c.db") as con:
        assert con.execute("SELECT COUNT(*) FROM autotune_pending").fetchone()[0] == 4
    assert cache.entries() == []  # records are not entries


def test_reading_pending_of_a_missing_cache_creates_nothing(tmp_path):
    cache = Cache(tmp_path / "nowhere" / "c.db")
    assert cache.pending() == [] and cache.delete_pending() == 0
    assert not (tmp_path / "nowhere").exists()


def test_delete_pending_by_key_parts_removes_orphaned_value_files(tmp_path):
    cache = Cache(tmp_path / "c.db")
    a = with_values(cache, make_record("a:f"), [np.arange(3.0), np.ones((2, 2), np.int32)])
    b = with_values(cache, make_record("b:f"), [np.zeros(4)])
    c = make_record("a:f", device=GPU)
    for rec in (a, b, c):
        assert cache.record(rec)
    files = sorted(os.listdir(cache.values_dir))
    assert len(files) == 3
    assert cache.delete_pending("a:f", device_key=c.device_key) == 1  # only the GPU record
    assert sorted(os.listdir(cache.values_dir)) == files
    assert cache.delete_pending("a:f") == 1
    assert sorted(os.listdir(cache.values_dir)) == b.value_files
    assert cache.pending() == [b]
    assert cache.delete_pending() == 1 and os.listdir(cache.values_dir) == []


def test_a_damaged_record_is_a_clear_error_and_can_still_be_deleted(tmp_path):
    cache = Cache(tmp_path / "c.db")
    cache.record(make_record())
    with sqlite3.connect(tmp_path / "c.db") as con:
        con.execute("UPDATE autotune_pending SET device = ?", (json.dumps({**CPU, "device_kind": "TPU v9"}),))
    with pytest.raises(
        CacheError,
        match=r"row 1 of autotune_pending \(function 'app:step'\) is inconsistent.*"
        r"Cache.delete_pending\('app:step'\)",
    ):
        cache.pending()
    with sqlite3.connect(tmp_path / "c.db") as con:
        con.execute("UPDATE autotune_pending SET abstract = ?", ("[" * 100_000 + "]" * 100_000,))
    with pytest.raises(CacheError, match="nested too deeply"):
        cache.pending()
    assert cache.delete_pending("app:step") == 1 and cache.pending() == []


# ------------------------------------------------------------ export/import


def test_export_then_import_carries_records_and_their_values(tmp_path):
    source = Cache(tmp_path / "a" / "src.db")
    arrays = [np.linspace(0, 1, 5, dtype=np.float32), np.array([[1, 2], [3, 4]], np.int64)]
    rec = with_values(source, make_record(), arrays)
    plain = make_record("shapes:only", replayable=False, why_not="static argument 1 is a lambda")
    assert source.record(rec) and source.record(plain)
    n = source.export_json(tmp_path / "x.json")
    assert (n, n.pending) == (0, 2) and mode(tmp_path / "x.json") == 0o600
    doc = json.loads((tmp_path / "x.json").read_text())
    assert sorted(doc["values"]) == sorted(rec.value_files) and len(doc["pending"]) == 2
    target = Cache(tmp_path / "b" / "dst.db")
    got = target.import_json(tmp_path / "x.json")
    assert (got, got.pending, got.pending_kept) == (0, 2, 0)
    assert target.pending() == source.pending()
    for name, a in zip(rec.value_files, arrays):
        path = os.path.join(target.values_dir, name)
        np.testing.assert_array_equal(np.load(path, allow_pickle=False), a)
        assert mode(path) == 0o600
    assert mode(target.values_dir) == 0o700
    # importing again keeps what is there (the first recording wins) and rewrites no file
    again = target.import_json(tmp_path / "x.json")
    assert (again.pending, again.pending_kept) == (0, 2)


def test_import_keeps_an_existing_record_and_its_files(tmp_path):
    source, target = Cache(tmp_path / "src.db"), Cache(tmp_path / "dst" / "dst.db")
    theirs = with_values(source, make_record(location={"module": "theirs"}), [np.ones(3)])
    source.record(theirs)
    source.export_json(tmp_path / "x.json")
    ours = with_values(target, make_record(location={"module": "ours"}), [np.zeros(3)])
    target.record(ours)
    n = target.import_json(tmp_path / "x.json")
    assert (n.pending, n.pending_kept) == (0, 1)
    assert target.pending() == [ours]
    np.testing.assert_array_equal(np.load(os.path.join(target.values_dir, ours.value_files[0])), np.zeros(3))


def _export_doc(tmp_path: Path) -> tuple[dict, Path]:
    source = Cache(tmp_path / "src.db")
    source.record(with_values(source, make_record(), [np.arange(4.0)]))
    source.export_json(tmp_path / "x.json")
    return json.loads((tmp_path / "x.json").read_text()), tmp_path / "x.json"


def _object_npy() -> str:
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return base64.b64encode(buf.getvalue()).decode()


BAD_VALUES = {
    "pickled objects": (
        lambda doc: doc["values"].update({next(iter(doc["values"])): _object_npy()}),
        "not base64 of a .npy array without objects",
    ),
    "not base64": (lambda doc: doc["values"].update({next(iter(doc["values"])): "@@@"}), "not base64"),
    "unnamed file": (
        lambda doc: doc["values"].update({"stray.npy": doc["values"][next(iter(doc["values"]))]}),
        "belongs to no pending record",
    ),
    "bad name": (lambda doc: doc["values"].update({"../evil.npy": "AAAA"}), "invalid name"),
    "missing file": (lambda doc: doc["values"].clear(), "lacks the value file"),
    "bad record": (lambda doc: doc["pending"][0].update(objective={}), r"Pending record 0 \(function_key 'app:step'\)"),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_a_bad_record_or_value_file_imports_nothing(tmp_path, case):
    mutate, words = BAD_VALUES[case]
    doc, path = _export_doc(tmp_path)
    doc["entries"] = [json.loads(json.dumps(e)) for e in doc["entries"]]
    mutate(doc)
    path.write_text(json.dumps(doc))
    target = Cache(tmp_path / "dst" / "dst.db")
    with pytest.raises(CacheImportError, match=words) as info:
        target.import_json(path)
    assert "Nothing was imported" in str(info.value)
    assert not (tmp_path / "dst").exists()


def test_a_record_whose_value_files_are_gone_exports_with_shapes_only(tmp_path):
    cache = Cache(tmp_path / "c.db")
    rec = with_values(cache, make_record(), [np.ones(2)])
    cache.record(rec)
    os.unlink(os.path.join(cache.values_dir, rec.value_files[0]))
    cache.export_json(tmp_path / "x.json")
    (exported,) = json.loads((tmp_path / "x.json").read_text())["pending"]
    assert exported["values"]["files"] == [] and "missing" in exported["values"]["note"]
    assert Cache(tmp_path / "t.db").import_json(tmp_path / "x.json").pending == 1


# ------------------------------------------------------------------ locks, servers

# The sleeps the recording thread asks for are counted (each still sleeps): which record waited,
# and for how much, is told apart without a clock; the lock-wait budget says what it spent.
RECORD_WHILE_LOCKED = textwrap.dedent("""
    import json, sys, threading, time
    from autotune.cache import Cache, _sqlite
    from _entries import make_record
    asked, sleep, me = [], time.sleep, threading.get_ident()
    time.sleep = lambda s: (threading.get_ident() == me and asked.append(s)) or sleep(s)
    cache = Cache(sys.argv[1])
    first = cache.record(make_record("locked:f"))
    first_asked, left = list(asked), _sqlite.LOCK_WAIT.remaining()
    second = cache.record(make_record("locked:g"))
    print(json.dumps({"first": first, "second": second, "first_asked": first_asked, "left": left,
                      "second_asked": asked[len(first_asked):]}))
""")


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_record_on_a_locked_cache_returns_false_within_the_lock_budget(tmp_path):
    path = tmp_path / "c.db"
    Cache(path).record(make_record())
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import sqlite3, sys, time
        con = sqlite3.connect(sys.argv[1], isolation_level=None)
        con.execute("BEGIN EXCLUSIVE")   # WAL mode: blocks every writer
        print("locked", flush=True)
        time.sleep(120)   # the behaviour under test: the lock held until the test kills the holder
    """),
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        r = subprocess.run(
            [sys.executable, "-c", RECORD_WHILE_LOCKED, str(path)], env=ENV, capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        assert got["first"] is False and got["second"] is False, got
        # the 3 s budget spent (by its own clock), never more asked for, then no wait at all
        assert got["left"] == 0.0 and 0 < sum(got["first_asked"]) <= LOCK_WAIT_BUDGET_S + 1e-9, got
        assert got["second_asked"] == [], got
    finally:
        holder.kill()
        holder.wait()
    assert [p.function_key for p in Cache(path).pending()] == ["app:step"]


def test_records_on_postgresql(pg_url, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache = Cache(pg_url)
    assert cache.values_dir.startswith(str(tmp_path / "xdg" / "autotune" / "values-"))
    rec = with_values(cache, make_record(), [np.arange(6).reshape(2, 3)])
    assert cache.record(rec) and not cache.record(rec) and cache.pending() == [rec]
    cache.export_json(tmp_path / "x.json")
    assert cache.delete_pending() == 1 and cache.pending() == [] and os.listdir(cache.values_dir) == []
    assert cache.import_json(tmp_path / "x.json").pending == 1 and cache.pending() == [rec]
    assert os.listdir(cache.values_dir) == rec.value_files
    cache.close()


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_record_on_postgresql_does_not_queue_behind_a_writer(pg_url):
    """Another autotune writer holds the write lock (an import, say): record gives up within the budget."""
    import sqlalchemy as sa

    from autotune.cache._session import _PG_LOCK_KEY

    Cache(pg_url).record(make_record())
    engine = sa.create_engine(pg_url)
    with engine.connect() as con:
        con.exec_driver_sql(f"SELECT pg_advisory_lock({_PG_LOCK_KEY})")  # held until this connection closes
        r = subprocess.run(
            [sys.executable, "-c", RECORD_WHILE_LOCKED, pg_url], env=ENV, capture_output=True, text=True, timeout=120
        )
        con.exec_driver_sql(f"SELECT pg_advisory_unlock({_PG_LOCK_KEY})")
    engine.dispose()
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["first"] is False and got["second"] is False and got["second_asked"] == [], got
    assert Cache(pg_url).record(make_record("locked:f")) is True  # free again
