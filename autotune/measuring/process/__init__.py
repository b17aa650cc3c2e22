"""The worker process, from the parent's side: configs measured in another process, with a time
limit, a memory cap and crash containment (the child's program is :mod:`autotune.worker`).

:class:`WorkerRunner` (``_worker_runner``) is the runner: ``_slot`` starts and feeds a worker,
``_channel`` owns one process, ``_follow`` follows one trial's events and deadlines, ``_policy``
keeps compile times honest per platform, ``_export``/``_exported`` are export mode, ``_builders``
the builder processes that compile ahead, ``_load_probe`` a cached executable's load, measured in
fresh processes. ``_protocol`` (message names, :class:`Location`), ``_codec`` (values as JSON,
never pickle) and ``_shardings`` (where arguments live) are the messages both sides speak: the
child imports them from here, and nothing here imports the child.
"""

from autotune._lazy import lazy_attributes

# the names a user of the worker passes or reads
_LAZY = {
    "WorkerRunner": "_worker_runner",
    "WorkerOptions": "_worker_runner",
    "Location": "_protocol",
    "CompilePolicy": "_policy",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
