"""`Sampling`: how a call's runtime is sampled, as one frozen value (no JAX needed to read or write one).

It is built once where a person says how to time (``at.measure``'s keywords, ``TuneOptions(timing=...)``,
a runner's ``timing`` argument: :meth:`Sampling.of`) and handed whole to whatever samples a runtime:
the runners, the worker process (as JSON, :meth:`Sampling.to_dict`) and :func:`autotune.measuring._timing.time_calls`,
which says what each field means. The timing modes' names live here too (:data:`TIMING_MODES`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune._errors import StudyError

TIMING_MODES = ("steady", "blocking", "device")
"""How a call's runtime is timed (:mod:`autotune.measuring._timing`): calls back to back (the default), each call
waited for on its own, or the device's own time from the profiler."""


def timing_mode_error(value: Any) -> str:
    """The one sentence for a timing mode that is none of :data:`TIMING_MODES`."""
    return (
        f"{value!r} is not a timing mode: use 'steady' (calls dispatched back to back, the default), "
        "'blocking' (each call waited for on its own) or 'device' (the device's own time from the profiler)."
    )


@dataclass(frozen=True)
class Sampling:
    """How a call's runtime is sampled (:func:`autotune.measuring._timing.time_calls`).

    Attributes:
        mode: the timing mode, one of :data:`TIMING_MODES` (``"steady"``: calls dispatched back to
            back, the default; ``"blocking"``: each call waited for on its own; ``"device"``: the
            device's own time from JAX's profiler, the steady state where the platform gives none).
        warmup: calls (each waited for) before anything is timed.
        min_reps, max_reps: bounds on the number of samples.
        target_s: about how long the samples take in all, seconds.
        stop_above_s: stop after ``min_reps`` samples once every sample so far is slower than this
            many seconds a call (the search sets it on a trial that cannot win above it: a short
            estimate is enough to say so); None samples for ``target_s``.

    Example::

        >>> Sampling.of({"target_s": 0.01, "mode": "blocking"})
        Sampling(mode='blocking', warmup=2, min_reps=5, max_reps=2000, target_s=0.01)
        >>> Sampling(target_s=0.01).to_dict()
        {'target_s': 0.01}
    """

    mode: str = "steady"
    warmup: int = 2
    min_reps: int = 5
    max_reps: int = 2000
    target_s: float = 0.5
    stop_above_s: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in TIMING_MODES:
            raise StudyError(timing_mode_error(self.mode))

    @classmethod
    def of(cls, value: Sampling | Mapping[str, Any] | str | None) -> Sampling:
        """The sampling ``value`` says: a :class:`Sampling` as it is, a mode alone, a mapping of
        its fields by name (names that are none of them are ignored), None for the defaults. A
        value of another kind is a :class:`TypeError` (``TuneOptions`` says it in its own words)."""
        if isinstance(value, Sampling):
            return value
        if value is None:
            return cls()
        if isinstance(value, str):
            return cls(mode=value)
        if isinstance(value, Mapping):
            return cls(**{name: value[name] for name in NAMES if name in value})
        raise TypeError(f"a sampling is a Sampling, a mapping of {list(NAMES)}, a timing mode or None, not {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """The fields that differ from the defaults, by name (JSON; :meth:`of` reads it back)."""
        return {name: getattr(self, name) for name in sorted(NAMES) if getattr(self, name) != getattr(DEFAULT, name)}

    def replace(self, **changes: Any) -> Sampling:
        return dataclasses.replace(self, **changes)


NAMES = tuple(f.name for f in dataclasses.fields(Sampling))
"""The fields of :class:`Sampling`: the names a ``timing`` mapping is read by."""

DEFAULT = Sampling()
