"""The measuring layer: what one config costs, measured honestly, in this process or a worker.

:class:`Measurement` (``_measurement``) is the value; ``_stages`` is the one timing
implementation (trace, lower, compile, run); :class:`Sampling` (``_sampling``) says how a call's
runtime is sampled and ``_timing`` samples it, ``_beside`` while a compile runs beside the calls;
a :class:`Runner` (``_runner``: the contract, the in-process runner; ``_outcome``: what a trial
came to) measures configs; ``_host`` says which process owns the device. The runner that
measures in a worker process is :mod:`autotune.measuring.process`'s.
"""

from autotune._lazy import lazy_attributes

# The values other layers name; the runners are published as ``autotune.Runner``, ``at.InProcessRunner``...
_LAZY = {"Measurement": "_measurement", "Sampling": "_sampling"}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
