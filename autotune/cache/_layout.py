"""The cache tables as plain data, without SQLAlchemy: names, schema versions, the columns
each version has, and how a row becomes an entry or a pending record.

`_models` declares the tables from these names, `_schema` migrates between the versions,
`_rows` writes rows; `_fastread` reads a SQLite cache on the decorator's call path with
the standard library's ``sqlite3`` and the same decoding, so a row means the same thing
whichever way it is read.

A row is trusted only as far as its parts agree: reading one re-validates its JSON through
`parse_entry` / `parse_pending` and checks its ``device_key`` column against its ``device``
JSON, so a hand-edited or damaged row raises a `CacheError` naming the row and what to do
instead of being applied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune._errors import CacheError
from autotune.cache import _validate as v
from autotune.cache._entry import CacheEntry, parse_entry
from autotune.cache._pending import PendingRecord, parse_pending
from autotune.cache._validate import FieldError

SCHEMA_VERSION = 2
"""Version of the tables; bump it (and add a migration in `_schema`) whenever they change."""
OLDEST_READABLE = 1
"""The oldest version a reader accepts as it is (its rows get the later fields as None)."""

VERSION_TABLE = "autotune_schema_version"
ENTRIES_TABLE = "autotune_entries"
PENDING_TABLE = "autotune_pending"

KEY_COLUMNS = ("function_key", "fingerprint", "signature", "device_key")
"""The columns that make an entry (and a pending record) unique."""

V1_ENTRY_COLUMNS = (
    "id",
    "function_key",
    "fingerprint",
    "signature",
    "device_key",
    "device",
    "config",
    "sites",
    "measurements",
    "objective",
    "pareto",
    "cost",
    "default_cost",
    "study_name",
    "created_at",
)
V2_ENTRY_COLUMNS = V1_ENTRY_COLUMNS + ("default_config", "complete_range", "retune")

ENTRY_PLAIN = ("function_key", "fingerprint", "signature", "cost", "default_cost", "study_name", "created_at", "retune")
ENTRY_JSON = ("device", "config", "sites", "measurements", "objective", "pareto")
ENTRY_NULLABLE_JSON = ("default_config", "complete_range")
PENDING_PLAIN = ("function_key", "fingerprint", "signature", "replayable", "why_not", "created_at")
PENDING_JSON = ("device", "location", "abstract", "objective", "options")
PENDING_NULLABLE_JSON = ("values",)


def entry_columns(version: int) -> tuple[str, ...]:
    """The columns of ``autotune_entries`` in a database of ``version``."""
    return V1_ENTRY_COLUMNS if version < 2 else V2_ENTRY_COLUMNS


def has_pending(version: int) -> bool:
    """Whether a database of ``version`` has the ``autotune_pending`` table."""
    return version >= 2


def readable(version: Any) -> bool:
    """Whether a reader of this version takes a database of ``version`` as it is."""
    return isinstance(version, int) and OLDEST_READABLE <= version <= SCHEMA_VERSION


def _decode(
    row: Mapping[str, Any], plain: Sequence[str], json_cols: Sequence[str], nullable: Sequence[str]
) -> dict[str, Any]:
    d = {name: row[name] for name in plain if name in row}
    for name in json_cols:
        d[name] = v.loads(row[name])
    for name in nullable:
        if name in row and row[name] is not None:
            d[name] = v.loads(row[name])
    return d


def entry_from_row(row: Mapping[str, Any], where: str) -> CacheEntry:
    """Rebuild the entry of a row (v1 rows lack the v2 columns: those fields are None).

    Arguments:
        row: column name -> value.
        where: ``"The autotune cache at ..."`` for messages.

    Raises:
        CacheError: the row does not hold a valid entry, or its columns disagree.
    """
    try:
        entry = parse_entry(_decode(row, ENTRY_PLAIN, ENTRY_JSON, ENTRY_NULLABLE_JSON))
    except (FieldError, ValueError, TypeError, OverflowError) as e:
        raise _bad_row(where, "entry", row, f"holds an unreadable entry: {e}") from None
    return _same_device(entry, row, where, "entry", " (edited by hand or damaged), so it is never applied")


def pending_from_row(row: Mapping[str, Any], where: str) -> PendingRecord:
    """Rebuild the pending record of a row; raise `CacheError` like `entry_from_row`."""
    try:
        d = _decode(row, PENDING_PLAIN, PENDING_JSON, PENDING_NULLABLE_JSON)
        d["replayable"] = bool(d["replayable"])
        rec = parse_pending(d)
    except (FieldError, ValueError, TypeError, OverflowError) as e:
        raise _bad_row(where, "pending record", row, f"holds an unreadable record: {e}") from None
    return _same_device(rec, row, where, "pending record")


def _same_device(record: Any, row: Mapping[str, Any], where: str, kind: str, consequence: str = "") -> Any:
    """``record``, whose device JSON must give the row's ``device_key`` column (a `CacheError` saying
    which disagrees, and ``consequence``)."""
    if record.device_key != row["device_key"]:
        raise _bad_row(
            where,
            kind,
            row,
            f"is inconsistent: its device JSON gives the device key {record.device_key!r} but its "
            f"device_key column says {row['device_key']!r}{consequence}",
        )
    return record


def _bad_row(where: str, kind: str, row: Mapping[str, Any], problem: str) -> CacheError:
    fk = str(row.get("function_key"))[:100]
    table = PENDING_TABLE if kind == "pending record" else ENTRIES_TABLE
    delete = "Cache.delete_pending" if kind == "pending record" else "Cache.delete"
    return CacheError(
        f"{where}: the {kind} in row {row.get('id')} of {table} (function {fk!r}) {problem}. "
        f"Delete it ({delete}({fk!r}) deletes that function's rows) or use another cache."
    )
