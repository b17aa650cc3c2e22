"""Tuning studies: propose, measure, guard, confirm, and name the winner.

``tune`` orchestrates (``_finish`` ends a run: the winner and the result); trial outcomes
(:class:`Outcome`, :func:`tally`) are the study's, defined in ``autotune.measuring._outcome`` below the
runner that reports them; ``_optuna`` is the only module that imports Optuna; ``_propose``
picks configs no trial holds; ``_predict`` skips configs predicted over the compile
budget; ``_guard`` rejects configs that change results; ``_confirm`` re-times the
contenders side by side; the winner comes from :mod:`autotune.select`.
"""

from autotune._options import TuneOptions as TuneOptions
from autotune.measuring._outcome import Outcome as Outcome
from autotune.measuring._outcome import tally as tally
from autotune.measuring._runner import InProcessRunner as InProcessRunner
from autotune.measuring._runner import Runner as Runner
from autotune.measuring._runner import TrialFailed as TrialFailed
from autotune.study._guard import compare_outputs as compare_outputs
from autotune.study._optuna import load as load_study
from autotune.study._optuna import summaries as study_summaries
from autotune.study._progress import Progress as Progress
from autotune.study._result import TrialRecord as TrialRecord
from autotune.study._result import TuneResult as TuneResult
from autotune.study._tune import SAMPLERS as SAMPLERS
from autotune.study._tune import SEARCHES as SEARCHES
from autotune.study._tune import tune as tune

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
