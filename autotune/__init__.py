"""jax-autotune: tune loop structure (for / scan / fori / unroll) with compile time in the objective.

``import autotune`` loads only the exceptions and the interrupt latch; every other name loads on
first use (PEP 562). ``at.autotuned`` or ``at.loop`` load JAX, NumPy and the decorator: little
more than ``import jax`` (the figures: ``docs/results/overhead.md``). The tracing and rewriting machinery
(``sites``, ``with_config``, ``measure``...; also imported on a background thread when a first
function is decorated), the tuner (Optuna: ``tune``, ``TuneResult``, ``TrialRecord``) and the
cache (SQLAlchemy: ``Cache``; a decorated function reads a SQLite cache without it) load with
their names. The ``autotune`` command imports JAX only for a command that traces or measures
(``--help``, ``--version`` and a bad option need none), and a worker process that only measures
pays for neither the tuner nor the cache.
"""

from autotune._errors import AutotuneError as AutotuneError
from autotune._errors import CacheError as CacheError
from autotune._errors import CacheImportError as CacheImportError
from autotune._errors import CacheSchemaError as CacheSchemaError
from autotune._errors import ConfigError as ConfigError
from autotune._errors import StudyError as StudyError
from autotune._errors import TraceError as TraceError
from autotune._interrupt import Interrupted as Interrupted
from autotune._lazy import lazy_attributes

__version__ = "0.2.0"

# name -> the module that defines it, imported on first use of the name.
_LAZY = {
    "Config": "program._config",
    "SiteChoice": "program._config",
    "Autotuned": "jit._decorator",
    "Lookup": "jit._decorator",
    "autotuned": "jit._decorator",
    "loop": "program._loop",
    "Objective": "select._objective",
    "XlaChoice": "program._xla",
    "tune": "study",
    "TuneResult": "study",
    "TrialRecord": "study",
    "Cache": "cache",
    "CacheEntry": "cache",
    "Measurement": "measuring._stages",
    "measure": "measuring._stages",
    "with_config": "program._rewrite",
    "TuneOptions": "_options",
    "InProcessRunner": "measuring._runner",
    "Call": "program._call",
    "Outcome": "measuring._outcome",
    "Runner": "measuring._runner",
    "TrialFailed": "measuring._runner",
    "crossover_intervals": "select",
    "pareto_front": "select",
    "LoopSite": "program._sites",
    "sites": "program._sites",
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
