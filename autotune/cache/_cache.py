"""`Cache`: the tuning cache on any SQLAlchemy database (SQLite file by default).

Reads never create or change anything: looking up a cache file that does not exist
returns nothing and leaves the disk untouched, and a file of the previous schema version
is read as it is. Writes create the directory (0700), the file (0600) and the tables on
first use, and upgrade an older file in place under the write lock (`_schema`). Every
driver error leaves this module as a `CacheError` whose message names the cache, with
its password redacted, and says what to do.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from autotune._errors import CacheError
from autotune._paths import user_cache_dir, write_private
from autotune.cache import _rows, _schema, _sqlite, _transfer
from autotune.cache._entry import CacheEntry, parse_entry, repicked
from autotune.cache._models import SCHEMA_VERSION
from autotune.cache._pending import PendingRecord, parse_pending
from autotune.cache._session import Database
from autotune.cache._transfer import MAX_IMPORT_BYTES, TransferCount
from autotune.cache._url import resolve_url, url_hash
from autotune.cache._validate import FieldError
from autotune.select._objective import Objective

_T = TypeVar("_T")


class Cache:
    """The tuning cache: best configs keyed by (function, fingerprint, signature, device),
    and the pending records of calls recorded for tuning later.

    Arguments:
        url: a SQLAlchemy URL (``"sqlite:///path/cache.db"``, ``"postgresql://..."``),
            a SQLite file path (`str` or `pathlib.Path`), or None for ``$AUTOTUNE_CACHE``,
            else ``$XDG_CACHE_HOME/autotune/cache.db`` (``~/.cache/autotune/cache.db``).

    The database connection opens lazily on first use. Use `close` (or ``with Cache(...)
    as cache:``) to release it. Example::

        with at.Cache("/tmp/cache.db") as cache:
            for entry in cache.entries():
                print(entry.function_key, entry.config)
    """

    def __init__(self, url: str | os.PathLike | None = None):
        self._db = Database(resolve_url(url))
        self._current = False  # seen at SCHEMA_VERSION: no version check needed again

    @property
    def url(self) -> str:
        """The real SQLAlchemy URL of the cache, as text (SQLite paths absolute; passwords kept)."""
        return self._db.url.render_as_string(hide_password=False)

    @property
    def display_url(self) -> str:
        """The URL for people: the password redacted (``postgresql://user:***@host/db``)."""
        return self._db.display

    @property
    def sqlite_path(self) -> str | None:
        """The absolute path of the SQLite file this cache is, or None for another database."""
        return self._db.path if self._db.backend == "sqlite" else None

    @property
    def values_dir(self) -> str:
        """Where recorded argument values (``.npy``) live: ``<cache file>.values`` beside a
        SQLite file, else ``$XDG_CACHE_HOME/autotune/values-<hash of the URL without its password>``.
        Not created until a value file is written."""
        if self._db.path is not None:
            return self._db.path + ".values"
        return os.path.join(user_cache_dir(), f"values-{url_hash(self._db.url)}")

    def __repr__(self) -> str:
        return f"Cache({self.display_url!r})"

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"])

    def close(self) -> None:
        """Release the database connections; the cache reopens them if used again."""
        self._db.close()

    # ------------------------------------------------------------------ entries

    def lookup(
        self,
        function_key: str,
        fingerprint: str,
        signature: str,
        device_key: str,
        *,
        objective: Objective | None = None,
    ) -> CacheEntry | None:
        """Find the entry for an exact key.

        Arguments:
            function_key, fingerprint, signature, device_key: the cache key
                (`device_key` as given by `CacheEntry.device_key`).
            objective: re-pick the winner for this objective, whole (`_entry.repicked`, the one
                re-pick); None keeps the entry's own. ``entry.covers(objective.expected_calls)``
                tells whether the measurements cover that call count.

        Returns:
            The entry (or its re-picked copy), or None when there is none.

        Raises:
            CacheError: the cache exists but cannot be read, or the row is inconsistent
                (its device JSON disagrees with its key, or its config with its sites).

        Example::

            >>> with Cache("/tmp/no-such-dir/cache.db") as cache:
            ...     cache.lookup("m:f", "0" * 32, "sig", "cpu", objective=Objective(expected_calls=10)) is None
            True
        """
        key = (function_key, fingerprint, signature, device_key)

        def body(conn: Connection, version: int) -> CacheEntry | None:
            row = conn.execute(
                self._entry_query(version).where(*[_rows.ENTRIES.c[c] == k for c, k in zip(_rows.KEY_COLUMNS, key)])
            ).first()
            return None if row is None else _rows.entry_from_row(row._mapping, self._db.describe(True))

        return repicked(self._read(body, None), objective)

    def entries(self, function_key: str | None = None, device_key: str | None = None) -> list[CacheEntry]:
        """List entries, ordered by function key then creation time (empty when the cache does not exist).

        Raises:
            CacheError: as `lookup`, for the first unreadable or inconsistent row.
        """

        def body(conn: Connection, version: int) -> list[CacheEntry]:
            t = _rows.ENTRIES
            query = self._entry_query(version).order_by(t.c.function_key, t.c.created_at, t.c.id)
            if function_key is not None:
                query = query.where(t.c.function_key == function_key)
            if device_key is not None:
                query = query.where(t.c.device_key == device_key)
            where = self._db.describe(True)
            return [_rows.entry_from_row(row._mapping, where) for row in conn.execute(query)]

        return self._read(body, [])

    def neighbours(self, function_key: str, device_key: str, *, fingerprint: str, signature: str) -> list[CacheEntry]:
        """The entries of ``function_key`` on ``device_key`` under any other key: other input
        signatures, or other programs (the fingerprint), oldest first. A new study of the function
        at (``fingerprint``, ``signature``) starts from their configs (`autotune.study._neighbours`).

        Raises:
            CacheError: as `lookup`, for the first unreadable or inconsistent row.
        """
        return [
            e
            for e in self.entries(function_key, device_key)
            if (e.fingerprint, e.signature) != (fingerprint, signature)
        ]

    def put(self, entry: CacheEntry) -> None:
        """Store `entry`, replacing any entry with the same key, in one transaction.

        Raises:
            CacheError: the entry is invalid, or the cache cannot be written.
        """
        row = self._valid_row("put", entry, CacheEntry, parse_entry, _rows.entry_row, "store the cache entry for")
        self._write("write an entry to", lambda conn: _rows.upsert_entries(conn, [row]))

    def delete(self, function_key: str | None = None) -> int:
        """Delete the entries of `function_key` (all entries when None); return how many."""
        if not self._db.exists():
            return 0
        query = delete(_rows.ENTRIES)
        if function_key is not None:
            query = query.where(_rows.ENTRIES.c.function_key == function_key)
        return self._write("delete entries from", lambda conn: conn.execute(query).rowcount)

    # ------------------------------------------------------------ pending records

    def record(self, rec: PendingRecord) -> bool:
        """Store a pending record unless one with its key exists (the first call per signature wins).

        Made for the user's call path: it waits on a locked SQLite file only within the
        process's lock-wait budget (`_sqlite.LOCK_WAIT`) and then gives up.

        Returns:
            True when the record was stored; False when one existed or the cache was locked.

        Raises:
            CacheError: the record is invalid, or the cache cannot be written (not a lock).
        """
        row = self._valid_row(
            "record", rec, PendingRecord, parse_pending, _rows.pending_row, "record a pending call of"
        )
        try:
            return bool(
                self._write("record a pending call in", lambda conn: _rows.insert_pending(conn, [row]), hot=True)
            )
        except CacheError as e:
            if _sqlite.is_busy(e.__cause__):
                return False
            raise

    def pending(self, function_key: str | None = None) -> list[PendingRecord]:
        """The pending records (of `function_key` when given), by function key then creation time."""

        def body(conn: Connection, version: int) -> list[PendingRecord]:
            if not _schema.has_pending(version):
                return []
            t = _rows.PENDING
            query = select(t).order_by(t.c.function_key, t.c.created_at, t.c.id)
            if function_key is not None:
                query = query.where(t.c.function_key == function_key)
            where = self._db.describe(True)
            return [_rows.pending_from_row(row._mapping, where) for row in conn.execute(query)]

        return self._read(body, [])

    def delete_pending(
        self,
        function_key: str | None = None,
        fingerprint: str | None = None,
        signature: str | None = None,
        device_key: str | None = None,
    ) -> int:
        """Delete the pending records matching every given key part (all when none is given),
        and the value files no remaining record names; return how many records were deleted."""
        if not self._db.exists():
            return 0
        t = _rows.PENDING
        conditions = [
            t.c[c] == k
            for c, k in zip(_rows.KEY_COLUMNS, (function_key, fingerprint, signature, device_key))
            if k is not None
        ]
        orphans: list[str] = []

        def body(conn: Connection) -> int:
            doomed = {
                f
                for (text,) in conn.execute(select(t.c["values"]).where(*conditions))
                for f in _rows.value_files_of(text)
            }
            n = conn.execute(delete(t).where(*conditions)).rowcount
            kept = {f for (text,) in conn.execute(select(t.c["values"])) for f in _rows.value_files_of(text)}
            orphans[:] = sorted(doomed - kept)
            return n

        n = self._write("delete pending records from", body)
        for name in orphans:  # after the commit: a crash here leaves a file, never a dangling record
            try:
                os.unlink(os.path.join(self.values_dir, name))
            except FileNotFoundError:
                pass
            except OSError as e:
                raise CacheError(
                    f"Deleted {n} pending record(s) from {self._db.describe()}, but could not "
                    f"delete their value file {name}: {e}. Delete it by hand."
                ) from None
        return n

    # ------------------------------------------------------------ export/import

    def export_json(self, path: str | os.PathLike) -> TransferCount:
        """Write every entry and pending record (with its value files, as base64 ``.npy``) to a
        JSON file, atomically and with mode 0600. A record whose value files are gone is
        exported with shapes only, and its ``values`` note says so.

        Returns:
            The number of entries written (`TransferCount`: ``.pending`` too).
        """
        bundle = _transfer.gather(self.entries(), self.pending(), self.values_dir)
        _transfer.write_export(path, bundle)
        return TransferCount(len(bundle.entries), len(bundle.pending))

    def import_json(self, path: str | os.PathLike, *, max_bytes: int = MAX_IMPORT_BYTES) -> TransferCount:
        """Import an exported file, all or nothing: entries are upserted, pending records are
        added unless the cache has them (with their value files, into `values_dir`).

        Everything is read (at most ``max_bytes``) and validated before the write lock is
        taken; the write itself is one bulk transaction.

        Arguments:
            path: a regular file written by `export_json`.
            max_bytes: refuse larger files (default `MAX_IMPORT_BYTES`, 256 MiB).

        Returns:
            The number of entries imported (`TransferCount`: ``.pending``, ``.pending_kept`` too).

        Raises:
            CacheImportError: the file or one of its items is invalid; nothing was written.
            CacheError: the cache could not be written; nothing was written.
        """
        bundle = _transfer.read_export(path, max_bytes)
        entry_rows = [_rows.entry_row(e) for e in bundle.entries]
        pending_rows = [_rows.pending_row(r) for r in bundle.pending]
        files = {r.key: r.value_files for r in bundle.pending}
        created: set[str] = set()
        counts = [0, 0]

        def body(conn: Connection) -> int:
            if entry_rows:
                _rows.upsert_entries(conn, entry_rows)
            fresh = _rows.insert_pending(conn, pending_rows)
            for row in fresh:  # under the lock: only the records that are really added bring files
                for name in files[_rows.key_of(row)]:
                    target = os.path.join(self.values_dir, name)
                    if not os.path.exists(target):
                        created.add(target)
                    write_private(target, bundle.values[name])
            counts[:] = [len(fresh), len(pending_rows) - len(fresh)]
            return len(entry_rows)

        try:
            n = self._write(f"import {os.fspath(path)!r} into", body)
        except BaseException:
            for target in created:  # all or nothing: the rolled-back records' files go too
                try:
                    os.unlink(target)
                except OSError:
                    pass
            raise
        return TransferCount(n, *counts)

    # ----------------------------------------------------------------- plumbing

    def _valid_row(self, method: str, obj: Any, cls: type, parse: Callable, to_row: Callable, what: str) -> dict:
        """The row of ``obj`` after the full validation (a `CacheError` naming the field if it fails)."""
        if not isinstance(obj, cls):
            raise TypeError(f"Cache.{method} takes a {cls.__name__}, got {type(obj).__name__}.")
        try:
            return to_row(parse(dataclasses.asdict(obj)))
        except FieldError as e:
            noun = "entry" if cls is CacheEntry else "record"
            raise CacheError(
                f"Cannot {what} function {obj.function_key!r} in {self._db.describe()}: {e}. "
                f"Fix the {noun}; nothing was written."
            ) from None

    def _entry_query(self, version: int):
        return select(*[_rows.ENTRIES.c[c] for c in _schema.entry_columns(version)])

    def _read(self, body: Callable[[Connection, int], _T], empty: _T) -> _T:
        """Run ``body(conn, schema_version)`` in a read transaction; ``empty`` when there are no tables."""
        if not self._db.exists():
            return empty

        def run(conn: Connection) -> _T:
            if self._current:
                return body(conn, SCHEMA_VERSION)
            version = _schema.read_version(conn, self._db.describe(True))
            if version is None:
                return empty
            self._current = version == SCHEMA_VERSION
            return body(conn, version)

        return self._db.read("read", run)

    def _write(self, what: str, body: Callable[[Connection], _T], *, hot: bool = False) -> _T:
        """Run ``body`` in a write transaction after creating or upgrading the tables."""

        def run(conn: Connection) -> _T:
            _schema.ensure_current(conn, self._db.describe(True))
            return body(conn)

        result = self._db.write(what, run, hot=hot)
        self._current = True
        return result
