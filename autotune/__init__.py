"""jax-autotune: tune loop structure (for / scan / fori / unroll) with compile time in the objective."""

from ._config import Config as Config, SiteChoice as SiteChoice
from ._errors import (
    AutotuneError as AutotuneError,
    CacheError as CacheError,
    CacheImportError as CacheImportError,
    CacheSchemaError as CacheSchemaError,
    ConfigError as ConfigError,
    StudyError as StudyError,
    TraceError as TraceError,
)
from ._decorator import Autotuned as Autotuned, Lookup as Lookup, autotuned as autotuned
from ._loop import loop as loop
from ._measure import Measurement as Measurement, measure as measure
from ._objective import Objective as Objective
from ._pareto import crossover_intervals as crossover_intervals, pareto_front as pareto_front
from ._rewrite import with_config as with_config
from ._sites import LoopSite as LoopSite, sites as sites
from ._study import TrialRecord as TrialRecord, TuneResult as TuneResult, tune as tune
from .cache import Cache as Cache, CacheEntry as CacheEntry

__version__ = "0.1.0"
