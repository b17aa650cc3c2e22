"""`Cache`: the tuning cache on any SQLAlchemy database (SQLite file by default).

Reads never create anything: looking up a cache file that does not exist returns
nothing and leaves the disk untouched. Writes create the directory, the file and
the tables on first use. Every driver error leaves this module as a `CacheError`
whose message names the cache and says what to do.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import create_engine, delete, event, inspect, select
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from .._errors import CacheError, CacheSchemaError
from . import _transfer
from ._entry import CacheEntry, EntryError, parse_entry
from ._models import SCHEMA_VERSION, BaseModel, EntryModel, SchemaVersionModel

ENV_VAR = "AUTOTUNE_CACHE"
_WRITE_ATTEMPTS = 5
_RETRY_SECONDS = 10.0
_JSON_COLUMNS = ("device", "config", "sites", "measurements", "objective", "pareto")
_T = TypeVar("_T")


def default_cache_location() -> str:
    """Return ``$AUTOTUNE_CACHE`` if set, else ``$XDG_CACHE_HOME/autotune/cache.db``
    (``~/.cache/autotune/cache.db`` when ``XDG_CACHE_HOME`` is unset)."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autotune", "cache.db")


def resolve_url(url: str | os.PathLike | None) -> URL:
    """Turn a SQLAlchemy URL, a file path or None into a SQLAlchemy `URL`.

    Arguments:
        url: a URL containing ``"://"``, a filesystem path (``str`` or `pathlib.Path`)
            of a SQLite file, or None for `default_cache_location`.

    Returns:
        The URL; SQLite file paths are made absolute.

    Raises:
        CacheError: when `url` is neither a usable URL nor a path.
    """
    text = default_cache_location() if url is None else url
    if not isinstance(text, (str, os.PathLike)):
        raise CacheError(f"A cache must be a SQLAlchemy URL, a file path or None, got "
                         f"{type(text).__name__} {text!r}; pass e.g. sqlite:///path/cache.db or /path/cache.db.")
    text = os.fspath(text)
    hint = "pass e.g. sqlite:///path/cache.db or /path/cache.db"
    if not isinstance(text, str) or not text.strip():
        raise CacheError(f"The cache location {text!r} is empty or not text; {hint}.")
    if "://" not in text:
        return URL.create("sqlite", database=os.path.abspath(os.path.expanduser(text)))
    try:
        parsed = make_url(text)
        parsed.get_dialect()
    except (ArgumentError, ValueError) as e:
        raise CacheError(f"The cache location {text!r} is not a SQLAlchemy URL or a file path ({e}); "
                         f"{hint}.") from None
    path = _sqlite_file(parsed)
    return parsed if path is None else parsed.set(database=path)


def _sqlite_file(url: URL) -> str | None:
    """Absolute path of a SQLite file URL, or None (not SQLite, in-memory or a ``file:`` URI)."""
    if url.get_backend_name() != "sqlite":
        return None
    db = url.database or ""
    if db in ("", ":memory:") or db.startswith("file:"):
        return None
    return os.path.abspath(os.path.expanduser(db))


READ_BUSY_TIMEOUT_MS = 3000


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # We issue BEGIN ourselves (see _sqlite_on_begin): the documented SQLAlchemy recipe.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        # Switching to WAL needs a lock: try it without waiting (a locked file keeps its mode).
        cursor.execute("PRAGMA busy_timeout=0")
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error:
            pass  # read-only or corrupt file: the next statement reports it with context
    finally:
        cursor.close()


def _sqlite_on_begin(conn: Any) -> None:
    # Writers take the write lock up front, so two writers queue on busy_timeout
    # instead of failing when a read transaction tries to upgrade.
    write = conn.get_execution_options().get("autotune_write", False)
    # A reader (the decorator at jit time) must not stall the user's program behind a
    # long-held lock: it waits briefly, then the caller falls back to the default config.
    conn.exec_driver_sql(f"PRAGMA busy_timeout={30000 if write else READ_BUSY_TIMEOUT_MS}")
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _is_busy(exc: BaseException | None) -> bool:
    if isinstance(exc, IntegrityError):  # two writers inserted the same key: retry as an update
        return True
    text = f"{exc} {getattr(exc, 'orig', '')}".lower()
    return "database is locked" in text or "database is busy" in text


class Cache:
    """The tuning cache: best configs keyed by (function, fingerprint, signature, device).

    Arguments:
        url: a SQLAlchemy URL (``"sqlite:///path/cache.db"``, ``"postgresql://..."``),
            a SQLite file path (`str` or `pathlib.Path`), or None for ``$AUTOTUNE_CACHE``,
            else ``$XDG_CACHE_HOME/autotune/cache.db`` (``~/.cache/autotune/cache.db``).

    The database connection opens lazily on first use. Use `close` (or ``with Cache(...)
    as cache:``) to release it.
    """

    def __init__(self, url: str | os.PathLike | None = None):
        self._url = resolve_url(url)
        self._path = _sqlite_file(self._url)
        self._engines: dict[bool, Engine] = {}  # read_only -> engine
        self._schema_ok = False

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of the cache, as text (SQLite paths absolute)."""
        return self._url.render_as_string(hide_password=False)

    def __repr__(self) -> str:
        return f"Cache({self._url.render_as_string(hide_password=True)!r})"

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
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()

    # ------------------------------------------------------------------ queries

    def lookup(self, function_key: str, fingerprint: str, signature: str, device_key: str, *,
               expected_calls: float | None = None, compile_weight: float | None = None,
               runtime_weight: float | None = None) -> CacheEntry | None:
        """Find the entry for an exact key.

        Arguments:
            function_key, fingerprint, signature, device_key: the cache key
                (`device_key` as given by `CacheEntry.device_key`).
            expected_calls, compile_weight, runtime_weight: when any is given and the
                entry has a Pareto front, re-choose the config for these numbers (the
                others keep the entry's stored objective values).

        Returns:
            The entry (or its re-chosen copy, with `objective` and `cost` updated and
            `default_cost` None when the objective changed), or None when there is none.

        Raises:
            CacheError: the cache exists but cannot be read.
        """
        if not self._readable():
            return None
        key = (EntryModel.function_key == function_key, EntryModel.fingerprint == fingerprint,
               EntryModel.signature == signature, EntryModel.device_key == device_key)
        with self._session(write=False, what="read") as session:
            if not self._check_schema(session, write=False):
                return None
            row = session.scalars(select(EntryModel).where(*key)).one_or_none()
            entry = None if row is None else self._entry_from_row(row)
        if entry is None or (expected_calls, compile_weight, runtime_weight) == (None, None, None):
            return entry
        return entry.for_objective(expected_calls, compile_weight, runtime_weight)

    def entries(self, function_key: str | None = None, device_key: str | None = None) -> list[CacheEntry]:
        """List entries, ordered by function key then creation time.

        Arguments:
            function_key: only entries of this function, if given.
            device_key: only entries for this device key, if given.

        Returns:
            The matching entries (empty when the cache does not exist yet).
        """
        if not self._readable():
            return []
        query = select(EntryModel).order_by(EntryModel.function_key, EntryModel.created_at, EntryModel.id)
        if function_key is not None:
            query = query.where(EntryModel.function_key == function_key)
        if device_key is not None:
            query = query.where(EntryModel.device_key == device_key)
        with self._session(write=False, what="read") as session:
            if not self._check_schema(session, write=False):
                return []
            return [self._entry_from_row(row) for row in session.scalars(query)]

    def put(self, entry: CacheEntry) -> None:
        """Store `entry`, replacing any entry with the same key, in one transaction.

        Raises:
            CacheError: the entry is invalid, or the cache cannot be written.
        """
        valid = self._validated(entry)
        self._write("write an entry to", lambda session: self._upsert(session, valid))

    def delete(self, function_key: str | None = None) -> int:
        """Delete the entries of `function_key` (all entries when None).

        Returns:
            How many entries were deleted.
        """
        if not self._readable():
            return 0
        query = delete(EntryModel)
        if function_key is not None:
            query = query.where(EntryModel.function_key == function_key)
        return self._write("delete entries from", lambda session: session.execute(query).rowcount)

    def export_json(self, path: str | os.PathLike) -> int:
        """Write every entry to a JSON file (atomically: temp file, then rename).

        Returns:
            The number of entries written.
        """
        return _transfer.write_export(path, self.entries())

    def import_json(self, path: str | os.PathLike) -> int:
        """Validate every entry of an exported file, then upsert them all in one transaction.

        Returns:
            The number of entries imported.

        Raises:
            CacheImportError: the file or one of its entries is invalid; nothing was written.
        """
        entries = _transfer.read_export(path)

        def upsert_all(session: Session) -> int:
            for entry in entries:
                self._upsert(session, entry)
            return len(entries)

        return self._write(f"import {os.fspath(path)!r} into", upsert_all)

    # ----------------------------------------------------------------- plumbing

    def _describe(self, capital: bool = False) -> str:
        # SQLite file paths unescaped, so the message shows the path the user knows.
        where = f"sqlite:///{self._path}" if self._path else self._url.render_as_string(hide_password=True)
        return f"{'The' if capital else 'the'} autotune cache at {where}"

    def _readable(self) -> bool:
        """False for a SQLite file that does not exist yet (reads must not create it)."""
        return self._path is None or os.path.exists(self._path)

    def _get_engine(self, write: bool) -> Engine:
        # SQLite cannot read a WAL database in a directory it cannot write unless the -wal and
        # -shm files are already there; without them, reads use an immutable read-only connection.
        read_only = (not write and self._path is not None
                     and not os.access(os.path.dirname(self._path), os.W_OK)
                     and not (os.path.exists(self._path + "-wal") and os.path.exists(self._path + "-shm")))
        if read_only not in self._engines:
            url = self._url
            if read_only:
                url = URL.create("sqlite", database="file:" + urllib.parse.quote(self._path),
                                 query={"mode": "ro", "immutable": "1", "uri": "true"})
            sqlite = url.get_backend_name() == "sqlite"
            engine = create_engine(url, connect_args={"timeout": 30} if sqlite else {})
            if sqlite:
                event.listen(engine, "connect", _sqlite_on_connect)
                event.listen(engine, "begin", _sqlite_on_begin)
            self._engines[read_only] = engine
        return self._engines[read_only]

    @contextmanager
    def _session(self, *, write: bool, what: str) -> Iterator[Session]:
        """One transaction: commit when the block succeeds, roll back when it raises.

        Driver errors (SQLAlchemy, sqlite3, file system) become `CacheError`.
        """
        try:
            if write and self._path is not None:
                os.makedirs(os.path.dirname(self._path), exist_ok=True)
            with self._get_engine(write).connect() as conn:
                conn.execution_options(autotune_write=write)
                with Session(bind=conn, expire_on_commit=False) as session:
                    yield session
                    session.commit()
        except (SQLAlchemyError, sqlite3.Error, OSError, ImportError) as e:
            raise self._error(what, e) from e

    def _write(self, what: str, body: Callable[[Session], _T]) -> _T:
        """Run `body` in a write transaction, creating the tables if needed; retry when locked."""
        give_up = time.monotonic() + _RETRY_SECONDS  # busy_timeout already waits inside each attempt
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                with self._session(write=True, what=what) as session:
                    self._check_schema(session, write=True)
                    return body(session)
            except BaseException as e:
                self._schema_ok = False  # the tables may have been created in the rolled-back transaction
                if (not isinstance(e, CacheError) or attempt + 1 == _WRITE_ATTEMPTS
                        or time.monotonic() > give_up or not _is_busy(e.__cause__)):
                    raise
            time.sleep(0.05 * 2 ** attempt * (1 + random.random()))
        raise AssertionError("unreachable")

    def _error(self, what: str, exc: BaseException) -> CacheError:
        text = str(getattr(exc, "orig", None) or exc).strip().rstrip(".")
        low = text.lower()
        where = f"Could not {what} {self._describe()}: {text}."
        if "not a database" in low or "malformed" in low or "encrypted" in low:
            fix = ("The file is not a SQLite database of autotune (corrupt, or another program's); "
                   f"move or delete it, or use another cache (cache=... or ${ENV_VAR}).")
        elif "locked" in low or "busy" in low:
            fix = "Another process holds the cache locked; try again later, or use another cache."
        elif isinstance(exc, ImportError):
            fix = (f"Install the database driver the URL names (`{exc.name or 'the driver'}`), name an "
                   f"installed one in the URL (e.g. postgresql+psycopg2://...), or use another cache.")
        elif isinstance(exc, OSError) or any(
                s in low for s in ("readonly", "read-only", "unable to open", "permission")):
            fix = ("Make sure the file and its directory exist and are writable, or use another "
                   f"cache (cache=... or ${ENV_VAR}).")
        else:
            fix = f"Check that the URL is right and the database is reachable, or use another cache (${ENV_VAR})."
        return CacheError(f"{where} {fix}")

    def _check_schema(self, session: Session, *, write: bool) -> bool:
        """Return whether the tables exist; create them when `write`; reject other versions."""
        if self._schema_ok:
            return True
        conn = session.connection()
        inspector = inspect(conn)
        if not inspector.has_table(SchemaVersionModel.__tablename__):
            if inspector.has_table(EntryModel.__tablename__):
                raise CacheSchemaError(
                    f"{self._describe(True)} has an entries table but no "
                    "schema version table, so it was not written by jax-autotune; use another cache.")
            if not write:
                return False
            BaseModel.metadata.create_all(conn)
            session.add(SchemaVersionModel(id=1, version=SCHEMA_VERSION))
            session.flush()
            self._schema_ok = True
            return True
        version = session.scalar(select(SchemaVersionModel.version).where(SchemaVersionModel.id == 1))
        where = self._describe(True)
        if version is None:
            raise CacheSchemaError(f"{where} has no schema version row; it is damaged. "
                                   "Delete it or use another cache.")
        if version > SCHEMA_VERSION:
            raise CacheSchemaError(
                f"{where} uses schema version {version}, but this jax-autotune understands only "
                f"schema version {SCHEMA_VERSION}. Upgrade jax-autotune, or use another cache "
                f"(cache=... or ${ENV_VAR}).")
        if version < SCHEMA_VERSION:
            raise CacheSchemaError(
                f"{where} uses the old schema version {version}, and this jax-autotune (schema "
                f"version {SCHEMA_VERSION}) cannot migrate it. Delete it, or use another cache "
                f"(cache=... or ${ENV_VAR}).")
        self._schema_ok = True
        return True

    def _validated(self, entry: CacheEntry) -> CacheEntry:
        if not isinstance(entry, CacheEntry):
            raise TypeError(f"Cache.put takes a CacheEntry, got {type(entry).__name__}.")
        try:
            return parse_entry(dataclasses.asdict(entry))
        except EntryError as e:
            raise CacheError(f"Cannot store the cache entry for function {entry.function_key!r} in "
                             f"{self._describe()}: {e}. Fix the entry; nothing was written.") from None

    def _upsert(self, session: Session, entry: CacheEntry) -> None:
        values = {name: getattr(entry, name) for name in (
            "function_key", "fingerprint", "signature", "cost", "default_cost", "study_name", "created_at")}
        values.update({name: json.dumps(getattr(entry, name), sort_keys=True, allow_nan=False)
                       for name in _JSON_COLUMNS})
        values["device_key"] = entry.device_key
        row = session.scalars(select(EntryModel).where(
            EntryModel.function_key == entry.function_key, EntryModel.fingerprint == entry.fingerprint,
            EntryModel.signature == entry.signature, EntryModel.device_key == entry.device_key,
        )).one_or_none()
        if row is None:
            session.add(EntryModel(**values))
        else:
            for name, value in values.items():
                setattr(row, name, value)
        session.flush()

    def _entry_from_row(self, row: EntryModel) -> CacheEntry:
        try:
            d = {name: getattr(row, name) for name in (
                "function_key", "fingerprint", "signature", "cost", "default_cost", "study_name", "created_at")}
            d.update({name: json.loads(getattr(row, name)) for name in _JSON_COLUMNS})
            return parse_entry(d)
        except (EntryError, ValueError, TypeError) as e:
            raise CacheError(
                f"{self._describe(True)} holds an unreadable entry (row "
                f"{row.id}, function {row.function_key!r}): {e}. Delete that entry "
                f"(Cache.delete({row.function_key!r})) or the cache.") from None
