"""`Objective`: what a config costs a user who calls the compiled function N times."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

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

    def line(self, compile_s: float, run_s: float) -> tuple[Fraction, Fraction]:
        """THE cost formula, as a line in the call count N, exactly: ``(cw * compile_s, rw * run_s)``,
        so ``cost(N) = intercept + slope * N`` (the winner rule compares these in rational arithmetic)."""
        return Fraction(self.compile_weight) * Fraction(compile_s), Fraction(self.runtime_weight) * Fraction(run_s)

    def cost_of(self, compile_s: float, run_s: float) -> float:
        """The cost of one-off seconds ``compile_s`` and per-call seconds ``run_s`` (:meth:`line` at N)."""
        a, b = self.line(compile_s, run_s)
        return float(a + b * Fraction(self.expected_calls))

    def cost(self, measurement) -> float:
        """The cost of a :class:`Measurement` (its ``compile_cost_s`` and ``run_cost_s``)."""
        return self.cost_of(measurement.compile_cost_s, measurement.run_cost_s)

    @classmethod
    def from_dict(cls, d: Any) -> Objective:
        """The objective of a stored ``to_dict()`` (a missing figure takes its default); an
        ``Objective`` is returned as it is."""
        if isinstance(d, Objective):
            return d
        return cls(**{k: float(d[k]) for k in ("expected_calls", "compile_weight", "runtime_weight") if k in d})

    def overridden(
        self,
        expected_calls: float | None = None,
        compile_weight: float | None = None,
        runtime_weight: float | None = None,
    ) -> Objective:
        """This objective with the figures given replaced (None keeps one): the one merge of a
        stored or recorded objective with the options of a command.

        Example::

            >>> Objective(expected_calls=10).overridden(compile_weight=0.5).to_dict()
            {'expected_calls': 10, 'compile_weight': 0.5, 'runtime_weight': 1.0}
        """
        given = dict(expected_calls=expected_calls, compile_weight=compile_weight, runtime_weight=runtime_weight)
        return dataclasses.replace(self, **{k: float(v) for k, v in given.items() if v is not None})

    def to_dict(self) -> dict[str, float]:
        return {
            "expected_calls": self.expected_calls,
            "compile_weight": self.compile_weight,
            "runtime_weight": self.runtime_weight,
        }


DEFAULT = Objective()
"""The objective of a tune without one: 1000 calls, compile and run weighted 1 (the one place these numbers live)."""
