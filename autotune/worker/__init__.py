"""The worker process's own program: ``python -m autotune.worker`` (``_child``) measures configs
for a parent's :class:`~autotune.measuring.WorkerRunner`; ``_load_child`` compiles one program in a
fresh process with the persistent compilation cache on; ``_build_child`` is a builder (compiles
for the worker's device without opening it). The parent's side lives in :mod:`autotune.measuring`;
this package imports nothing at import time, so ``python -m`` pays only for what it runs.
"""
