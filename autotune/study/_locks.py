"""Who holds what in a study storage, across processes: the identity behind a trial's lease,
and the locks that serialise creating a study and picking the next config.

None of this imports Optuna; ``_optuna`` uses it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

PROPOSAL_WAIT_S = 10.0
"""The longest a process waits for a study's proposal lock before proposing without it."""


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> str | None:
    """A process's start time (clock ticks since boot), to tell a reused pid from the original."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_identity() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": socket.gethostname(), "boot": _boot_id(), "pid": pid, "start": _start_time(pid)}


def owner_gone(owner: dict[str, Any]) -> bool:
    """True when the owner ran on this host and its process no longer exists."""
    if owner.get("host") != socket.gethostname() or owner.get("boot", "") != _boot_id():
        return False
    pid = int(owner.get("pid", -1))
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    start = owner.get("start")
    return start is not None and _start_time(pid) not in (None, start)


@contextlib.contextmanager
def creation_lock(url: str) -> Iterator[None]:
    """Serialise the first creation of a SQLite study database across processes: Optuna's
    table creation races (``UNIQUE constraint failed: alembic_version.version_num``)."""
    from autotune._paths import create_private_file, make_private_dirs, storage_file

    path = storage_file(url)
    if path is None:
        yield
        return

    make_private_dirs(os.path.dirname(os.path.abspath(path)) or ".")
    create_private_file(path)  # the study database is private, like the cache beside it (0600, whatever the umask)
    create_private_file(path + ".lock")
    fd = os.open(path + ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextlib.contextmanager
def proposal_lock(rdb: Any, url: str, name: str) -> Iterator[None]:
    """Hold study ``name``'s proposal lock (see ``Study.proposal_lock``): a lock file beside a
    SQLite database, a session advisory lock on PostgreSQL, nothing elsewhere. Waits at most
    :data:`PROPOSAL_WAIT_S`; when the lock cannot be had (or made), goes on without it."""
    deadline = time.monotonic() + PROPOSAL_WAIT_S
    from autotune._paths import create_private_file, storage_file

    path = storage_file(url)
    if path is not None:
        try:
            create_private_file(path + ".propose.lock")
            fd = os.open(path + ".propose.lock", os.O_RDWR)
        except OSError:  # e.g. a read-only folder: duplicates stay caught by the lowest-trial rule
            fd = None
        if fd is None:
            yield
            return
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)  # releases the lock
        return
    if not url.startswith("postgresql"):
        yield
        return
    key = int.from_bytes(hashlib.sha256(f"autotune-propose:{name}".encode()).digest()[:8], "big", signed=True)
    conn, held = None, False
    try:
        conn = rdb.engine.connect()
        while not held and time.monotonic() < deadline:
            held = bool(conn.exec_driver_sql(f"SELECT pg_try_advisory_lock({key})").scalar())
            if not held:
                time.sleep(0.01)
    except Exception:  # no lock: owner_of still keeps a config from being measured twice
        held = False
    try:
        yield
    finally:
        if conn is not None:
            try:
                if held:
                    conn.exec_driver_sql(f"SELECT pg_advisory_unlock({key})")
                conn.rollback()
            except Exception:  # a pooled connection must not keep the lock
                conn.invalidate()
            conn.close()
