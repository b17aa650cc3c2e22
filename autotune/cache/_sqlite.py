"""SQLite specifics: engines, pragmas, WAL, lock waits, the read-only path and private files.

* autotune keeps its cache in WAL mode, where readers never wait on a writer. The switch
  to WAL is tried at every connection without waiting (a locked file keeps its mode).
* Writers (``put``, ``import``, ...) take the write lock up front (``BEGIN IMMEDIATE``) and
  wait up to `WRITE_BUSY_TIMEOUT_MS` for it, so two writers queue instead of failing.
* Readers (the decorator's lookups at jit time) and hot-path writes (`Cache.record`) never
  let SQLite wait: they retry in Python, and all their waiting in one process shares one
  budget, `LOCK_WAIT_BUDGET_S` seconds in total. Once it is spent they try once and, if the
  file is still locked, fail at once (the caller runs the default config). A rollback-journal
  cache held locked by another process therefore costs a process at most 3 s, not 3 s per
  new input shape.
* A database in a directory this process cannot write is read through an immutable,
  read-only connection when its ``-wal``/``-shm`` files are absent (SQLite cannot open a
  WAL database read-only without them).
* A database file autotune creates is created 0600 before SQLite opens it; SQLite gives
  the ``-wal`` and ``-shm`` files the database file's mode.
"""

from __future__ import annotations

import os
import random
import threading
import time
import urllib.parse
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import IntegrityError

from autotune._paths import create_private_file, make_private_dirs, read_only_path

WRITE_BUSY_TIMEOUT_MS = 30000
LOCK_WAIT_BUDGET_S = 3.0
"""Seconds one process's reads (and `Cache.record` writes) may wait on SQLite locks, in total."""

READ, WRITE, HOT = "read", "write", "hot"
"""Transaction modes: a read, a queued write, a write that must not stall the caller."""


class LockWaitBudget:
    """The seconds this process may still spend waiting on locks; shared by every cache.

    Arguments:
        total_s: the budget of a fresh process.
    """

    def __init__(self, total_s: float):
        self.total_s = total_s
        self._spent = 0.0
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def remaining(self) -> float:
        with self._lock:
            if os.getpid() != self._pid:  # a forked child starts with a fresh budget
                self._pid, self._spent = os.getpid(), 0.0
            return max(0.0, self.total_s - self._spent)

    def wait(self, attempt: int) -> bool:
        """Sleep a little before retry ``attempt`` (charged to the budget); False when none is left."""
        left = self.remaining()
        if left <= 0:
            return False
        step = min(left, 0.005 * 2 ** min(attempt, 5) * (1 + random.random()))
        t0 = time.monotonic()
        time.sleep(step)
        with self._lock:
            self._spent += time.monotonic() - t0
        return True


LOCK_WAIT = LockWaitBudget(LOCK_WAIT_BUDGET_S)


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    # We issue BEGIN ourselves (see _on_begin): the documented SQLAlchemy recipe.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA busy_timeout=0")
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except Exception:  # noqa: BLE001 - read-only, locked or corrupt: the next statement reports it
            pass
    finally:
        cursor.close()


def _on_begin(conn: Any) -> None:
    mode = conn.get_execution_options().get("autotune_mode", READ)
    # Only queued writers let SQLite wait; reads and hot writes retry against LOCK_WAIT.
    conn.exec_driver_sql(f"PRAGMA busy_timeout={WRITE_BUSY_TIMEOUT_MS if mode == WRITE else 0}")
    conn.exec_driver_sql("BEGIN" if mode == READ else "BEGIN IMMEDIATE")


def create_sqlite_engine(url: URL, path: str | None, *, write: bool) -> tuple[bool, Engine]:
    """An engine for a SQLite URL, with autotune's transaction handling.

    Returns:
        ``(read_only, engine)``: ``read_only`` tells whether it is the immutable read-only
        connection (callers keep one engine per kind).
    """
    read_only = not write and path is not None and read_only_path(path)
    if read_only:
        url = URL.create(
            "sqlite", database="file:" + urllib.parse.quote(path), query={"mode": "ro", "immutable": "1", "uri": "true"}
        )
    engine = create_engine(url, connect_args={"timeout": WRITE_BUSY_TIMEOUT_MS / 1000})
    event.listen(engine, "connect", _on_connect)
    event.listen(engine, "begin", _on_begin)
    return read_only, engine


def prepare_file(path: str) -> None:
    """Before a write: create the cache's missing directories 0700 and its file 0600."""
    make_private_dirs(os.path.dirname(path))
    create_private_file(path)


def is_busy(exc: BaseException | None) -> bool:
    """Whether a driver error means "locked, try again" (or two writers raced on one key)."""
    if isinstance(exc, IntegrityError):  # two writers inserted the same key: retry as an update
        return True
    text = f"{exc} {getattr(exc, 'orig', '')}".lower()
    return "database is locked" in text or "database is busy" in text or "database table is locked" in text
