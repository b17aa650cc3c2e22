"""The slowdown ``s`` of the default's calls while a compile runs beside them, measured for tier-up.

A study for ``@at.autotuned(tier_up=True)`` (``Objective.tier_up``) charges a config whose compile
qualifies against the default's the tiered cost (`autotune.select._tiered`), in which the default
serves while the winner compiles beside it at ``s`` times its own per-call cost. ``s`` depends on
the host (its cores, its load) and on how much CPU the calls take, so :func:`measure_slowdown`
measures it after confirmation, on the runner that measured the study: :data:`ROUNDS` rounds,
each timing the default's kept executable alone and then beside a compile
(`autotune.measuring._beside`); ``s`` = median beside / median alone, at least 1. The same
rounds give ``c``, how many times longer the stand-in compiled beside the calls than alone (the
median of the rounds' ``compile_stretch``, at least 1): the winner, compiled beside the default's
calls, is ready ``c·C_w`` after they start. It runs only when some confirmed point qualifies
(otherwise neither decides anything), and the figures go on the default's point
(`Point.slowdown`, `Point.compile_slowdown`), where the winner rule, the cache and the tables read them.
"""

from __future__ import annotations

import inspect
import statistics
from collections.abc import Callable

from autotune._errors import error_text
from autotune.measuring._runner import Runner
from autotune.program._config import Config
from autotune.select import Point, point_of
from autotune.select._objective import Objective
from autotune.select._tiered import DEFAULT_COMPILE_SLOWDOWN, DEFAULT_SLOWDOWN, tiers

ROUNDS = 3
"""Rounds of (alone, beside) timings of the default's executable; their medians give ``s``."""


def measure_slowdown(
    runner: Runner,
    points: list[Point],
    default: Config,
    objective: Objective,
    check: Callable[[], None] = lambda: None,
) -> tuple[list[Point], list[str]]:
    """The points with the default's point carrying the measured ``slowdown`` (the module
    docstring), and notes for people (why it was not measured); the points unchanged when the
    objective has no tier-up or no point qualifies."""
    theirs = point_of(points, default)
    if not objective.tier_up or theirs is None or not any(tiers(p, theirs, objective) for p in points):
        return points, []
    if not _times_beside(runner):
        return points, [_not_measured("this runner's retime() takes no beside=")]
    alone: list[float] = []
    beside: list[float] = []
    stretch: list[float] = []
    for _ in range(ROUNDS):
        check()
        try:
            a = runner.retime(theirs.config)
            b = runner.retime(theirs.config, beside=True)
        except Exception as exc:  # a failed measurement of s must not fail the study (Interrupted is not caught)
            return points, [_not_measured(f"timing them failed ({error_text(exc)})")]
        if a is None or b is None:
            return points, [_not_measured("the default's executable was no longer kept")]
        alone.append(a.run_cost_s)
        beside.append(b.run_cost_s)
        if b.compile_stretch is not None:
            stretch.append(b.compile_stretch)
    base = statistics.median(alone)
    s = max(1.0, statistics.median(beside) / base) if base > 0 else 1.0
    c = max(1.0, statistics.median(stretch)) if stretch else None
    notes = [] if c is not None else [_compile_not_measured("no compile finished beside the calls")]
    return [p.replace(slowdown=s, compile_slowdown=c) if p is theirs else p for p in points], notes


def _not_measured(
    why: str, what: str = "the slowdown of the default's calls beside a compile", charged: float = DEFAULT_SLOWDOWN
) -> str:
    return f"tier-up: {what} was not measured ({why}); {charged} is charged"


def _compile_not_measured(why: str) -> str:
    return _not_measured(why, "how much longer a compile takes beside the default's calls", DEFAULT_COMPILE_SLOWDOWN)


def _times_beside(runner: Runner) -> bool:
    """Whether ``runner.retime`` takes ``beside`` (a runner written before it did, or one that
    cannot compile beside its calls, does not)."""
    try:
        return "beside" in inspect.signature(runner.retime).parameters
    except (TypeError, ValueError):
        return False
