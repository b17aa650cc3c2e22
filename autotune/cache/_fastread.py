"""The decorator's read path: one entry looked up with the standard library's ``sqlite3``.

A decorated function looks its entry up inside its first call (jit's trace). Importing
SQLAlchemy and building an engine there would cost that call more than the gains a config is
tuned for (measured: docs/explanation/decorator-cost.md, ``python -m benchmarks.overhead``),
so `Reader` reads a SQLite file (a path, ``sqlite:///path``,
or the default cache) itself: one short read transaction, decoded by `_layout` exactly
as `Cache` decodes its rows, re-picked for the caller's objective by
`CacheEntry.for_objective` (the one winner rule, `autotune.select`).

Everything else goes to `Cache` (SQLAlchemy): other databases and URLs with options, and
every SQLite file that is not plainly readable (locked, corrupt, foreign, of another
schema version), so waiting on locks (at most `LOCK_WAIT_BUDGET_S` per process) and every
error message stay those of `Cache`. Reads never create or change anything: a missing file
is no entry, and a file in a directory this process cannot write is opened immutable.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import urllib.parse
from typing import Any

from autotune._paths import ENV_CACHE, default_cache_location, read_only_path, redact
from autotune.cache._entry import CacheEntry, repicked
from autotune.cache._layout import ENTRIES_TABLE, VERSION_TABLE, entry_columns, entry_from_row, readable
from autotune.select._objective import Objective

_UNREAD = object()
"""`_read` could not decide: `Cache` reads it (and says what is wrong, if anything is)."""


def sqlite_path(location: Any) -> str | None:
    """The absolute path of the SQLite file ``location`` names, or None when only `Cache`
    can tell (another database, a URL with options or escapes, an in-memory database).

    Arguments:
        location: what ``cache=`` takes: None (``$AUTOTUNE_CACHE`` or the user cache),
            a file path, a URL, or an ``at.Cache``.
    """
    cache = _given_cache(location)
    if cache is not None:
        return cache.sqlite_path
    if location is None:
        location = default_cache_location()
    if not isinstance(location, (str, os.PathLike)):
        return None
    text = os.fspath(location)
    if not isinstance(text, str) or not text.strip():
        return None
    if "://" not in text:
        return os.path.abspath(os.path.expanduser(text))
    prefix = "sqlite:///"
    path = text[len(prefix) :] if text.startswith(prefix) else ""
    if not path or path == ":memory:" or path.startswith("file:") or any(c in path for c in "?%#"):
        return None
    return os.path.abspath(os.path.expanduser(path))


class Reader:
    """The one read path into a cache location: a SQLite file through the standard library,
    everything else (and every file that is not plainly readable) through `Cache`, opened only
    when it must be.

    Arguments:
        location: what ``cache=`` takes (see `sqlite_path`).

    Example::

        >>> reader = Reader("/tmp/no-such-dir/cache.db")
        >>> reader.lookup("m:f", "0" * 32, "sig", "cpu|cpu|1|jax=0|jaxlib=0") is None
        True
    """

    def __init__(self, location: Any):
        self.location = location
        self.path = sqlite_path(location)
        self._cache = _given_cache(location)

    @property
    def opened(self) -> Any:
        """The `Cache` when one was opened (or given), else None."""
        return self._cache

    @property
    def cache(self) -> Any:
        """The `Cache` of this location (imports SQLAlchemy on first use)."""
        if self._cache is None:
            from autotune.cache._cache import Cache

            self._cache = Cache(self.location)
        return self._cache

    @property
    def display_location(self) -> str:
        """The location as messages name it (password redacted)."""
        if self._cache is not None:
            return self._cache.display_url
        where = self.location if self.location is not None else os.environ.get(ENV_CACHE)
        return redact(where) if where else "the default cache"

    def lookup(self, *key: str, objective: Objective | None = None) -> CacheEntry | None:
        """``Cache.lookup(*key, objective=objective)``, read with the standard library where the
        file is plainly readable: the entry for an exact key (function key, fingerprint, signature,
        device key), re-picked for ``objective`` when given (`_entry.repicked`, the one re-pick).

        Raises:
            CacheError: the cache cannot be read, or the row is inconsistent.
        """
        entry = _UNREAD if self.path is None else _read(self.path, tuple(key))
        if entry is _UNREAD:
            return self.cache.lookup(*key, objective=objective)
        return repicked(entry, objective)

    def has_xla(self, function_key: str) -> bool:
        """Whether the SQLite file holds an entry of ``function_key`` whose config sets XLA options
        (``"@xla"``): one indexed read-only query. Any problem, and a cache that is not a plain
        SQLite file, is False: the caller then routes nothing (`autotune.jit._routes`)."""
        if self.path is None or not os.path.exists(self.path):
            return False
        try:
            con = sqlite3.connect(f"file:{urllib.parse.quote(self.path)}?mode=ro", uri=True, timeout=0)
            try:
                row = con.execute(
                    f"SELECT 1 FROM {ENTRIES_TABLE} WHERE function_key = ? AND config LIKE ? LIMIT 1",
                    (function_key, '%"@xla"%'),
                ).fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            return False
        return row is not None


def _given_cache(location: Any) -> Any:
    """``location`` if it is an ``at.Cache`` (then SQLAlchemy is loaded already), else None."""
    module = sys.modules.get(f"{__package__}._cache")
    return location if module is not None and isinstance(location, module.Cache) else None


def _read(path: str, key: tuple[str, str, str, str]) -> Any:
    """The entry of ``key`` in the SQLite file ``path``, None, or `_UNREAD`."""
    if not os.path.exists(path):
        return None
    where = f"The autotune cache at sqlite:///{path}"
    mode = "mode=ro&immutable=1" if read_only_path(path) else "mode=rw"
    try:
        # busy timeout 0: a locked file goes to Cache, which waits within the process's lock budget.
        con = sqlite3.connect(
            f"file:{urllib.parse.quote(path)}?{mode}",
            uri=True,
            timeout=0,
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.Error:
        return _UNREAD
    try:
        con.execute("PRAGMA query_only=1")
        con.execute("BEGIN")
        tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if VERSION_TABLE not in tables:
            return _UNREAD if ENTRIES_TABLE in tables else None  # foreign tables: Cache says so
        found = con.execute(f"SELECT version FROM {VERSION_TABLE} WHERE id = 1").fetchone()
        if found is None or not readable(found[0]):
            return _UNREAD
        columns = entry_columns(found[0])
        names = ", ".join(f'"{c}"' for c in columns)
        row = con.execute(
            f"SELECT {names} FROM {ENTRIES_TABLE} WHERE function_key = ? AND fingerprint = ? "
            "AND signature = ? AND device_key = ?",
            key,
        ).fetchone()
        con.execute("COMMIT")
    except sqlite3.Error:
        return _UNREAD
    finally:
        con.close()
    return None if row is None else entry_from_row(dict(zip(columns, row)), where)
