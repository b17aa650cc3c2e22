"""The tuning cache: best configs per (function, program, input signature, device), and the
pending records of calls recorded for tuning later.

This package is the only part of autotune that imports SQLAlchemy, and only when `Cache`
(or another name below that needs it) is first used: the decorator reads a SQLite cache
through `_fastread` with the standard library alone. Modules: `_url` (locations,
`redact`), `_sqlite` (SQLite engines, locks, file modes), `_schema` (version, migrations),
`_layout` (table names, versions, columns, rows -> records; no SQLAlchemy), `_models`
(tables), `_entry` / `_pending` (the JSON records and their validation), `_rows` (records
-> rows), `_session` (transactions, errors), `_transfer` (export files), `_cache` (the
`Cache` class), `_fastread` (the decorator's read path).
"""

from autotune._lazy import lazy_attributes
from autotune._paths import default_cache_location as default_cache_location
from autotune._paths import redact as redact
from autotune.cache._entry import CacheEntry as CacheEntry
from autotune.cache._entry import best_for as best_for
from autotune.cache._layout import SCHEMA_VERSION as SCHEMA_VERSION
from autotune.cache._pending import PendingRecord as PendingRecord

# name -> the module that defines it, loaded on first use: these import SQLAlchemy, and _keys
# imports JAX (the cache commands need neither until they touch a cache or a device).
_LAZY = {
    "Cache": "_cache",
    "TransferCount": "_transfer",
    "LOCK_WAIT_BUDGET_S": "_sqlite",
    "MAX_IMPORT_BYTES": "_transfer",
    "device_key": ".program._keys",
}

__all__ = [
    "LOCK_WAIT_BUDGET_S",
    "MAX_IMPORT_BYTES",
    "SCHEMA_VERSION",
    "Cache",
    "CacheEntry",
    "PendingRecord",
    "TransferCount",
    "best_for",
    "default_cache_location",
    "device_key",
    "redact",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
