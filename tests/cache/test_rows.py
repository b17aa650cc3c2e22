"""cache/_rows: entries and pending records to rows and back, and the bulk writes, on a real
SQLite cache database (the tables made by `Cache` itself)."""

from __future__ import annotations

import dataclasses

import pytest
import sqlalchemy as sa
from _entries import GPU, make_entry, make_record

from autotune._errors import CacheError
from autotune.cache import Cache
from autotune.cache import _rows as rows

WHERE = "The autotune cache at test"


@pytest.fixture
def engine(tmp_path):
    """The engine of a fresh cache database whose tables `Cache` created."""
    path = tmp_path / "c.db"
    cache = Cache(path)
    cache.put(make_entry("setup:f"))  # the first write creates the tables
    assert cache.delete() == 1
    eng = sa.create_engine(f"sqlite:///{path}")
    yield eng
    eng.dispose()


def stored_entries(engine) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(rows.ENTRIES).order_by(rows.ENTRIES.c.id))]


def test_an_entry_row_reads_back_as_the_same_entry():
    entry = make_entry()
    row = rows.entry_row(entry)
    assert rows.key_of(row) == (entry.function_key, entry.fingerprint, entry.signature, entry.device_key)
    assert all(isinstance(row[name], str) for name in rows.ENTRY_JSON)  # JSON columns hold text
    assert rows.entry_from_row(row, WHERE) == entry


def test_a_row_whose_device_key_disagrees_with_its_device_is_refused():
    row = {**rows.entry_row(make_entry()), "device_key": rows.entry_row(make_entry(device=GPU))["device_key"]}
    with pytest.raises(CacheError, match=WHERE):
        rows.entry_from_row(row, WHERE)


def test_upsert_inserts_new_keys_and_replaces_existing_ones_keeping_their_row_id(engine):
    a, b = make_entry("m:a"), make_entry("m:b")
    with engine.begin() as conn:
        rows.upsert_entries(conn, [rows.entry_row(a), rows.entry_row(b)])
    first = {r["function_key"]: r["id"] for r in stored_entries(engine)}
    assert set(first) == {"m:a", "m:b"}
    newer = dataclasses.replace(a, study_name="a-new-study")
    c = make_entry("m:c")
    with engine.begin() as conn:  # one existing key replaced, one new key: in one bulk call
        rows.upsert_entries(conn, [rows.entry_row(newer), rows.entry_row(c)])
    after = stored_entries(engine)
    assert len(after) == 3
    by_key = {r["function_key"]: r for r in after}
    assert by_key["m:a"]["id"] == first["m:a"]  # replaced in place
    assert rows.entry_from_row(by_key["m:a"], WHERE) == newer
    with engine.begin() as conn:  # a single row takes the one-key path
        rows.upsert_entries(conn, [rows.entry_row(dataclasses.replace(b, study_name="again"))])
        assert rows.find_entry_id(conn, rows.key_of(rows.entry_row(b))) == first["m:b"]
        assert rows.find_entry_id(conn, ("m:none", "f00d", "(f32[8],)", b.device_key)) is None
    assert rows.entry_from_row({r["function_key"]: r for r in stored_entries(engine)}["m:b"], WHERE).study_name == (
        "again"
    )


def test_insert_pending_keeps_the_first_recording_of_a_key(engine):
    one, same_key, other = make_record("app:f"), make_record("app:f", options={}), make_record("app:g")
    with engine.begin() as conn:
        fresh = rows.insert_pending(conn, [rows.pending_row(one), rows.pending_row(same_key)])
        assert [r["options"] for r in fresh] == [rows.pending_row(one)["options"]]  # the first of the batch
        assert rows.insert_pending(conn, [rows.pending_row(same_key), rows.pending_row(other)]) == [
            rows.pending_row(other)
        ]
        assert rows.insert_pending(conn, []) == []
        assert rows.pending_keys(conn) == {rows.key_of(rows.pending_row(r)) for r in (one, other)}
        assert rows.pending_keys(conn, [rows.key_of(rows.pending_row(other))]) == {rows.key_of(rows.pending_row(other))}
        stored = [dict(r._mapping) for r in conn.execute(sa.select(rows.PENDING).order_by(rows.PENDING.c.id))]
    assert [rows.pending_from_row(r, WHERE) for r in stored] == [one, other]


def test_value_files_of_names_only_well_formed_files_and_forgives_damage():
    good = rows.pending_row(make_record(values={"files": ["app_f-1-0.npy"], "bytes": 12, "note": None}))
    assert rows.value_files_of(good["values"]) == ["app_f-1-0.npy"]
    assert rows.value_files_of(None) == []
    assert rows.value_files_of("{damaged") == []
    assert rows.value_files_of('{"files": "app_f-1-0.npy"}') == []
    assert rows.value_files_of('{"files": ["../../etc/passwd", "ok-1-0.npy", 3]}') == ["ok-1-0.npy"]
