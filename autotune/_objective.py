"""`Objective`: what a config costs a user who calls the compiled function N times."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._errors import ConfigError


@dataclass(frozen=True)
class Objective:
    """``cost = compile_weight * (trace + lower + compile) + runtime_weight * expected_calls * run``.

    The one-off seconds are the process CPU seconds of trace + lower + compile and the per-call
    seconds the 10th percentile of the timed calls (:attr:`Measurement.compile_cost_s`,
    :attr:`Measurement.run_cost_s`): load from other processes stretches wall times and medians.

    Arguments:
        expected_calls: how many times the compiled function runs per compile.
        compile_weight: weight of the one-off seconds (trace, lower, compile).
        runtime_weight: weight of the per-call seconds.

    Example::

        >>> Objective(expected_calls=100).cost_of(compile_s=2.0, run_s=0.01)
        3.0
    """

    expected_calls: float = 1000
    compile_weight: float = 1.0
    runtime_weight: float = 1.0

    def __post_init__(self):
        for name in ("expected_calls", "compile_weight", "runtime_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"Objective {name}={value!r} must be a finite number >= 0.")

    def cost_of(self, compile_s: float, run_s: float) -> float:
        return self.compile_weight * compile_s + self.runtime_weight * self.expected_calls * run_s

    def cost(self, measurement) -> float:
        """The cost of a :class:`Measurement` (its ``compile_cost_s`` and ``run_cost_s``)."""
        return self.cost_of(measurement.compile_cost_s, measurement.run_cost_s)

    def to_dict(self) -> dict[str, float]:
        return {
            "expected_calls": self.expected_calls,
            "compile_weight": self.compile_weight,
            "runtime_weight": self.runtime_weight,
        }
