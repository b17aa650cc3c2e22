"""The cache schema's version, its creation, and the ordered list of migrations.

**Reads never write.** A reader accepts every version it can read (1 and 2): a version-1
file is read as it is, its rows getting the version-2 fields as None. **Writes upgrade in
place, under the write lock:** the first write to an older file runs the migrations from
its version up to `SCHEMA_VERSION` inside the write transaction (SQLite ``BEGIN
IMMEDIATE``; on PostgreSQL a transaction-scoped advisory lock and ``FOR UPDATE`` on the
version row), so concurrent first writers upgrade exactly once and a failed upgrade
rolls back whole. A file of a newer version, or without a version row, is refused.

Migrations are plain functions in `MIGRATIONS`, not Alembic: they run inside our own
write transaction and lock protocol (Alembic would run its own, with an
``alembic_version`` table that races on concurrent first creation), need no migration
environment shipped with the package, and each is a few DDL statements that SQLite and
PostgreSQL both accept. A migration must not depend on models a later version changes.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import inspect, select, update
from sqlalchemy.engine import Connection

from autotune._errors import CacheSchemaError
from autotune._paths import ENV_CACHE

# Versions and columns are plain data in _layout (read without SQLAlchemy by `_fastread`).
from autotune.cache._layout import OLDEST_READABLE, V1_ENTRY_COLUMNS, V2_ENTRY_COLUMNS, entry_columns, has_pending  # noqa: F401 (re-exported)
from autotune.cache._models import SCHEMA_VERSION, BaseModel, EntryModel, PendingModel, SchemaVersionModel


def _v1_to_v2(conn: Connection) -> None:
    # New nullable columns: rows of version 1 read them as None (no default config known,
    # no range recorded, no re-tune command).
    for column in ("default_config", "complete_range", "retune"):
        conn.exec_driver_sql(f"ALTER TABLE {EntryModel.__tablename__} ADD COLUMN {column} TEXT")
    # autotune_pending is unchanged since version 2; freeze its v2 definition here when a
    # later version changes it.
    PendingModel.__table__.create(conn)


MIGRATIONS: list[tuple[int, int, Callable[[Connection], None]]] = [
    (1, 2, _v1_to_v2),
]
"""``(from_version, to_version, migrate)`` in order; each runs inside the write transaction."""


def read_version(conn: Connection, where: str, *, lock: bool = False) -> int | None:
    """The schema version of the database, or None when it has no autotune tables yet.

    Arguments:
        conn: a connection inside a transaction.
        where: "The autotune cache at ..." for messages.
        lock: lock the version row (``FOR UPDATE``; ignored by SQLite, whose writers
            hold the database lock already).

    Raises:
        CacheSchemaError: a foreign or damaged database, or a version this code cannot read.
    """
    inspector = inspect(conn)
    if not inspector.has_table(SchemaVersionModel.__tablename__):
        if inspector.has_table(EntryModel.__tablename__):
            raise CacheSchemaError(
                f"{where} has an entries table but no schema version table, so it was not "
                "written by jax-autotune; use another cache."
            )
        return None
    query = select(SchemaVersionModel.version).where(SchemaVersionModel.id == 1)
    version = conn.execute(query.with_for_update() if lock else query).scalar()
    if version is None:
        raise CacheSchemaError(f"{where} has no schema version row; it is damaged. Delete it or use another cache.")
    if version > SCHEMA_VERSION:
        raise CacheSchemaError(
            f"{where} uses schema version {version}, but this jax-autotune understands only schema version "
            f"{SCHEMA_VERSION}. Upgrade jax-autotune, or use another cache (cache=... or ${ENV_CACHE})."
        )
    if version < OLDEST_READABLE:
        raise CacheSchemaError(
            f"{where} uses the old schema version {version}, and this jax-autotune (schema version "
            f"{SCHEMA_VERSION}) cannot migrate it. Delete it, or use another cache (cache=... or ${ENV_CACHE})."
        )
    return version


def ensure_current(conn: Connection, where: str) -> int:
    """Inside a write transaction: create the tables, or upgrade them to `SCHEMA_VERSION`.

    Returns:
        The version the database had before (None-free: 0 for a new database).
    """
    version = read_version(conn, where, lock=True)
    if version is None:
        BaseModel.metadata.create_all(conn)
        conn.execute(SchemaVersionModel.__table__.insert().values(id=1, version=SCHEMA_VERSION))
        return 0
    before = version
    for start, end, migrate in MIGRATIONS:
        if version == start:
            migrate(conn)
            version = end
    if version != SCHEMA_VERSION:  # a gap in MIGRATIONS: a bug, say so rather than write a half schema
        raise CacheSchemaError(
            f"{where} uses schema version {before} and no migration leads from version "
            f"{version} to {SCHEMA_VERSION}; report this bug. Nothing was written."
        )
    if version != before:
        conn.execute(
            update(SchemaVersionModel.__table__).where(SchemaVersionModel.id == 1).values(version=SCHEMA_VERSION)
        )
    return before
