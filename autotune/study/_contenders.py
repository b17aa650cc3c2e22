"""Which configs confirmation re-times: one per lowered program, the cheapest few, those cheapest
at some call count, and the default (:func:`contenders`); a program's configs stand behind its
simplest one (:func:`simplest_key`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autotune import select as _select
from autotune.program._config import Config
from autotune.select import Point
from autotune.select._objective import Objective

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


def contenders(
    points: Sequence[Point],
    default: Config,
    objective: Objective,
    top: int,
    front_cap: int = 6,
    whole_front: bool = False,
) -> list[Config]:
    """The configs to confirm, one per program (:func:`by_program`): the ``top`` cheapest, the
    configs cheapest at some call count (capped), the default.

    The ``top`` cheapest hold at least one config besides the default wherever the search
    measured another program: a default that won the search is re-timed beside its runner-up, so
    its win is decided side by side, and the cache entry keeps a ranking that a study of another
    input signature starts from (`autotune.study._neighbours`), not the default alone.

    The configs cheapest at some call count are the lower envelope of the cost lines
    (:func:`autotune.select.crossover_intervals`): a point on the Pareto front above that
    envelope is never the winner for any call count, so re-timing it decides nothing. A Pareto
    search (``whole_front``) confirms the whole front, which is what it reports. Under a memory
    budget, only the configs that fit it (:func:`autotune.select.feasible`).
    """
    points = _select.feasible(by_program(points, default), objective.budget_bytes)[0]
    ranked = [p.config for p in _select.ranked(points, objective, default)]
    if whole_front:
        front = [p.config for p in _select.pareto_front(points)]
    else:
        front = [it["config"] for it in _select.crossover_intervals(points, **objective.line_figures())]
    picks = ranked[:top]
    if all(c == default for c in picks):
        picks += [c for c in ranked if c != default][:1]
    out: list[Config] = []
    for c in picks + front[:front_cap]:
        if c not in out:
            out.append(c)
    if default not in out:
        out.append(default)
    return out


__all__ = ["by_program", "contenders", "simplest_key"]
