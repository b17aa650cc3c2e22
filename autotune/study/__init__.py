"""Tuning studies: propose, measure, guard, confirm, and name the winner.

``tune`` orchestrates; ``_optuna`` is the only module that imports Optuna; ``_propose``
picks configs no trial holds; ``_predict`` skips configs predicted over the compile
budget; ``_guard`` rejects configs that change results; ``_confirm`` re-times the
contenders side by side; the winner comes from :mod:`autotune._select`.
"""

from .._runner import InProcessRunner as InProcessRunner
from .._runner import Outcome as Outcome
from .._runner import Runner as Runner
from .._runner import TrialFailed as TrialFailed
from ._guard import compare_outputs as compare_outputs
from ._result import TrialRecord as TrialRecord
from ._result import TuneResult as TuneResult
from ._tune import SAMPLERS as SAMPLERS
from ._tune import SEARCHES as SEARCHES
from ._tune import tune as tune
