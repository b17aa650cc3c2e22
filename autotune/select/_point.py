"""`Point`: one measured config as the selection rule sees it, the value every layer passes on.

The study makes points (a trial's figures, a confirmation's rounds), ``autotune.select`` decides on
them, the cache and the report store and show them. JSON appears only at the boundaries
(an Optuna trial's attributes, a cache entry, ``--json``): :meth:`Point.to_json` and
:meth:`Point.from_json`, which also reads the keys older versions wrote (``compile_s``,
``run_s`` for what is now ``compile_cost_s``, ``run_cost_s``; ``processes`` for what is now
``worker_processes``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autotune.measuring._measurement import Measurement
from autotune.program._config import Config

LEGACY_KEYS = {"compile_s": "compile_cost_s", "run_s": "run_cost_s", "processes": "worker_processes"}
"""Point keys older versions stored (cache entries, ``--json``), and what they are called now."""


def _seconds(name: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"A point's {name}={value!r} is not a number; give seconds >= 0.") from None
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"A point's {name}={value!r} must be a finite number of seconds >= 0.")
    return x


def _round(r: Any) -> tuple[float, float]:
    try:
        c, s = r
    except (TypeError, ValueError):
        raise ValueError(f"A point's round {r!r} is not a [compile_cost_s, run_cost_s] pair.") from None
    return _seconds("round compile_cost_s", c), _seconds("round run_cost_s", s)


@dataclass(frozen=True)
class Point:
    """A config's figures as the objective charges them.

    Attributes:
        config: the config measured.
        compile_cost_s: the one-off seconds the objective charges: trace + lower + compile in
            process CPU seconds (:attr:`Measurement.compile_cost_s`), the median over ``rounds``.
        run_cost_s: the per-call seconds it charges (:attr:`Measurement.run_cost_s`), the median.
        rounds: ``((compile_cost_s, run_cost_s), ...)`` per round of a confirmation, paired by
            index with the default's rounds (empty: a single measurement, compared on cost alone).
        confirmed: the figures come from a confirmation (side by side with the default).
        equivalent: other configs that lowered to the same program (one contender).
        worker_processes: how many worker processes the rounds were taken in (2: a challenger that beat
            the default, measured again).
        compiles: how many compiles confirmation took of it.
        program: the lowered program's hash, when known.
        measurement: the median :class:`Measurement` behind the figures, when known.
        load_cost_s: what a later process pays with JAX's persistent compilation cache on (trace +
            lower + the cached load, CPU seconds; :meth:`Objective.line`'s ``R``): measured in a fresh
            process where ``load_measured``, else estimated as trace + lower
            (:attr:`Measurement.load_charged_s`; taken from ``measurement`` when not given);
            None when unknown (an older entry): then a later process is charged the compile again.
        load_measured: ``load_cost_s`` was measured (a real load from a cache), not estimated.
        slowdown: on the default's point of a study tuned for tier-up, the measured slowdown ``s``
            of its calls while a compile runs beside them (`autotune.study._slowdown`; the tiered
            cost's ``s``); None when not measured (then ``DEFAULT_SLOWDOWN`` is charged).
        compile_slowdown: on the same point, how many times longer a compile took beside its calls
            than alone (the tiered cost's ``c``, measured with ``s``); None when not measured
            (then ``DEFAULT_COMPILE_SLOWDOWN`` is charged).
        memory_bytes: the config's device memory (:func:`autotune.measuring._measurement.device_memory`;
            taken from ``measurement`` when not given); None when unknown (an older entry, a backend
            without a memory analysis). A memory budget (``Objective.max_memory``) reads it.

    Example::

        >>> p = Point(Config({"l": {"repr": "for"}}), compile_cost_s=2.0, run_cost_s=0.01)
        >>> Point.from_json(p.to_json()) == p
        True
    """

    config: Config
    compile_cost_s: float
    run_cost_s: float
    rounds: tuple[tuple[float, float], ...] = ()
    confirmed: bool = False
    equivalent: tuple[Config, ...] = ()
    worker_processes: int = 1
    compiles: int = 0
    program: str | None = None
    measurement: Measurement | None = field(default=None, compare=False, repr=False)
    load_cost_s: float | None = None
    load_measured: bool = False
    slowdown: float | None = None
    compile_slowdown: float | None = None
    memory_bytes: int | None = None

    def __post_init__(self):
        if not isinstance(self.config, Config):
            raise TypeError(f"Point.config must be a Config, got {type(self.config).__name__}; use Point.from_json.")
        object.__setattr__(self, "compile_cost_s", _seconds("compile_cost_s", self.compile_cost_s))
        object.__setattr__(self, "run_cost_s", _seconds("run_cost_s", self.run_cost_s))
        object.__setattr__(self, "rounds", tuple(_round(r) for r in self.rounds))
        object.__setattr__(self, "equivalent", tuple(self.equivalent))
        if self.load_cost_s is None and self.measurement is not None:
            object.__setattr__(self, "load_cost_s", self.measurement.load_charged_s)
            object.__setattr__(self, "load_measured", self.measurement.load_cost_s is not None)
        if self.load_cost_s is not None:
            object.__setattr__(self, "load_cost_s", _seconds("load_cost_s", self.load_cost_s))
        if self.memory_bytes is None and self.measurement is not None:
            object.__setattr__(self, "memory_bytes", self.measurement.memory_bytes)
        if self.memory_bytes is not None:
            b = self.memory_bytes
            if isinstance(b, bool) or not isinstance(b, (int, float)) or b != int(b) or b < 0:
                raise ValueError(f"A point's memory_bytes={b!r} must be a whole number of bytes >= 0.")
            object.__setattr__(self, "memory_bytes", int(b))
        for name in ("slowdown", "compile_slowdown"):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                s = float(value)
            except (TypeError, ValueError):
                s = math.nan
            if not (math.isfinite(s) and s >= 1):
                raise ValueError(f"A point's {name}={value!r} must be a finite number >= 1.")
            object.__setattr__(self, name, s)

    def holds(self, config: Config) -> bool:
        """Whether ``config`` is this point's config or one that lowered to its program."""
        return config == self.config or config in self.equivalent

    def to_json(self) -> dict[str, Any]:
        """The point as JSON data (defaults left out; the measurement only where known)."""
        out: dict[str, Any] = {
            "config": self.config.to_dict(),
            "compile_cost_s": self.compile_cost_s,
            "run_cost_s": self.run_cost_s,
        }
        if self.rounds:
            out["rounds"] = [list(r) for r in self.rounds]
        if self.confirmed:
            out["confirmed"] = True
        if self.equivalent:
            out["equivalent"] = [c.to_dict() for c in self.equivalent]
        if self.worker_processes != 1:
            out["worker_processes"] = self.worker_processes
        if self.compiles:
            out["compiles"] = self.compiles
        if self.program is not None:
            out["program"] = self.program
        if self.load_cost_s is not None:
            out["load_cost_s"] = self.load_cost_s
        if self.load_measured:
            out["load_measured"] = True
        if self.slowdown is not None:
            out["slowdown"] = self.slowdown
        if self.compile_slowdown is not None:
            out["compile_slowdown"] = self.compile_slowdown
        if self.memory_bytes is not None:
            out["memory_bytes"] = self.memory_bytes
        if self.measurement is not None:
            out["measurement"] = self.measurement.to_dict()
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Point:
        """Read :meth:`to_json` output back, or a point in the older spelling (``compile_s``, ``run_s``,
        ``processes``)."""
        if isinstance(d, Point):
            return d
        if not isinstance(d, Mapping):
            raise ValueError(f"A point must be a JSON object, got {type(d).__name__}.")
        d = {LEGACY_KEYS.get(k, k): v for k, v in d.items()}
        for k in ("config", "compile_cost_s", "run_cost_s"):
            if k not in d:
                raise ValueError(f"A point has no {k!r}; each needs 'config', 'compile_cost_s' and 'run_cost_s'.")
        m = d.get("measurement")
        return cls(
            config=Config.from_dict(d["config"]),
            compile_cost_s=d["compile_cost_s"],
            run_cost_s=d["run_cost_s"],
            rounds=tuple(d.get("rounds") or ()),
            confirmed=bool(d.get("confirmed", False)),
            equivalent=tuple(Config.from_dict(c) for c in d.get("equivalent") or ()),
            worker_processes=int(d.get("worker_processes", 1)),
            compiles=int(d.get("compiles", 0)),
            program=d.get("program"),
            measurement=None if not m else Measurement.from_dict(m),
            load_cost_s=d.get("load_cost_s"),
            load_measured=bool(d.get("load_measured", False)),
            slowdown=d.get("slowdown"),
            compile_slowdown=d.get("compile_slowdown"),
            memory_bytes=d.get("memory_bytes"),
        )

    def replace(self, **changes: Any) -> Point:
        return dataclasses.replace(self, **changes)


def point_of(points: Sequence[Point], config: Config) -> Point | None:
    """The point of ``config``, or of its program (a point listing ``config`` in ``equivalent``
    lowered to the same program), or None."""
    return next((p for p in points if p.config == config), None) or next((p for p in points if p.holds(config)), None)


def as_points(points: Sequence[Point | Mapping[str, Any]]) -> list[Point]:
    """Points from a public caller: :class:`Point` values, or dicts (``Point.from_json``) read once."""
    return [Point.from_json(p) for p in points]
