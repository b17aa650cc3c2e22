"""The record layer: tune a real program later, from what it was called with.

The decorator writes a program's call signatures as pending records (``AUTOTUNE_RECORD=1``,
:mod:`autotune.jit._record`); here ``_inputs`` rebuilds a recorded call's arguments, ``_replay``
tunes recorded signatures without a study file (``autotune tune --recorded``), ``_budget`` splits
a time budget across functions, and ``_studyfile`` loads a study file's ``examples()``.
"""
