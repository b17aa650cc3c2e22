"""jax-autotune: tune loop structure (for / scan / fori / unroll) with compile time in the objective.

``import autotune`` loads JAX, NumPy and the decorator; the tuner (Optuna) loads on first
use of ``tune``, ``TuneResult`` or ``TrialRecord``, and the cache (SQLAlchemy) when a
decorated function first reads it or on first use of ``Cache`` or ``CacheEntry``: a
worker process that only measures never pays for either.
"""

from ._config import Config as Config, SiteChoice as SiteChoice
from ._decorator import Autotuned as Autotuned, Lookup as Lookup, autotuned as autotuned
from ._errors import (
    AutotuneError as AutotuneError,
    CacheError as CacheError,
    CacheImportError as CacheImportError,
    CacheSchemaError as CacheSchemaError,
    ConfigError as ConfigError,
    StudyError as StudyError,
    TraceError as TraceError,
)
from ._interrupt import Interrupted as Interrupted
from ._loop import loop as loop
from ._measure import Measurement as Measurement, measure as measure
from ._objective import Objective as Objective
from ._rewrite import with_config as with_config
from ._runner import InProcessRunner as InProcessRunner, Outcome as Outcome, Runner as Runner
from ._runner import TrialFailed as TrialFailed
from ._select import crossover_intervals as crossover_intervals, pareto_front as pareto_front
from ._sites import LoopSite as LoopSite, sites as sites

__version__ = "0.2.0"

_LAZY = {"tune": "study", "TuneResult": "study", "TrialRecord": "study", "Cache": "cache", "CacheEntry": "cache"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))
