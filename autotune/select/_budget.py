"""The memory budget: how one is said, and which configs it lets win (the one feasibility rule).

A budget is said as bytes with a unit (``"12GiB"``, ``"512MB"``, ``2**30``) or as a fraction of
the device's memory (``0.5``, ``"0.5"``) as the device reports it (``bytes_limit`` of
``memory_stats()``; the CPU reports none, so there a fraction is refused). :func:`parse` reads
either; :func:`resolve` turns a fraction into bytes on a device. An ``Objective`` holds the budget
(``max_memory``), so it keys a study and a cache entry as the call count does.

A config fits when its device memory (:attr:`autotune.select.Point.memory_bytes`, the one figure
of :func:`autotune.measuring._measurement.device_memory`) is known and at most the budget.
:func:`feasible` is the rule every winner passes through (the search's, confirmation's, the
cache's re-pick and tier-up's): the points over the budget never win; when the default is over
it, the cheapest config that fits wins without having to beat it; when nothing fits, the default
stays (a config that fits cannot be named, and the default is what runs without autotune).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from autotune._errors import ConfigError

UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
"""The units a budget may be said in (case-insensitive)."""

_TEXT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")
_FORMS = (
    "bytes with a unit ('12GiB', '512MB', '1048576B'), a whole number of bytes, "
    "or a fraction in (0, 1] of the device's memory ('0.5')"
)


def parse(value: Any, what: str = "max_memory") -> int | float | None:
    """A budget as said: None (no budget), a whole number of bytes (int), or a fraction of the
    device's memory in (0, 1] (float); ``what`` names the option in the error.

    Example::

        >>> parse("12GiB"), parse("1.5 MB"), parse(4096), parse("0.5"), parse(0.25), parse(None)
        (12884901888, 1500000, 4096, 0.5, 0.25, None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{what}={value!r} is not a memory budget; give {_FORMS}.")
    if isinstance(value, (int, float)):
        number, unit = float(value), None if isinstance(value, float) else "b"
    else:
        match = _TEXT.match(str(value))
        if match is None or (match.group(2) and match.group(2).lower() not in UNITS):
            raise ConfigError(f"{what}={value!r} is not a memory budget; give {_FORMS}.")
        number, unit = float(match.group(1)), (match.group(2).lower() or None)
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(f"{what}={value!r} must be more than 0; give {_FORMS}.")
    if unit is None and number <= 1:
        return number
    if unit is None and number != int(number):
        raise ConfigError(
            f"{what}={value!r} is neither a fraction in (0, 1] nor a whole number of bytes; give {_FORMS}."
        )
    return int(number * UNITS[unit or "b"])


def resolve(budget: int | float | None, bytes_limit: int | None, what: str = "max_memory") -> int | None:
    """The budget in bytes on a device whose memory is ``bytes_limit`` (None: it reports none):
    a fraction of it, or the bytes said.

    Example::

        >>> resolve(0.5, 16 * 2**30), resolve(1000, None), resolve(None, None)
        (8589934592, 1000, None)
    """
    if budget is None or isinstance(budget, int):
        return budget
    if not bytes_limit:
        raise ConfigError(
            f"{what}={budget!r} is a fraction of the device's memory, but this device reports none "
            "(the CPU does not); give it in bytes instead, e.g. max_memory='4GiB' (--max-memory 4GiB)."
        )
    return int(budget * bytes_limit)


def within(used: int | None, max_memory: int | None) -> bool:
    """THE test: device memory ``used`` (bytes, None: unknown) fits the budget ``max_memory`` (bytes,
    None: no budget) when there is none, or when it is known and at most the budget."""
    return max_memory is None or (used is not None and used <= max_memory)


def fits(point: Any, max_memory: int | None) -> bool:
    """Whether a point (anything with ``memory_bytes``) fits the budget (:func:`within`)."""
    return within(getattr(point, "memory_bytes", None), max_memory)


def feasible(points: Sequence[Any], max_memory: int | None, default: Any = None) -> tuple[list[Any], Any]:
    """THE feasibility rule: ``(the points that may win, the default the rule holds them to)``.

    No budget: every point, ``default`` as given. Under one: the points that fit; the default
    (a config) stays the bar where its point fits; where it is over the budget, None (the cheapest
    config that fits wins, no need to beat it); where nothing fits, the default's point alone
    (the default stays: nothing named fits)."""
    points = list(points)
    if max_memory is None:
        return points, default
    inside = [p for p in points if fits(p, max_memory)]
    if not inside:
        held = [p for p in points if default is not None and p.config == default]
        return (held or points), default
    if default is not None and not any(p.config == default for p in inside):
        return inside, None
    return inside, default
