"""SQLite specifics (autotune/cache/_sqlite.py): private file modes whatever the umask, and the
per-process budget for waiting on locks."""

from __future__ import annotations

import os
import sqlite3
import threading
import time

from _entries import make_entry
from _repo import mode

from autotune.cache import Cache
from autotune.cache._sqlite import LOCK_WAIT_BUDGET_S, LockWaitBudget, is_busy


def test_a_new_cache_is_private_under_umask_000(tmp_path, umask_000):
    path = tmp_path / "new" / "autotune" / "cache.db"
    cache = Cache(path)
    cache.put(make_entry())  # the engine stays open: the -wal and -shm files exist now
    assert (path.parent / "cache.db-wal").exists() and (path.parent / "cache.db-shm").exists()
    assert mode(tmp_path / "new") == 0o700 and mode(path.parent) == 0o700
    for name in ("cache.db", "cache.db-wal", "cache.db-shm"):
        assert mode(path.parent / name) == 0o600, name
    cache.export_json(tmp_path / "x.json")
    assert mode(tmp_path / "x.json") == 0o600
    cache.close()
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_existing_directories_and_files_keep_their_modes(tmp_path, umask_000):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    Cache(shared / "c.db").put(make_entry())
    assert mode(shared) == 0o755 and mode(shared / "c.db") == 0o600
    theirs = shared / "theirs.db"
    sqlite3.connect(theirs).close()
    os.chmod(theirs, 0o644)
    Cache(theirs).put(make_entry())
    assert mode(theirs) == 0o644  # not created by autotune: left as it was


def test_reads_create_nothing(tmp_path):
    assert Cache(tmp_path / "absent" / "c.db").entries() == []
    assert Cache(tmp_path / "absent" / "c.db").pending() == []
    assert list(tmp_path.iterdir()) == []


def test_the_lock_budget_is_spent_once_then_never_waits(monkeypatch):
    # The sleeps this thread asks for, counted (each still sleeps): its waits checked without a clock.
    asked, sleep, me = [], time.sleep, threading.get_ident()
    monkeypatch.setattr(time, "sleep", lambda s: (threading.get_ident() == me and asked.append(s)) or sleep(s))
    budget, waits = LockWaitBudget(0.2), 0
    while budget.wait(waits):
        waits += 1
    assert waits >= 3 and len(asked) == waits and budget.remaining() == 0.0  # spent, by its own clock
    assert sum(asked) <= 0.2 + 1e-9  # never asks for more than is left
    assert budget.wait(0) is False and len(asked) == waits  # spent: no sleep at all
    assert LOCK_WAIT_BUDGET_S == 3.0


def test_busy_errors_are_recognised():
    assert is_busy(sqlite3.OperationalError("database is locked"))
    assert not is_busy(sqlite3.OperationalError("no such table: x")) and not is_busy(None)
