"""`Database`: one cache database's engines and transactions, and its errors as `CacheError`.

Every statement of the cache runs in `Database.transaction`: it commits when the block
succeeds, rolls back when it raises, and turns driver errors (SQLAlchemy, sqlite3, the
file system, a missing driver) into a `CacheError` whose message names the cache (its
password redacted) and says what to do. `read` and `write` add the retry policies.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import create_engine
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from autotune._errors import CacheError
from autotune._paths import ENV_CACHE
from autotune.cache import _sqlite
from autotune.cache._sqlite import HOT, READ, WRITE
from autotune.cache._url import redact, redact_text, sqlite_file

_T = TypeVar("_T")
WRITE_ATTEMPTS = 5
WRITE_RETRY_S = 10.0
# One lock for every autotune writer of a PostgreSQL database ('autotune' in ASCII): writers
# queue as on SQLite (BEGIN IMMEDIATE), so table creation and upgrades cannot race. Queued
# writers wait at most 30 s, like SQLite's; hot writes only try, and retry within the budget.
_PG_LOCK_KEY = 7022344802737483365
_PG_WRITE_LOCK = (
    f"SET LOCAL lock_timeout = '{_sqlite.WRITE_BUSY_TIMEOUT_MS}ms'",
    f"SELECT pg_advisory_xact_lock({_PG_LOCK_KEY})",
)
_PG_TRY_LOCK = f"SELECT pg_try_advisory_xact_lock({_PG_LOCK_KEY})"


class LockBusy(Exception):
    """Another autotune writer holds the PostgreSQL write lock (the hot path does not wait)."""

    def __init__(self) -> None:
        super().__init__("database is locked (another autotune writer holds the write lock)")


class Database:
    """The database behind one `Cache`.

    Arguments:
        url: the resolved SQLAlchemy URL (`autotune.cache._url.resolve_url`).
    """

    def __init__(self, url: URL):
        self.url = url
        self.path = sqlite_file(url)
        self.backend = url.get_backend_name()
        self.display = redact(url)
        self._engines: dict[bool, Engine] = {}  # read_only -> engine

    def describe(self, capital: bool = False) -> str:
        return f"{'The' if capital else 'the'} autotune cache at {self.display}"

    def exists(self) -> bool:
        """False for a SQLite file that does not exist yet (reads must not create it)."""
        return self.path is None or os.path.exists(self.path)

    def close(self) -> None:
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()

    def _engine(self, write: bool) -> Engine:
        if self.backend == "sqlite":
            read_only = not write and self.path is not None and _sqlite.read_only_path(self.path)
            if read_only not in self._engines:
                self._engines[read_only] = _sqlite.create_sqlite_engine(self.url, self.path, write=write)[1]
            return self._engines[read_only]
        if False not in self._engines:
            self._engines[False] = create_engine(self.url)
        return self._engines[False]

    @contextmanager
    def transaction(self, mode: str, what: str) -> Iterator[Connection]:
        """One transaction in ``mode`` (`READ`, `WRITE` or `HOT`): commit on success, roll back on error.

        Arguments:
            what: the action for messages, e.g. ``"read"``, ``"write an entry to"``.

        Raises:
            CacheError: any driver or file-system error, with the cache named and a fix.
        """
        try:
            if mode != READ and self.path is not None:
                _sqlite.prepare_file(self.path)
            with self._engine(mode != READ).connect() as conn:
                conn.execution_options(autotune_mode=mode)
                with conn.begin():
                    if mode == WRITE and self.backend == "postgresql":
                        for statement in _PG_WRITE_LOCK:
                            conn.exec_driver_sql(statement)
                    elif mode == HOT and self.backend == "postgresql":
                        if not conn.exec_driver_sql(_PG_TRY_LOCK).scalar():
                            raise LockBusy()
                    yield conn
        except (SQLAlchemyError, sqlite3.Error, OSError, ImportError, LockBusy) as e:
            raise self.error(what, e) from e

    def read(self, what: str, body: Callable[[Connection], _T]) -> _T:
        """Run ``body`` in a read transaction; when locked (SQLite) retry within `_sqlite.LOCK_WAIT`."""
        return self._run(READ, what, body)

    def write(self, what: str, body: Callable[[Connection], _T], *, hot: bool = False) -> _T:
        """Run ``body`` in a write transaction, retrying when locked.

        Arguments:
            hot: a write on the user's call path (`Cache.record`): it waits on locks only
                within `_sqlite.LOCK_WAIT` instead of queueing for up to 30 s.
        """
        return self._run(HOT if hot else WRITE, what, body)

    def _run(self, mode: str, what: str, body: Callable[[Connection], _T]) -> _T:
        give_up = time.monotonic() + WRITE_RETRY_S
        attempt = 0
        while True:
            try:
                with self.transaction(mode, what) as conn:
                    return body(conn)
            except CacheError as e:
                if not _sqlite.is_busy(e.__cause__):
                    raise
                attempt += 1
                if mode != WRITE:  # reads and hot writes: only within the process's budget
                    if not _sqlite.LOCK_WAIT.wait(attempt - 1):
                        raise self.error(what, e.__cause__, budget_spent=True) from e.__cause__
                    continue
                # a queued writer already waited busy_timeout inside the attempt: a few more tries
                if attempt >= WRITE_ATTEMPTS or time.monotonic() > give_up:
                    raise
            time.sleep(0.05 * 2**attempt * (1 + random.random()))

    def error(self, what: str, exc: BaseException | None, *, budget_spent: bool = False) -> CacheError:
        """The `CacheError` for driver error ``exc`` while doing ``what``."""
        text = redact_text(str(getattr(exc, "orig", None) or exc).strip().rstrip("."), self.url)
        low = text.lower()
        where = f"Could not {what} {self.describe()}: {text}."
        if "not a database" in low or "malformed" in low or "encrypted" in low:
            fix = (
                "The file is not a SQLite database of autotune (corrupt, or another program's); "
                f"move or delete it, or use another cache (cache=... or ${ENV_CACHE})."
            )
        elif "locked" in low or "busy" in low or "lock timeout" in low:
            fix = "Another process holds the cache locked; try again later, or use another cache."
            if budget_spent:
                fix += (
                    f" (This process has spent its {_sqlite.LOCK_WAIT_BUDGET_S:g} s budget of waiting on "
                    "cache locks, so its lookups no longer wait.)"
                )
        elif isinstance(exc, ImportError):
            fix = (
                f"Install the database driver the URL names (`{exc.name or 'the driver'}`; for PostgreSQL "
                "`pip install 'jax-autotune[postgres]'`), name an installed one in the URL "
                "(e.g. postgresql+psycopg2://...), or use another cache."
            )
        elif isinstance(exc, OSError) or any(
            s in low for s in ("readonly", "read-only", "unable to open", "permission")
        ):
            fix = (
                "Make sure the file and its directory exist and are writable, or use another "
                f"cache (cache=... or ${ENV_CACHE})."
            )
        else:
            fix = f"Check that the URL is right and the database is reachable, or use another cache (${ENV_CACHE})."
        return CacheError(f"{where} {fix}")
