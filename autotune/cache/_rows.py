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

from .._errors import CacheError
from . import _validate as v
from ._entry import CacheEntry, parse_entry
from ._models import KEY_COLUMNS, EntryModel, PendingModel
from ._pending import VALUE_FILE_RE, PendingRecord, parse_pending
from ._validate import FieldError

ENTRY_PLAIN = ("function_key", "fingerprint", "signature", "cost", "default_cost", "study_name", "created_at",
               "retune")
ENTRY_JSON = ("device", "config", "sites", "measurements", "objective", "pareto")
ENTRY_NULLABLE_JSON = ("default_config", "complete_range")
PENDING_PLAIN = ("function_key", "fingerprint", "signature", "replayable", "why_not", "created_at")
PENDING_JSON = ("device", "location", "abstract", "objective", "options")
PENDING_NULLABLE_JSON = ("values",)

ENTRIES = EntryModel.__table__
PENDING = PendingModel.__table__

Key = tuple[str, str, str, str]


def entry_row(entry: CacheEntry) -> dict[str, Any]:
    """The column values of a validated entry (schema version 2)."""
    row = {name: getattr(entry, name) for name in ENTRY_PLAIN}
    row.update({name: v.dumps(getattr(entry, name)) for name in ENTRY_JSON})
    row.update({name: None if getattr(entry, name) is None else v.dumps(getattr(entry, name))
                for name in ENTRY_NULLABLE_JSON})
    row["device_key"] = entry.device_key
    return row


def pending_row(rec: PendingRecord) -> dict[str, Any]:
    """The column values of a validated pending record."""
    row = {name: getattr(rec, name) for name in PENDING_PLAIN}
    row.update({name: v.dumps(getattr(rec, name)) for name in PENDING_JSON})
    row["values"] = None if rec.values is None else v.dumps(rec.values)
    row["device_key"] = rec.device_key
    return row


def _decode(row: Mapping[str, Any], plain: Sequence[str], json_cols: Sequence[str],
            nullable: Sequence[str]) -> dict[str, Any]:
    d = {name: row[name] for name in plain if name in row}
    for name in json_cols:
        d[name] = v.loads(row[name])
    for name in nullable:
        if name in row and row[name] is not None:
            d[name] = v.loads(row[name])
    return d


def entry_from_row(row: Mapping[str, Any], where: str) -> CacheEntry:
    """Rebuild the entry of a row (v1 rows lack the v2 columns: those fields are None).

    Raises:
        CacheError: the row does not hold a valid entry, or its columns disagree.
    """
    try:
        entry = parse_entry(_decode(row, ENTRY_PLAIN, ENTRY_JSON, ENTRY_NULLABLE_JSON))
    except (FieldError, ValueError, TypeError, OverflowError) as e:
        raise _bad_row(where, "entry", row, f"holds an unreadable entry: {e}") from None
    if entry.device_key != row["device_key"]:
        raise _bad_row(where, "entry", row, f"is inconsistent: its device JSON gives the device key "
                       f"{entry.device_key!r} but its device_key column says {row['device_key']!r} (edited by hand "
                       "or damaged), so it is never applied")
    return entry


def pending_from_row(row: Mapping[str, Any], where: str) -> PendingRecord:
    """Rebuild the pending record of a row; raise `CacheError` like `entry_from_row`."""
    try:
        d = _decode(row, PENDING_PLAIN, PENDING_JSON, PENDING_NULLABLE_JSON)
        d["replayable"] = bool(d["replayable"])
        rec = parse_pending(d)
    except (FieldError, ValueError, TypeError, OverflowError) as e:
        raise _bad_row(where, "pending record", row, f"holds an unreadable record: {e}") from None
    if rec.device_key != row["device_key"]:
        raise _bad_row(where, "pending record", row, f"is inconsistent: its device JSON gives the device key "
                       f"{rec.device_key!r} but its device_key column says {row['device_key']!r}")
    return rec


def _bad_row(where: str, kind: str, row: Mapping[str, Any], problem: str) -> CacheError:
    fk = str(row.get("function_key"))[:100]
    table = "autotune_pending" if kind == "pending record" else "autotune_entries"
    delete = "Cache.delete_pending" if kind == "pending record" else "Cache.delete"
    return CacheError(f"{where}: the {kind} in row {row.get('id')} of {table} (function {fk!r}) {problem}. "
                      f"Delete it ({delete}({fk!r}) deletes that function's rows) or use another cache.")


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
        existing = {tuple(r[1:]): r[0] for r in conn.execute(select(ENTRIES.c.id, *[ENTRIES.c[c] for c in KEY_COLUMNS]))}
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
