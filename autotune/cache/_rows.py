"""Entries and pending records to database rows and back, and the bulk writes.

A row is trusted only as far as its parts agree: reading one re-validates its JSON
through `parse_entry` / `parse_pending` and checks its ``device_key`` column against its
``device`` JSON, so a hand-edited or damaged row raises a `CacheError` naming the row and
what to do instead of being applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection

from autotune.cache import _validate as v
from autotune.cache._entry import CacheEntry

# Reading a row needs no SQLAlchemy: the decoding lives in _layout (the decorator's reader uses it too).
from autotune.cache._layout import (  # noqa: F401 (re-exported)
    ENTRY_JSON,
    ENTRY_NULLABLE_JSON,
    ENTRY_PLAIN,
    PENDING_JSON,
    PENDING_NULLABLE_JSON,
    PENDING_PLAIN,
    entry_from_row,
    pending_from_row,
)
from autotune.cache._models import KEY_COLUMNS, EntryModel, PendingModel
from autotune.cache._pending import VALUE_FILE_RE, PendingRecord

ENTRIES = EntryModel.__table__
PENDING = PendingModel.__table__

Key = tuple[str, str, str, str]


def entry_row(entry: CacheEntry) -> dict[str, Any]:
    """The column values of a validated entry (schema version 2)."""
    row = {name: getattr(entry, name) for name in ENTRY_PLAIN}
    row.update({name: v.dumps(getattr(entry, name)) for name in ENTRY_JSON})
    row.update(
        {name: None if getattr(entry, name) is None else v.dumps(getattr(entry, name)) for name in ENTRY_NULLABLE_JSON}
    )
    row["device_key"] = entry.device_key
    return row


def pending_row(rec: PendingRecord) -> dict[str, Any]:
    """The column values of a validated pending record."""
    row = {name: getattr(rec, name) for name in PENDING_PLAIN}
    row.update({name: v.dumps(getattr(rec, name)) for name in PENDING_JSON})
    row["values"] = None if rec.values is None else v.dumps(rec.values)
    row["device_key"] = rec.device_key
    return row


def value_files_of(values_json: str | None) -> list[str]:
    """The value file names a ``values`` column names; lenient (a damaged row names none), so
    deleting a damaged record still works."""
    try:
        files = (v.loads(values_json) or {}).get("files", []) if values_json else []
    except (ValueError, AttributeError):
        return []
    return [f for f in files if isinstance(f, str) and VALUE_FILE_RE.fullmatch(f)] if isinstance(files, list) else []


def key_of(row: Mapping[str, Any]) -> Key:
    return tuple(row[c] for c in KEY_COLUMNS)  # type: ignore[return-value]


def _where_key(table: Any, key: Key) -> list[Any]:
    return [table.c[c] == k for c, k in zip(KEY_COLUMNS, key)]


def find_entry_id(conn: Connection, key: Key) -> int | None:
    return conn.execute(select(ENTRIES.c.id).where(*_where_key(ENTRIES, key))).scalar()


def upsert_entries(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert or replace ``rows`` (replacing keeps the row id), in bulk: two ``executemany``."""
    if len(rows) == 1:
        existing = {}
        found = find_entry_id(conn, key_of(rows[0]))
        if found is not None:
            existing[key_of(rows[0])] = found
    else:
        existing = {
            tuple(r[1:]): r[0] for r in conn.execute(select(ENTRIES.c.id, *[ENTRIES.c[c] for c in KEY_COLUMNS]))
        }
    new, changed = [], []
    for row in rows:
        row_id = existing.get(key_of(row))
        if row_id is None:
            new.append(row)
        else:
            changed.append({**row, "_id": row_id})
    if new:
        conn.execute(ENTRIES.insert(), new)
    if changed:  # the SET clause comes from the parameters; "_id" only binds the WHERE
        conn.execute(update(ENTRIES).where(ENTRIES.c.id == bindparam("_id")), changed)


def pending_keys(conn: Connection, keys: Iterable[Key] | None = None) -> set[Key]:
    """The keys of ``autotune_pending`` (only among ``keys`` when it is a single key)."""
    keys = None if keys is None else list(keys)
    query = select(*[PENDING.c[c] for c in KEY_COLUMNS])
    if keys is not None and len(keys) == 1:
        query = query.where(*_where_key(PENDING, keys[0]))
    return {tuple(r) for r in conn.execute(query)}


def insert_pending(conn: Connection, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Insert the rows whose key is absent (the first recording wins); return those inserted."""
    if not rows:
        return []
    present = pending_keys(conn, [key_of(r) for r in rows])
    seen: set[Key] = set()
    fresh = []
    for row in rows:
        k = key_of(row)
        if k not in present and k not in seen:
            fresh.append(row)
            seen.add(k)
    if fresh:
        conn.execute(PENDING.insert(), fresh)
    return fresh
