"""Where a tuning run's wall-clock seconds go: process starts, trace + lower, compile, load,
timing, and the rest, per part of the run (setting up, the search, the confirmation...).

A run opens one :class:`Wall` (``with Wall() as wall:``) and names its parts
(``with part("search"):``); whatever measures inside it charges the seconds it spent to a
stage with :func:`charge`, which finds the open wall of this context (a no-op outside one), so the
measuring code needs no handle passed down to it. The runners charge each measurement's own
figures: the parent's trace and lower, the sampling's seconds (``Measurement.sampled_s``), an
executable's load (``Measurement.loaded_s``), the waits for a process to start, and the rest of the
wait as compile. What no stage claims is ``"other"`` (the study's bookkeeping, the proposals,
Python). :meth:`Wall.report` gives the :class:`WallReport`.

Example::

    >>> with Wall() as wall:
    ...     with wall.part("search"):
    ...         charge("compile", 0.25)
    >>> report = wall.report()
    >>> report.by_part["search"]["compile"]
    0.25
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

STAGES = ("process starts", "trace+lower", "compile", "load", "timing")
"""The stages a measuring step charges; the wall no stage claims is ``"other"``."""

OTHER = "other"

_OPEN: contextvars.ContextVar[Wall | None] = contextvars.ContextVar("autotune_wall", default=None)


def charge(stage: str, seconds: float | None) -> None:
    """Add ``seconds`` of wall to ``stage`` of the part under way in the open wall (none: nothing)."""
    wall = _OPEN.get()
    if wall is not None and seconds:
        wall.add(stage, seconds)


def charged(stage: str) -> float:
    """The seconds charged to ``stage`` so far in the open wall (0 without one): a caller that
    splits a wait subtracts what was charged while it waited."""
    wall = _OPEN.get()
    return 0.0 if wall is None else wall.total(stage)


def account(m: Any, waited_s: float, compiled: bool) -> None:
    """Charge a measurement's wall (``waited_s``, what the caller waited for it, less any process
    start charged meanwhile) to its stages: its own trace and lower, its sampling, its load; the
    rest of the wait is its compile when it was measured (``compiled``), else unclaimed (a re-time)."""
    trace_lower = (m.trace_s + m.lower_s) if compiled else 0.0
    sampled, loaded = m.sampled_s or 0.0, m.loaded_s or 0.0
    charge("trace+lower", trace_lower)
    charge("timing", sampled)
    charge("load", loaded)
    if compiled:
        charge("compile", max(0.0, waited_s - trace_lower - sampled - loaded))


@contextlib.contextmanager
def part(name: str) -> Iterator[None]:
    """Charge the block to the part ``name`` of the open wall (none open: just the block)."""
    wall = _OPEN.get()
    if wall is None:
        yield
        return
    with wall.part(name):
        yield


@contextlib.contextmanager
def timed(stage: str) -> Iterator[None]:
    """Charge the wall of the block to ``stage``."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        charge(stage, time.perf_counter() - t0)


@dataclass(frozen=True)
class WallReport:
    """A run's wall seconds: ``total_s``; ``parts`` (each part's own wall, in the order they
    started); ``by_part[part][stage]`` (the stages of :data:`STAGES` and ``"other"``, summing to the
    part's wall). ``by_stage`` sums the parts."""

    total_s: float
    parts: dict[str, float] = field(default_factory=dict)
    by_part: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def by_stage(self) -> dict[str, float]:
        """Seconds per stage over the whole run (``"other"`` included)."""
        out = {s: 0.0 for s in (*STAGES, OTHER)}
        for stages in self.by_part.values():
            for s, v in stages.items():
                out[s] += v
        return out

    def to_json(self) -> dict[str, Any]:
        """``{"total_s", "parts", "by_part", "by_stage"}`` (seconds, rounded to the millisecond).
        ``by_stage`` sums the rounded ``by_part`` figures, so the JSON adds up as shown and reads
        back to the same JSON (:meth:`from_json`)."""

        def r(d: dict[str, float]) -> dict[str, float]:
            return {k: round(v, 3) for k, v in d.items()}

        by_part = {p: r(s) for p, s in self.by_part.items()}
        shown = WallReport(self.total_s, self.parts, by_part)
        total = round(self.total_s, 3)
        return {"total_s": total, "parts": r(self.parts), "by_part": by_part, "by_stage": r(shown.by_stage)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WallReport:
        return cls(float(d["total_s"]), dict(d.get("parts") or {}), {p: dict(s) for p, s in d["by_part"].items()})


class Wall:
    """One run's wall, open while the run lasts (see the module docstring)."""

    def __init__(self, first_part: str = "setup"):
        self._started = time.perf_counter()
        self._part, self._part_started = first_part, self._started
        self._parts: dict[str, float] = {}
        self._stages: dict[str, dict[str, float]] = {}
        self._token: contextvars.Token | None = None
        self._closed_at: float | None = None

    def __enter__(self) -> Wall:
        self._token = _OPEN.set(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._closed_at = self._switch(None)
        if self._token is not None:
            _OPEN.reset(self._token)

    def add(self, stage: str, seconds: float) -> None:
        stages = self._stages.setdefault(self._part, {})
        stages[stage] = stages.get(stage, 0.0) + float(seconds)

    def total(self, stage: str) -> float:
        return sum(stages.get(stage, 0.0) for stages in self._stages.values())

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Charge what happens in the block to the part ``name`` (the part before resumes after)."""
        before = self._part
        self._switch(name)
        try:
            yield
        finally:
            self._switch(before)

    def _switch(self, name: str | None) -> float:
        now = time.perf_counter()
        self._parts[self._part] = self._parts.get(self._part, 0.0) + (now - self._part_started)
        if name is not None:
            self._part, self._part_started = name, now
        return now

    def report(self) -> WallReport:
        """What the run spent so far, each part's stages and the rest of its wall as ``"other"``."""
        now = self._closed_at or time.perf_counter()
        parts = dict(self._parts)
        if self._closed_at is None:
            parts[self._part] = parts.get(self._part, 0.0) + (now - self._part_started)
        by_part: dict[str, dict[str, float]] = {}
        for part, wall_s in parts.items():
            stages = {s: self._stages.get(part, {}).get(s, 0.0) for s in STAGES}
            stages[OTHER] = max(0.0, wall_s - sum(stages.values()))
            by_part[part] = stages
        return WallReport(now - self._started, parts, by_part)
