"""jax-autotune: tune loop structure (for / scan / fori / unroll) with compile time in the objective.

``import autotune`` loads JAX, NumPy, the decorator and ``at.loop``: at most 30 ms more than
``import jax`` (`scripts/overhead.py`). Everything else loads on first use of its name: the
tracing and rewriting machinery (``sites``, ``with_config``, ``measure``...; also imported on
a background thread when a first function is decorated), the tuner (Optuna: ``tune``,
``TuneResult``, ``TrialRecord``) and the cache (SQLAlchemy: ``Cache``; a decorated function
reads a SQLite cache without it). A worker process that only measures pays for neither.
"""

from ._config import Config as Config
from ._config import SiteChoice as SiteChoice
from ._decorator import Autotuned as Autotuned
from ._decorator import Lookup as Lookup
from ._decorator import autotuned as autotuned
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
from ._loop import loop as loop
from ._objective import Objective as Objective
from ._xla import XlaChoice as XlaChoice

__version__ = "0.2.0"

# name -> the module that defines it, imported on first use of the name.
_LAZY = {
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
    "Autotuned",
    "CacheError",
    "CacheImportError",
    "CacheSchemaError",
    "Config",
    "ConfigError",
    "Interrupted",
    "Lookup",
    "Objective",
    "SiteChoice",
    "StudyError",
    "TraceError",
    "XlaChoice",
    "autotuned",
    "loop",
    *_LAZY,
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
