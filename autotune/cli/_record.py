"""``autotune pending`` and ``autotune tune --recorded``: a stub until record-and-replay lands.

The real module (task D) replaces this file; the parser only needs the two names.
"""

from __future__ import annotations

import argparse

from .._errors import StudyError

STUB = True
"""Marks this placeholder; the real module has no such name."""


def cmd_pending(a: argparse.Namespace) -> int:
    raise StudyError("autotune pending is not built yet in this version; record-and-replay comes in a later one.")


def cmd_tune_recorded(a: argparse.Namespace) -> int:
    raise StudyError("autotune tune --recorded is not built yet in this version; tune a study file instead: "
                     "autotune tune studies/x.py.")
