"""The tuning cache: best configs per (function, program, input signature, device), and the
pending records of calls recorded for tuning later.

This package is the only part of autotune that imports SQLAlchemy. Modules: `_url`
(locations, `redact`), `_sqlite` (SQLite engines, locks, file modes), `_schema` (version,
migrations), `_models` (tables), `_entry` / `_pending` (the JSON records and their
validation), `_rows` (records <-> rows), `_session` (transactions, errors), `_transfer`
(export files), `_cache` (the `Cache` class).
"""

from .._keys import device_key as device_key
from .._paths import default_cache_location as default_cache_location
from ._cache import Cache as Cache
from ._cache import TransferCount as TransferCount
from ._entry import CacheEntry as CacheEntry
from ._entry import best_for as best_for
from ._models import SCHEMA_VERSION as SCHEMA_VERSION
from ._pending import PendingRecord as PendingRecord
from ._sqlite import LOCK_WAIT_BUDGET_S as LOCK_WAIT_BUDGET_S
from ._transfer import MAX_IMPORT_BYTES as MAX_IMPORT_BYTES
from ._url import redact as redact

__all__ = ["LOCK_WAIT_BUDGET_S", "MAX_IMPORT_BYTES", "SCHEMA_VERSION", "Cache", "CacheEntry", "PendingRecord",
           "TransferCount", "best_for", "default_cache_location", "device_key", "redact"]
