"""Trials in a worker process, so a trial that hangs, crashes or runs out of memory costs one
trial and not the study.

:class:`WorkerRunner` (the parent side, in ``_process``; ``_slot`` drives its worker process)
implements the Runner contract of ``autotune._runner``; ``python -m autotune.worker`` is the
worker (``_child``), which this package never imports. ``_codec`` carries arrays as JSON
(no pickle), ``_protocol`` names the messages, ``_channel`` owns one worker process,
``_trial`` follows a trial's events and deadlines, ``_export`` is export mode's parent side,
``_policy`` keeps compile times honest per platform (a fresh worker per trial on GPU).
"""

from .._runner import TrialFailed as TrialFailed
from ._codec import NotPortable as NotPortable
from ._codec import decode_array as decode_array
from ._codec import encode_array as encode_array
from ._policy import CompilePolicy as CompilePolicy
from ._policy import compile_policy as compile_policy
from ._process import WorkerRunner as WorkerRunner
from ._protocol import PROTOCOL as PROTOCOL
from ._protocol import Location as Location
