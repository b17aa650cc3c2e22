"""Type stub of :mod:`autotune`: every public name, imported from the module that defines it.

``autotune/__init__.py`` loads most names on first use (PEP 562), which IDEs, type checkers and the
API docs cannot follow; this stub names them. ``tests/test_stub.py`` checks that it lists exactly
``autotune.__all__`` and that each name is the object ``getattr(autotune, name)`` gives.
"""

from autotune._errors import AutotuneError as AutotuneError
from autotune._errors import CacheError as CacheError
from autotune._errors import CacheImportError as CacheImportError
from autotune._errors import CacheSchemaError as CacheSchemaError
from autotune._errors import ConfigError as ConfigError
from autotune._errors import StudyError as StudyError
from autotune._errors import TraceError as TraceError
from autotune._interrupt import Interrupted as Interrupted
from autotune._options import TuneOptions as TuneOptions
from autotune.cache._cache import Cache as Cache
from autotune.cache._entry import CacheEntry as CacheEntry
from autotune.jit._decorator import Autotuned as Autotuned
from autotune.jit._decorator import autotuned as autotuned
from autotune.jit._lookup import Lookup as Lookup
from autotune.measuring._measurement import Measurement as Measurement
from autotune.measuring._outcome import Outcome as Outcome
from autotune.measuring._runner import InProcessRunner as InProcessRunner
from autotune.measuring._runner import Runner as Runner
from autotune.measuring._runner import TrialFailed as TrialFailed
from autotune.measuring._stages import measure as measure
from autotune.program._call import Call as Call
from autotune.program._config import Config as Config
from autotune.program._config import SiteChoice as SiteChoice
from autotune.program._loop import loop as loop
from autotune.program._rewrite import with_config as with_config
from autotune.program._sites import LoopSite as LoopSite
from autotune.program._sites import sites as sites
from autotune.program._xla import XlaChoice as XlaChoice
from autotune.select._front import crossover_intervals as crossover_intervals
from autotune.select._front import pareto_front as pareto_front
from autotune.select._objective import Objective as Objective
from autotune.study._result import TrialRecord as TrialRecord
from autotune.study._result import TuneResult as TuneResult
from autotune.study._tune import tune as tune

__version__: str
__all__: list[str]
