"""Tuning studies: propose, measure, guard, confirm, and name the winner.

``tune`` orchestrates (``_finish`` ends a run: the winner and the result); trial outcomes
(:class:`Outcome`, :func:`tally`) are the study's, defined in ``autotune._outcome`` below the
runner that reports them; ``_optuna`` is the only module that imports Optuna; ``_propose``
picks configs no trial holds; ``_predict`` skips configs predicted over the compile
budget; ``_guard`` rejects configs that change results; ``_confirm`` re-times the
contenders side by side; the winner comes from :mod:`autotune._select`.
"""

from .._options import TuneOptions as TuneOptions
from .._outcome import Outcome as Outcome
from .._outcome import tally as tally
from .._runner import InProcessRunner as InProcessRunner
from .._runner import Runner as Runner
from .._runner import TrialFailed as TrialFailed
from ._guard import compare_outputs as compare_outputs
from ._optuna import load as load_study
from ._optuna import summaries as study_summaries
from ._progress import Progress as Progress
from ._result import TrialRecord as TrialRecord
from ._result import TuneResult as TuneResult
from ._tune import SAMPLERS as SAMPLERS
from ._tune import SEARCHES as SEARCHES
from ._tune import tune as tune

__all__ = [
    "SAMPLERS",
    "SEARCHES",
    "InProcessRunner",
    "Outcome",
    "Progress",
    "Runner",
    "TrialFailed",
    "TrialRecord",
    "TuneOptions",
    "TuneResult",
    "compare_outputs",
    "load_study",
    "study_summaries",
    "tally",
    "tune",
]
