"""The tuning cache: best configs per (function, program, input signature, device).

This package is the only part of autotune that imports SQLAlchemy.
"""

from ._cache import Cache as Cache
from ._cache import default_cache_location as default_cache_location
from ._entry import CacheEntry as CacheEntry
from ._entry import best_for as best_for
from ._entry import device_key as device_key
from ._models import SCHEMA_VERSION as SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "Cache", "CacheEntry", "best_for", "default_cache_location", "device_key"]
