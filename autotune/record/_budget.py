"""A time budget across functions: ``autotune tune --recorded --time-budget 30m``.

The seconds go to the recorded functions in proportion to their share of the program's time,
``weight = expected calls × the default config's runtime`` (TVM's task scheduler weighs its
tasks the same way: how often a task runs times how long it takes). Records hold no call
counter (recording runs once per signature, on the traced path, never on the fast path), so
the calls are the decorator's ``expected_calls`` as recorded, or ``--expected-calls``, times its
``processes`` (each process calls it that often). The
runtime comes from one quick in-process measurement of the default config (:func:`quick_default`).

The split (:func:`split_budget`) is pure: proportional to the weights, every function at least
its floor (:func:`floor_s`: room for the default and a few trials; a function of weight zero,
``expected_calls=0``, gets its floor too, since its compile still counts in its cost), and
rounded to tenths of a second so that the shares sum to the budget exactly. When the floors
alone exceed the budget every function gets its floor, and the run says so.

With ``--trials N`` as well, each function stops at N trials or at its share, whichever comes
first; the seconds a function leaves unspent (its space exhausted, its trials done) flow to
the functions after it, re-split by the same rule (:func:`next_share`).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from autotune._errors import StudyError
from autotune.measuring._sampling import Sampling

UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
STEP_S = 0.1
"""Shares are whole tenths of a second; they sum to the budget rounded to a tenth."""
MIN_FLOOR_S = 10.0
"""Every function gets at least this long: a worker starts and measures the default three times."""
FLOOR_TRIALS = 6
"""...and at least the time of this many trials (the default's compile plus its timing each)."""
QUICK_TARGET_S = 0.05
"""Seconds of timed calls in the quick measurement of a default (its runtime, not its spread)."""
_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([smh]?)\s*")


def parse_duration(text: str) -> float:
    """Seconds of a duration: ``90s``, ``30m``, ``1.5h`` or plain seconds (``45``, ``2.5``).

    Raises:
        StudyError: anything else, or a duration that is not > 0 (one line, with the fix).

    Example::

        >>> parse_duration("1.5h"), parse_duration("30m"), parse_duration("90s"), parse_duration("45")
        (5400.0, 1800.0, 90.0, 45.0)
    """
    m = _DURATION.fullmatch(str(text).lower())
    seconds = float(m.group(1)) * UNITS[m.group(2)] if m else math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise StudyError(
            f"--time-budget {text!r} is not a duration > 0: write seconds (90 or 90s), minutes (30m) or hours (1.5h)."
        )
    return seconds


def floor_s(one_trial_s: float) -> float:
    """The least time a function gets: ``MIN_FLOOR_S``, or ``FLOOR_TRIALS`` trials of
    ``one_trial_s`` (the default's compile plus its timing) when that is longer."""
    return max(MIN_FLOOR_S, FLOOR_TRIALS * max(0.0, one_trial_s))


def split_budget(budget_s: float, weights: Sequence[float], floors: Sequence[float]) -> list[float]:
    """Seconds per function: proportional to ``weights``, each at least its floor, in tenths
    of a second that sum to ``budget_s`` (rounded to a tenth).

    A function whose proportional part is below its floor gets the floor, and the rest is
    split again among the others (water filling). All weights zero: equal parts. Floors
    that together exceed the budget: every function gets its floor (the sum is then larger).

    Example::

        >>> split_budget(100, [3, 1, 0], [10, 10, 10])
        [60.0, 30.0, 10.0]
    """
    if len(weights) != len(floors):
        raise ValueError("split_budget: one floor per weight")
    if any(w < 0 or not math.isfinite(w) for w in weights):
        raise ValueError(f"split_budget: weights must be finite and >= 0, got {list(weights)}")
    n = len(weights)
    if n == 0:
        return []
    total = round(budget_s / STEP_S)
    low = [math.ceil(f / STEP_S - 1e-9) for f in floors]
    if sum(low) >= total:
        return [u * STEP_S for u in low]
    w = list(weights) if sum(weights) > 0 else [1.0] * n
    fixed: set[int] = set()
    while True:  # the parts below their floor are fixed at it; the rest re-split
        free = [i for i in range(n) if i not in fixed]
        rest = total - sum(low[i] for i in fixed)
        mass = sum(w[i] for i in free)
        ideal = {i: (rest * w[i] / mass if mass > 0 else rest / len(free)) for i in free}
        below = [i for i in free if ideal[i] < low[i]]
        if not below:
            break
        fixed.update(below)
    units = [low[i] if i in fixed else math.floor(ideal[i]) for i in range(n)]
    units = [max(u, lo) for u, lo in zip(units, low, strict=True)]
    by_remainder = sorted(free, key=lambda i: (-(ideal[i] - math.floor(ideal[i])), i))
    for i in by_remainder[: total - sum(units)]:  # largest remainders first: the sum is exact
        units[i] += 1
    return [u * STEP_S for u in units]


def next_share(remaining_s: float, weights: Sequence[float], floors: Sequence[float]) -> float:
    """The seconds of the next function when ``remaining_s`` are left for it and the ones
    after it (``weights[0]`` is its own): the same split, re-done on what is left."""
    return split_budget(max(0.0, remaining_s), weights, floors)[0]


@dataclass
class Share:
    """One function's part of the budget, as planned and as used.

    Attributes:
        function: its key (``module:qualname``); signature: its short signature;
        calls: the expected calls weighed;
        runtime_s: the default's runtime (10th percentile), None when it could not be measured;
        one_trial_s: the default's compile plus timing seconds (sizes the floor);
        seconds: its planned share; given_s: the seconds it was given when its turn came (the
        plan re-done on what was left); used_s: the wall seconds its tuning took (None before);
        note: why it was weighed as it was (e.g. the default failed to measure).
    """

    function: str
    signature: str
    calls: float
    runtime_s: float | None
    one_trial_s: float
    seconds: float = 0.0
    given_s: float | None = None
    used_s: float | None = None
    note: str | None = None

    @property
    def label(self) -> str:
        return f"{self.function} {self.signature}"

    @property
    def weight(self) -> float:
        """Calls × runtime: its share of the program's time (0 when unmeasured)."""
        return self.calls * (self.runtime_s or 0.0)

    @property
    def floor_s(self) -> float:
        return floor_s(self.one_trial_s)


def plan(budget_s: float, shares: list[Share]) -> list[Share]:
    """``shares`` heaviest first with their planned seconds set (:func:`split_budget`)."""
    ordered = sorted(shares, key=lambda s: -s.weight)
    split = split_budget(budget_s, [s.weight for s in ordered], [s.floor_s for s in ordered])
    for share, seconds in zip(ordered, split, strict=True):
        share.seconds = seconds
    return ordered


def quick_default(fn: Any, args: tuple, kwargs: dict, signature: str, sampling: Sampling) -> Share:
    """Measure ``fn``'s default config once, in this process (one fresh compile, about
    ``QUICK_TARGET_S`` of calls), and return its unplanned :class:`Share`: ``fn.expected_calls``
    calls in each of ``fn.processes``, and one trial's time from its compile plus the trials' timing
    (``sampling.target_s``). A default that fails to measure weighs nothing, with a note (its study
    will say what is wrong)."""
    from autotune._errors import error_text
    from autotune.measuring._stages import measure

    target = sampling.target_s
    calls = fn.expected_calls * getattr(fn, "processes", 1)  # the calls of every process
    started = time.perf_counter()
    try:
        m = measure(fn.fun, args, kwargs, jit_kwargs=dict(fn.jit_kwargs), target_s=QUICK_TARGET_S)
    except Exception as e:
        spent = time.perf_counter() - started
        why = f"its default did not measure: {error_text(e)}"
        return Share(fn.key, signature, calls, None, spent + target, note=why)
    return Share(fn.key, signature, calls, m.run_cost_s, m.compile_total_s + target)


def spend(
    budget_s: float,
    items: Sequence[Any],
    measure: Callable[[Any], Share],
    tune: Callable[[Any, float], Any],
    show_plan: Callable[[list[Share], float, float], None] | None = None,
) -> list[tuple[Any, Share, Any]]:
    """Spend ``budget_s`` wall seconds on ``items``: ``measure`` each (its :class:`Share`),
    :func:`plan` what is left after measuring, call ``show_plan(shares, budget_s,
    measuring_s)``, then ``tune(item, seconds)`` heaviest first. Each item's seconds are
    re-split (:func:`next_share`) from what is left when its turn comes, so time one leaves
    unspent, or overruns (the confirmation after its search), moves the shares after it.

    Returns ``(item, share, tune's result)`` in tuning order, ``share.given_s`` and
    ``share.used_s`` set.
    """
    started = time.monotonic()
    shares = [measure(item) for item in items]
    measuring_s = time.monotonic() - started
    planned = plan(budget_s - measuring_s, shares)
    if show_plan is not None:
        show_plan(planned, budget_s, measuring_s)
    order = sorted(range(len(items)), key=lambda i: -shares[i].weight)  # plan's order (a stable sort)
    out = []
    for k, i in enumerate(order):
        rest = [shares[j] for j in order[k:]]
        left = budget_s - (time.monotonic() - started)
        share = shares[i]
        share.given_s = next_share(left, [s.weight for s in rest], [s.floor_s for s in rest])
        t0 = time.monotonic()
        result = tune(items[i], share.given_s)
        share.used_s = time.monotonic() - t0
        out.append((items[i], share, result))
    return out
