"""Which configs confirmation re-times: one per lowered program, the cheapest few, those cheapest
at some call count where the measurements can decide other call counts, and the default
(:func:`contenders`; what the confirmation serves: :func:`serves`); a program's configs stand behind
its simplest one (:func:`simplest_key`). :data:`CUTOFF`: past it, a config cannot win.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from autotune import select as _select
from autotune.program._config import Config
from autotune.select import Point
from autotune.select._objective import Objective

CUTOFF = 2.0
"""A config whose cost (or whose calls alone) would be over this many times the best cost cannot
win: the search stops timing such a trial once a short estimate says so (``Sampling.stop_above_s``),
and confirmation does not re-time it (TileLang and Helion skip a candidate whose first estimate is
over about 2x the best). Measured: docs/results/tuning-wall.md."""

PICK, CALLS, FRONT = "pick", "calls", "front"
"""What a confirmation serves (:func:`serves`): the pick at the tuned call count, the cheapest config
at every call count, or the whole Pareto front."""

_REPR_ORDER = {"scan": 0, "fori": 1, "while": 2, "for": 3}
_FOR_COPIES = 1 << 30  # a full unroll: more body copies than any partial one of the same site


def simplest_key(config: Config) -> tuple[int, int, str]:
    """How complicated a config's form is (smaller is simpler): the body copies it asks for
    (each site's unroll factor summed, ``for`` counting as the most), then how far its
    representations are from a plain ``scan`` (scan < fori < while < for), then its canonical JSON.

    Example::

        >>> a = Config({"l": {"repr": "fori", "unroll": 2}}); b = Config({"l": {"repr": "scan", "unroll": 2}})
        >>> min([a, b], key=simplest_key) == b
        True
    """
    copies = sum(_FOR_COPIES if ch.repr == "for" else ch.unroll for ch in config.values())
    return copies, sum(_REPR_ORDER.get(ch.repr, 4) for ch in config.values()), config.to_json()


def by_program(points: Sequence[Point], default: Config) -> list[Point]:
    """One point per lowered program (``point.program``, the program hash; a point without
    it is a program of its own): the point of its simplest config (the default's where the
    default is one of them), with the other configs in ``equivalent`` (simplest first)."""
    groups: dict[Any, list[Point]] = {}
    for p in points:
        groups.setdefault(p.program or p.config, []).append(p)
    out = []
    for members in groups.values():
        members = sorted(members, key=lambda p: (p.config != default, simplest_key(p.config)))
        head = members[0]
        if len(members) > 1:
            head = head.replace(equivalent=tuple(m.config for m in members[1:]))
        out.append(head)
    return out


def serves(search: str, space_size: int, decided: int) -> str:
    """What confirmation serves: :data:`FRONT` for a Pareto search (it reports the front);
    :data:`CALLS` where the search decided every config of the space (``decided`` of
    ``space_size``: measured or stopped), so the confirmed points say which config is cheapest at
    every call count; else :data:`PICK`: a config never measured could be the cheapest at another
    call count, so the measurements decide only the tuned one (`autotune.select.complete_range`),
    and re-timing configs for the other counts' table would buy nothing.

    Example::

        >>> serves("cost", 252, 23), serves("cost", 13, 13), serves("pareto", 252, 23)
        ('pick', 'calls', 'front')
    """
    if search == "pareto":
        return FRONT
    return CALLS if decided >= space_size else PICK


def contenders(
    points: Sequence[Point],
    default: Config,
    objective: Objective,
    top: int,
    front_cap: int = 6,
    serve: str = CALLS,
) -> list[Config]:
    """The configs to confirm, one per program (:func:`by_program`): the ``top`` cheapest that
    could win (a cost within :data:`CUTOFF` of the best's; under tier-up, any), the configs cheapest at some call count
    (capped; only where the confirmation ``serve`` s :data:`CALLS` or :data:`FRONT`), the default.

    The ``top`` cheapest hold at least one config besides the default wherever the search
    measured another program: a default that won the search is re-timed beside its runner-up, so
    its win is decided side by side, and the cache entry keeps a ranking that a study of another
    input signature starts from (`autotune.study._neighbours`), not the default alone.

    The configs cheapest at some call count are the lower envelope of the cost lines
    (:func:`autotune.select.crossover_intervals`): a point on the Pareto front above that
    envelope is never the winner for any call count, so re-timing it decides nothing. A Pareto
    search (:data:`FRONT`) confirms the whole front, which is what it reports. Under a memory
    budget, only the configs that fit it (:func:`autotune.select.feasible`).
    """
    points = _select.feasible(by_program(points, default), objective.budget_bytes)[0]
    order = _select.ranked(points, objective, default)
    if serve == FRONT:
        front = [p.config for p in _select.pareto_front(points)]
    elif serve == CALLS:
        front = [it["config"] for it in _select.crossover_intervals(points, **objective.line_figures())]
    else:
        front = []
    # Under tier-up a config's charge waits on the slowdown measured after confirmation, so the
    # search's figures rule none out.
    bar = math.inf if objective.tier_up or not order else CUTOFF * _select.cost(order[0], objective)
    picks = [p.config for p in order[:top] if p.config == default or _select.cost(p, objective) <= bar]
    if all(c == default for c in picks):
        picks += [p.config for p in order if p.config != default][:1]
    out: list[Config] = []
    for c in picks + front[:front_cap]:
        if c not in out:
            out.append(c)
    if default not in out:
        out.append(default)
    return out


__all__ = ["CALLS", "CUTOFF", "FRONT", "PICK", "by_program", "contenders", "serves", "simplest_key"]
