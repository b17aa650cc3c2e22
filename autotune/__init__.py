"""jax-autotune: tune loop structure (for / scan / fori / unroll) with compile time in the objective.

``import autotune`` loads only the exceptions and the interrupt latch; every other name loads on
first use (PEP 562). ``at.autotuned`` or ``at.loop`` load JAX, NumPy and the decorator: at most
30 ms more than ``import jax`` (`scripts/overhead.py`). The tracing and rewriting machinery
(``sites``, ``with_config``, ``measure``...; also imported on a background thread when a first
function is decorated), the tuner (Optuna: ``tune``, ``TuneResult``, ``TrialRecord``) and the
cache (SQLAlchemy: ``Cache``; a decorated function reads a SQLite cache without it) load with
their names. The ``autotune`` command imports JAX only for a command that traces or measures
(``--help``, ``--version`` and a bad option need none), and a worker process that only measures
pays for neither the tuner nor the cache.
"""

from ._errors import (
    AutotuneError as AutotuneError,
)
from ._errors import (
    CacheError as CacheError,
)
from ._errors import (
    CacheImportError as CacheImportError,
)
from ._errors import (
    CacheSchemaError as CacheSchemaError,
)
from ._errors import (
    ConfigError as ConfigError,
)
from ._errors import (
    StudyError as StudyError,
)
from ._errors import (
    TraceError as TraceError,
)
from ._interrupt import Interrupted as Interrupted
from ._lazy import lazy_attributes

__version__ = "0.2.0"

# name -> the module that defines it, imported on first use of the name.
_LAZY = {
    "Config": "_config",
    "SiteChoice": "_config",
    "Autotuned": "_decorator",
    "Lookup": "_decorator",
    "autotuned": "_decorator",
    "loop": "_loop",
    "Objective": "_objective",
    "XlaChoice": "_xla",
    "tune": "study",
    "TuneResult": "study",
    "TrialRecord": "study",
    "Cache": "cache",
    "CacheEntry": "cache",
    "Measurement": "_measure",
    "measure": "_measure",
    "with_config": "_rewrite",
    "TuneOptions": "_options",
    "InProcessRunner": "_runner",
    "Outcome": "_outcome",
    "Runner": "_runner",
    "TrialFailed": "_runner",
    "crossover_intervals": "_select",
    "pareto_front": "_select",
    "LoopSite": "_sites",
    "sites": "_sites",
}


__all__ = [
    "AutotuneError",
    "CacheError",
    "CacheImportError",
    "CacheSchemaError",
    "ConfigError",
    "Interrupted",
    "StudyError",
    "TraceError",
    *_LAZY,
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
