"""SQLAlchemy models of the tuning cache (schema version 2): a one-row schema version
table, the entries, and the pending records of record-and-replay.

Configs, sites, measurements, objectives, Pareto points, ranges, device dicts and the
JSON objects of pending records are stored as JSON text (never pickle), so any
SQLAlchemy backend and any reader can use them. `autotune.cache._schema` creates these
tables and upgrades older files to them.
"""

from __future__ import annotations

from sqlalchemy import Boolean, CheckConstraint, Float, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# The version, names and key columns live in _layout, which the decorator's reader imports
# without SQLAlchemy; bump SCHEMA_VERSION there (and add a migration in `_schema`).
from autotune.cache._layout import ENTRIES_TABLE, KEY_COLUMNS, PENDING_TABLE, SCHEMA_VERSION, VERSION_TABLE
from autotune.cache._validate import MAX_TEXT

__all__ = ["SCHEMA_VERSION", "KEY_COLUMNS", "BaseModel", "SchemaVersionModel", "EntryModel", "PendingModel"]


class BaseModel(DeclarativeBase):
    """Declarative base of the cache tables."""


class SchemaVersionModel(BaseModel):
    """The single row that records which schema version wrote the database."""

    __tablename__ = VERSION_TABLE
    __table_args__ = (CheckConstraint("id = 1", name="ck_autotune_schema_version_single_row"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class _Keyed:
    """The columns an entry and a pending record share: an id, the key, the device JSON
    (first in the table, as version 1 laid them out)."""

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True, sort_order=-1)
    function_key: Mapped[str] = mapped_column(String(MAX_TEXT), nullable=False, index=True, sort_order=-1)
    fingerprint: Mapped[str] = mapped_column(String(MAX_TEXT), nullable=False, sort_order=-1)
    signature: Mapped[str] = mapped_column(String(MAX_TEXT), nullable=False, sort_order=-1)
    device_key: Mapped[str] = mapped_column(String(MAX_TEXT), nullable=False, index=True, sort_order=-1)
    device: Mapped[str] = mapped_column(Text, nullable=False, sort_order=-1)


class EntryModel(_Keyed, BaseModel):
    """One cache entry; unique per (function key, fingerprint, signature, device key)."""

    __tablename__ = ENTRIES_TABLE
    __table_args__ = (UniqueConstraint(*KEY_COLUMNS, name="uq_autotune_entries_key"),)

    config: Mapped[str] = mapped_column(Text, nullable=False)
    sites: Mapped[str] = mapped_column(Text, nullable=False)
    measurements: Mapped[str] = mapped_column(Text, nullable=False)
    objective: Mapped[str] = mapped_column(Text, nullable=False)
    pareto: Mapped[str] = mapped_column(Text, nullable=False)
    cost: Mapped[float] = mapped_column(Float, nullable=False)
    default_cost: Mapped[float | None] = mapped_column(Float, nullable=True)
    study_name: Mapped[str | None] = mapped_column(String(MAX_TEXT), nullable=True)
    created_at: Mapped[str] = mapped_column(String(64), nullable=False)
    # schema version 2 (added by the v1 -> v2 migration, NULL in migrated rows):
    default_config: Mapped[str | None] = mapped_column(Text, nullable=True)
    complete_range: Mapped[str | None] = mapped_column(Text, nullable=True)
    retune: Mapped[str | None] = mapped_column(Text, nullable=True)


class PendingModel(_Keyed, BaseModel):
    """One recorded call signature; unique per (function key, fingerprint, signature, device key)."""

    __tablename__ = PENDING_TABLE
    __table_args__ = (UniqueConstraint(*KEY_COLUMNS, name="uq_autotune_pending_key"),)

    location: Mapped[str] = mapped_column(Text, nullable=False)
    abstract: Mapped[str] = mapped_column(Text, nullable=False)
    objective: Mapped[str] = mapped_column(Text, nullable=False)
    options: Mapped[str] = mapped_column(Text, nullable=False)
    replayable: Mapped[bool] = mapped_column(Boolean, nullable=False)
    why_not: Mapped[str | None] = mapped_column(Text, nullable=True)
    values: Mapped[str | None] = mapped_column("values", Text, nullable=True)
    created_at: Mapped[str] = mapped_column(String(64), nullable=False)
