"""The measuring layer: what one config costs, measured honestly, in this process or a worker.

:class:`Measurement` (``_measurement``) is the value; ``_stages`` is the one timing
implementation (trace, lower, compile, run; ``_timing`` says how a call's runtime is sampled);
a :class:`Runner` (``_runner``: the contract, the in-process runner; ``_outcome``: what a trial
came to) measures configs. :class:`WorkerRunner` (``_worker_runner``) measures them in a worker
process (the program in :mod:`autotune.worker`): ``_slot`` drives it, ``_channel`` owns the
process, ``_follow`` follows one trial's events and deadlines, ``_protocol`` and ``_codec``
are the messages (JSON, never pickle), ``_shardings`` where arguments live, ``_policy`` what
keeps compile times honest per platform, ``_export``/``_exported`` export mode, ``_builders``
the builder processes that compile ahead, ``_load_probe`` a cached executable's load, measured
in fresh processes. ``_host`` says which process owns the device.
"""

from autotune._lazy import lazy_attributes

_LAZY = {
    "Measurement": "_measurement",
    "Runner": "_runner",
    "InProcessRunner": "_runner",
    "TrialFailed": "_runner",
    "Outcome": "_outcome",
    "WorkerRunner": "_worker_runner",
    "WorkerOptions": "_worker_runner",
    "NotPortable": "_codec",
    "encode_array": "_codec",
    "decode_array": "_codec",
    "CompilePolicy": "_policy",
    "compile_policy": "_policy",
    "PROTOCOL": "_protocol",
    "Location": "_protocol",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
