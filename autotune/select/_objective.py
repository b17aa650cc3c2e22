"""`Objective`: what a config costs a user whose processes each call the compiled function N times."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from autotune._errors import ConfigError
from autotune.select import _budget

_FIGURES = ("expected_calls", "compile_weight", "runtime_weight")


@dataclass(frozen=True)
class Objective:
    """``cost = cw·(C + (P−1)·R) + rw·P·N·run``, summed over the ``P`` processes that run the function.

    ``C`` is trace + lower + compile and ``run`` the per-call seconds (:attr:`Measurement.compile_cost_s`,
    process CPU seconds, and :attr:`Measurement.run_cost_s`, the 10th percentile of the timed calls:
    load from other processes stretches wall times and medians); ``N`` is ``expected_calls``, the calls
    of each process. Every process after the first pays ``R``: the compile again (``R = C``) without
    JAX's persistent compilation cache; with it, only trace + lower + the load of the cached executable
    (``R = load_cost_s``, measured in a fresh process, see :attr:`Point.load_cost_s`). With ``P = 1``
    this is ``cw·C + rw·N·run``.

    Arguments:
        expected_calls: how many times each process runs the compiled function.
        compile_weight: weight of the one-off seconds (trace, lower, compile or load).
        runtime_weight: weight of the per-call seconds.
        processes: how many processes run the function (each compiles it or loads it once).
        compilation_cache: JAX's persistent compilation cache is on where it runs, so processes
            after the first load the executable instead of compiling it.
        tier_up: the function runs with ``@at.autotuned(tier_up=True)``: a config whose compile
            qualifies (`autotune.select._tiered.qualifies`) is charged what tier-up costs: the
            default serving while it compiles beside it where that is cheaper than compiling it
            up front, else the up-front compile (`autotune.select._tiered.charged_at`). The
            winner rule (`autotune.select._rule`) reads it.
        max_memory: the memory budget: a config whose device memory is over it never wins
            (`autotune.select._budget.feasible`); bytes (int), a fraction of the device's memory
            (float in (0, 1], turned into bytes by :meth:`on_device` where the device is known), or
            None (no budget). Any form `autotune.select._budget.parse` reads is accepted.

    Example::

        >>> Objective(expected_calls=100).cost_of(compile_cost_s=2.0, run_cost_s=0.01)
        3.0
        >>> Objective(100, processes=8).cost_of(2.0, 0.01), Objective(100, processes=8, compilation_cache=True).cost_of(
        ...     2.0, 0.01, load_cost_s=0.5)
        (24.0, 13.5)
    """

    expected_calls: float = 1000
    compile_weight: float = 1.0
    runtime_weight: float = 1.0
    processes: int = 1
    compilation_cache: bool = False
    tier_up: bool = False
    max_memory: int | float | None = None

    def __post_init__(self):
        object.__setattr__(self, "max_memory", _budget.parse(self.max_memory))
        for name in _FIGURES:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"Objective {name}={value!r} must be a finite number >= 0.")
        p = self.processes
        if isinstance(p, bool) or not isinstance(p, (int, float)) or p != int(p) or p < 1:
            raise ConfigError(f"Objective processes={p!r} must be a whole number >= 1 (how many processes run it).")
        object.__setattr__(self, "processes", int(p))
        if not isinstance(self.compilation_cache, bool):
            raise ConfigError(
                f"Objective compilation_cache={self.compilation_cache!r} must be True or False "
                "(whether JAX's persistent compilation cache is on)."
            )
        if not isinstance(self.tier_up, bool):
            raise ConfigError(
                f"Objective tier_up={self.tier_up!r} must be True or False "
                "(whether the function runs with @at.autotuned(tier_up=True))."
            )

    def line(
        self, compile_cost_s: float, run_cost_s: float, load_cost_s: float | None = None
    ) -> tuple[Fraction, Fraction]:
        """THE cost formula, as a line in the call count N, exactly:
        ``(cw·(C + (P−1)·R), rw·P·run)`` with ``C = compile_cost_s``, ``run = run_cost_s`` and
        ``R = load_cost_s`` when the compilation cache is on and the load is known, else ``R = C``;
        so ``cost(N) = intercept + slope·N`` (the winner rule compares these in rational arithmetic).

        Example::

            >>> [float(x) for x in Objective(processes=3, compilation_cache=True).line(2.0, 0.5, load_cost_s=0.25)]
            [2.5, 1.5]
        """
        c = Fraction(compile_cost_s)
        again = c if load_cost_s is None or not self.compilation_cache else Fraction(load_cost_s)
        p = self.processes
        return Fraction(self.compile_weight) * (c + (p - 1) * again), Fraction(self.runtime_weight) * Fraction(
            run_cost_s
        ) * p

    def cost_of(self, compile_cost_s: float, run_cost_s: float, load_cost_s: float | None = None) -> float:
        """The cost of one-off seconds ``compile_cost_s`` (a later process's ``load_cost_s``) and
        per-call seconds ``run_cost_s`` (:meth:`line` at N)."""
        a, b = self.line(compile_cost_s, run_cost_s, load_cost_s)
        return float(a + b * Fraction(self.expected_calls))

    def cost(self, measurement) -> float:
        """The cost of a :class:`Measurement` (its ``compile_cost_s``, ``run_cost_s`` and ``load_charged_s``)."""
        return self.cost_of(measurement.compile_cost_s, measurement.run_cost_s, measurement.load_charged_s)

    def run_ceiling(self, cost_s: float) -> float | None:
        """The seconds a call can take at most for a config to cost under ``cost_s``, its compile counted
        as nothing (so a config whose calls are slower costs more, whatever it compiles in); None where
        the calls cost nothing (no runtime weight, no calls)."""
        per_run = float(self.line(0.0, 1.0)[1]) * self.expected_calls
        return cost_s / per_run if per_run > 0 else None

    def line_figures(self) -> dict[str, Any]:
        """Every figure but the call count, as :func:`autotune.select.crossover_intervals` takes them
        (the crossovers are over N)."""
        keys = ("compile_weight", "runtime_weight", "processes", "compilation_cache", "tier_up", "max_memory")
        return {k: getattr(self, k) for k in keys}

    def on_device(self, bytes_limit: int | None) -> Objective:
        """This objective with its budget in bytes on a device whose memory is ``bytes_limit``
        (None: the device reports none; a fraction there is a ``ConfigError``)."""
        return dataclasses.replace(self, max_memory=_budget.resolve(self.max_memory, bytes_limit))

    @property
    def budget_bytes(self) -> int | None:
        """The budget in bytes (None: no budget, or a fraction not yet put :meth:`on_device`)."""
        return self.max_memory if isinstance(self.max_memory, int) else None

    @property
    def shared(self) -> bool:
        """Whether later processes load the executable (several processes, the cache on)."""
        return self.processes > 1 and self.compilation_cache

    @classmethod
    def from_dict(cls, d: Any) -> Objective:
        """The objective of a stored ``to_dict()`` (a missing figure takes its default); an
        ``Objective`` is returned as it is."""
        if isinstance(d, Objective):
            return d
        given: dict[str, Any] = {k: float(d[k]) for k in _FIGURES if k in d}
        if "processes" in d:
            given["processes"] = int(d["processes"])
        if "compilation_cache" in d:
            given["compilation_cache"] = bool(d["compilation_cache"])
        if "tier_up" in d:
            given["tier_up"] = bool(d["tier_up"])
        if d.get("max_memory") is not None:
            given["max_memory"] = d["max_memory"]
        return cls(**given)

    def overridden(
        self,
        expected_calls: float | None = None,
        compile_weight: float | None = None,
        runtime_weight: float | None = None,
        *,
        processes: int | None = None,
        compilation_cache: bool | None = None,
        tier_up: bool | None = None,
        max_memory: int | float | str | None = None,
    ) -> Objective:
        """This objective with the figures given replaced (None keeps one): the one merge of a
        stored or recorded objective with the options of a command.

        Example::

            >>> Objective(expected_calls=10).overridden(compile_weight=0.5).to_dict()
            {'expected_calls': 10, 'compile_weight': 0.5, 'runtime_weight': 1.0}
            >>> Objective(expected_calls=10).overridden(processes=8, compilation_cache=True).to_dict()["processes"]
            8
        """
        given = dict(expected_calls=expected_calls, compile_weight=compile_weight, runtime_weight=runtime_weight)
        changes: dict[str, Any] = {k: float(v) for k, v in given.items() if v is not None}
        if processes is not None:
            changes["processes"] = processes
        if compilation_cache is not None:
            changes["compilation_cache"] = compilation_cache
        if tier_up is not None:
            changes["tier_up"] = tier_up
        if max_memory is not None:
            changes["max_memory"] = max_memory
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON data; ``processes``, ``compilation_cache`` and ``tier_up`` only where
        they are not the defaults (1, False, False) and ``max_memory`` where there is a budget, so an
        objective of one process keeps its earlier JSON."""
        out: dict[str, Any] = {
            "expected_calls": self.expected_calls,
            "compile_weight": self.compile_weight,
            "runtime_weight": self.runtime_weight,
        }
        if self.processes != 1:
            out["processes"] = self.processes
        if self.compilation_cache:
            out["compilation_cache"] = True
        if self.tier_up:
            out["tier_up"] = True
        if self.max_memory is not None:
            out["max_memory"] = self.max_memory
        return out

    def describe(self) -> str:
        """The processes part for people, empty for one process: ``"; 8 processes, compilation cache on"``
        (and ``"; tier-up"`` when the tiered cost is charged)."""
        tier = "; tier-up" if self.tier_up else ""
        if self.processes == 1:
            return tier
        return f"; {self.processes} processes, compilation cache {'on' if self.compilation_cache else 'off'}" + tier


@dataclass(frozen=True)
class Override:
    """The objective figures a command says, None where it says nothing, as one value: laid over
    a stored or recorded objective whole by :meth:`over` (``autotune tune``'s and ``tune
    --recorded``'s ``--expected-calls``, weights, ``--processes`` and ``--compilation-cache``).

    Example::

        >>> Override(expected_calls=50).over(Objective(expected_calls=10, compile_weight=0.5)).to_dict()
        {'expected_calls': 50.0, 'compile_weight': 0.5, 'runtime_weight': 1.0}
    """

    expected_calls: float | None = None
    compile_weight: float | None = None
    runtime_weight: float | None = None
    processes: int | None = None
    compilation_cache: bool | None = None
    max_memory: int | float | str | None = None

    def over(self, goal: Objective) -> Objective:
        """``goal`` with every figure said here replaced."""
        return goal.overridden(**self.keywords())

    def keywords(self) -> dict[str, Any]:
        """The six figures as keywords (None: not said), as ``Objective.overridden`` and the
        decorator's ``with_options`` take them."""
        return dataclasses.asdict(self)


def compilation_cache_on(said: bool | None = None) -> bool:
    """Whether later processes load the executable from JAX's persistent compilation cache:
    ``said`` when given (``compilation_cache=True``/``False``, ``--compilation-cache on|off``), else
    detected: the cache is configured in this process (``jax_compilation_cache_dir`` or
    ``JAX_COMPILATION_CACHE_DIR``, and ``jax_enable_compilation_cache`` not off).

    Example::

        >>> compilation_cache_on(True), compilation_cache_on(False)
        (True, False)
    """
    if said is not None:
        if not isinstance(said, bool):
            raise ConfigError(f"compilation_cache={said!r}: pass True, False or None (None: detect it).")
        return said
    from autotune.program import _compat  # deferred: reading JAX's configuration needs JAX, the objective does not

    return _compat.compilation_cache_dir() is not None


DEFAULT = Objective()
"""The objective of a tune without one: 1000 calls, compile and run weighted 1, one process, no
compilation cache (the one place these numbers live)."""
