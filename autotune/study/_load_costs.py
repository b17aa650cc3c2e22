"""The load from a persistent compilation cache, measured for the contenders that decide.

When several processes will run the function and JAX's
persistent compilation cache is on (:attr:`Objective.shared`), the processes after the first pay
a confirmed point's ``load_cost_s`` instead of its compile. Every point carries the estimate
(trace + lower); :func:`measure_loads` then measures the real load (a compile into a temporary
cache, a load in a fresh process: ``autotune.measuring.process._load_probe``) of the contenders that decide, once
each: the cheapest :data:`LOAD_TOP`, the winner and the default, again while the ranking under
the measured loads brings an unmeasured one up, at most :data:`MAX_LOADS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autotune import select as _select
from autotune.program._config import Config
from autotune.select import Point
from autotune.select._objective import Objective

LOAD_TOP = 3
"""How many of the cheapest confirmed points get a real load measurement (with the winner and the default)."""

MAX_LOADS = 6
"""The most load measurements one confirmation takes (each starts two fresh processes)."""


def measure_loads(
    points: list[Point],
    default: Config,
    objective: Objective,
    load: Callable[[Config], Any] | None,
    check: Callable[[], None] = lambda: None,
) -> tuple[list[Point], list[str]]:
    """The confirmed points with the real load of the contenders that decide (see the module
    docstring), and notes for people (a load not measured, a cache that missed); the points as
    they are when the objective does not load from a cache (one process, or the cache off).

    ``load(config)`` returns an :class:`autotune.measuring.process._load_probe.Load` (``load_s``: the CPU seconds
    of the cached load alone; ``compile_cpu_s``: of the compile that wrote it; ``note``)."""
    if not objective.shared:
        return points, []
    if load is None:
        return points, ["the runner measures no load from a cache: later processes are charged trace + lower"]
    points, notes, tried = list(points), [], set()
    while len(tried) < MAX_LOADS:
        ranked = _select.ranked(points, objective)
        chosen = _select.winner(points, objective, default)
        wanted = [p.config for p in ranked[:LOAD_TOP]] + [chosen.config, default]
        held = {p.config: i for i, p in enumerate(points)}
        todo = next((c for c in wanted if c not in tried and c in held), None)
        if todo is None:
            break
        tried.add(todo)
        check()
        i = held[todo]
        p, got = points[i], load(todo)
        if got.load_s is not None:  # trace + lower as the point's compile figures have them, then the load
            base = p.measurement.load_estimate_s if p.measurement is not None else (p.load_cost_s or 0.0)
            cost = base + got.load_s
        elif got.compile_cpu_s is not None:  # the cache missed: a later process compiles again
            cost = p.compile_cost_s
        else:
            notes.append(f"{todo}: {got.note}; later processes are charged trace + lower")
            continue
        if got.note:
            notes.append(f"{todo}: {got.note}")
        m = None if p.measurement is None else p.measurement.replace(load_cost_s=cost)
        points[i] = p.replace(load_cost_s=cost, load_measured=True, measurement=m)
    return points, notes
