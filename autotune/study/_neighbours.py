"""Neighbours: what the cache holds for the same function on the same device at another key
(another input signature, or an earlier program), turned into a new study's first trials.

The cache hands them over as :class:`Neighbour` values (``Cache.neighbours``; ``jit/_fn_tune``
reads them). :func:`plan` takes the :data:`NEIGHBOURS` nearest (:func:`distance`: how many
doublings apart the two signatures' arguments are; the newest first on a tie) that have a config
fitting the new program. Each one's confirmed points are ranked by their cost re-picked for the
new study's objective (`autotune.select`, the one rule), and its best :data:`SEEDS_PER_NEIGHBOUR`
configs that fit (:func:`fit`) become the study's first trials after the default. The plan, the
ranking each neighbour predicts and, once the seeds are measured, the verdict of the stop rule
(`autotune.study._seeded`) travel as one :class:`Seeding`, recorded in the study's attributes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from autotune import select as _select
from autotune.program._config import Config, SiteChoice
from autotune.program._keys import signature_leaves
from autotune.program._xla import XlaChoice
from autotune.select import Point, point_of
from autotune.select._objective import Objective

NEIGHBOURS = 3
"""How many neighbours seed a study, nearest first."""

SEEDS_PER_NEIGHBOUR = 3
"""How many of a neighbour's best configs (besides the default) each seeds."""

_ARRAY = re.compile(r"^(?P<dtype>[^\[\]~]+)~?\[(?P<shape>[0-9,]*)\]")


@dataclass(frozen=True)
class Neighbour:
    """A tuned result of the same function on the same device at another key: the cache entry's
    key, its confirmed points and its default config (None where the entry records none)."""

    signature: str
    fingerprint: str
    points: tuple[Point, ...]
    default: Config | None = None


def _leaf_distance(a: str, b: str) -> float:
    """Doublings between two leaves' sizes (per dimension when their ranks agree), 1 more for
    another dtype; between two static values, the doublings between two positive numbers, else 1."""
    if a == b:
        return 0.0
    ma, mb = _ARRAY.match(a), _ARRAY.match(b)
    if ma is None or mb is None:
        x, y = _number(a), _number(b)
        return abs(math.log2(x / y)) if x and y and ma is None and mb is None else 1.0
    da = [max(1, int(d)) for d in ma["shape"].split(",") if d]
    db = [max(1, int(d)) for d in mb["shape"].split(",") if d]
    other = float(ma["dtype"] != mb["dtype"])
    if len(da) == len(db):
        return other + sum(abs(math.log2(x / y)) for x, y in zip(da, db))
    return other + 1.0 + abs(math.log2(math.prod(da) / math.prod(db)))


def _number(leaf: str) -> float | None:
    try:
        value = float(leaf.removeprefix("static:"))
    except ValueError:
        return None
    return value if value > 0 and math.isfinite(value) else None


def distance(a: str, b: str) -> float:
    """How far apart two signatures are: the most doublings between one leaf's sizes in both
    (``float32[32,256]`` to ``float32[64,256]`` is 1, to ``float32[64,512]`` 2; a batch doubled in
    every argument is 1); infinite for another tree structure.

    Example::

        >>> distance("P|float32[32,256];float32[32];static:4", "P|float32[64,256];float32[64];static:4")
        1.0
    """
    ta, la = signature_leaves(a)
    tb, lb = signature_leaves(b)
    if ta != tb or len(la) != len(lb):
        return math.inf
    return max((_leaf_distance(x, y) for x, y in zip(la, lb)), default=0.0)


def _nearest_choice(choice: SiteChoice, offered: list[SiteChoice]) -> SiteChoice | None:
    """``choice`` where the site offers it, else the offered choice of its representation with
    the nearest unroll factor (in ratio; its policy and guard kept where offered); None for a representation
    the site does not offer."""
    if choice in offered:
        return choice
    same = [c for c in offered if c.repr == choice.repr]
    if not same:
        return None
    return min(
        same,
        key=lambda c: (
            c.policy != choice.policy,
            c.guard != choice.guard,
            abs(math.log(c.unroll / choice.unroll)),
            c.unroll,
        ),
    )


def fit(config: Config, space: Any) -> Config | None:
    """``config`` as the new program's study can measure it, or None when it does not fit.

    It fits when it names only sites the new program has, each with a representation the site
    offers (the study's `Space`, whose choices are the ones `program._config.misfit` lets the
    site take); an unroll factor the site no longer offers (a shorter or longer loop) becomes the
    nearest one it does. A site the new program holds at its default (a loop of length 1) fits
    only at its default. XLA options the study does not search are left out.
    """
    entries = {e.site.id: e for e in space.entries}
    defaults = {s.id: s.default for s in space.all_sites}
    chosen: dict[str, SiteChoice] = {}
    for site_id in config:
        choice = config[site_id]
        if site_id in entries:
            got = _nearest_choice(choice, entries[site_id].choices)
            if got is None:
                return None
            chosen[site_id] = got
        elif defaults.get(site_id) != choice:
            return None
    xla = config.xla if config.xla in space.xla else XlaChoice()
    return Config({e.site.id: chosen.get(e.site.id, e.site.default) for e in space.entries}, xla=xla)


@dataclass(frozen=True)
class Source:
    """A neighbour that seeded a study: its key, how far it is, its pick for the study's
    objective (as it fits the new program; None where it does not fit), its configs that fit,
    ranked, with their costs there (the ranking the stop rule checks), and the ones seeded."""

    signature: str
    fingerprint: str
    distance: float
    winner: Config | None
    ranking: tuple[tuple[Config, float], ...]
    seeds: tuple[Config, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "signature": self.signature,
            "fingerprint": self.fingerprint,
            "distance": None if math.isinf(self.distance) else self.distance,
            "winner": None if self.winner is None else self.winner.to_dict(),
            "ranking": [{"config": c.to_dict(), "cost": cost} for c, cost in self.ranking],
            "seeds": [c.to_dict() for c in self.seeds],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Source:
        return cls(
            d["signature"],
            d["fingerprint"],
            math.inf if d.get("distance") is None else float(d["distance"]),
            None if d.get("winner") is None else Config.from_dict(d["winner"]),
            tuple((Config.from_dict(r["config"]), float(r["cost"])) for r in d.get("ranking") or ()),
            tuple(Config.from_dict(c) for c in d.get("seeds") or ()),
        )


@dataclass(frozen=True)
class Verdict:
    """The stop rule's decision after the seeds (`autotune.study._seeded.decide`).

    Attributes:
        stopped: the search stopped after the seeds.
        rule: ``"holds"`` (stopped: the nearest neighbour's winner is the cheapest here, within the
            noise margin, and no pair of its configs swapped places beyond it), ``"beaten"``
            (``second`` is cheaper here than the winner ``first`` beyond the margin), ``"swapped"``
            (the neighbour ranked ``first`` ahead of ``second``; here ``second`` is ahead beyond
            the margin), ``"unmeasured"`` (the neighbour's winner gave no measurement here),
            ``"thin"`` (fewer than two of its configs measured here: no ranking to check),
            ``"pareto"`` (a Pareto search maps the whole front) or ``"searched on"`` (a later run
            with ``neighbours=False`` searched past a stop).
        first, second: the configs the rule names (see ``rule``; for ``"holds"`` the winner and the
            runner-up here).
        ratio: how many times dearer ``first`` is than ``second`` here (``"holds"``: the
            runner-up's cost over the winner's).
        margin: the noise margin used (relative).
    """

    stopped: bool
    rule: str
    first: Config | None = None
    second: Config | None = None
    ratio: float | None = None
    margin: float | None = None

    def text(self, label=str) -> str:
        """One sentence; ``label`` writes a config (the CLI's short site names, or ``str``)."""
        a, b = (None if c is None else label(c) for c in (self.first, self.second))
        r = "" if self.ratio is None else f"{self.ratio:.2f}×"
        m = "" if self.margin is None else f"{self.margin:.0%}"
        if self.rule == "holds":
            near = self.ratio is not None and self.ratio < 1
            return (
                f"stopped after them: the neighbour's winner {a} holds here"
                + ("" if b is None else f" ({b} costs {r} as much{', inside the margin' if near else ''})")
                + f" and its ranking agrees within the noise margin of {m}"
            )
        return {
            "beaten": f"searched on: {b} is cheaper here than the neighbour's winner {a} ({a} costs {r} as much)",
            "swapped": f"searched on: the neighbour ranked {a} ahead of {b}, here {a} costs {r} as much",
            "unmeasured": f"searched on: the neighbour's winner {a} gave no measurement here",
            "thin": "searched on: fewer than two of the neighbour's configs measured here, no ranking to check",
            "pareto": "searched on: a Pareto search maps the whole front",
            "searched on": "searched on past an earlier stop (neighbours=False)",
        }[self.rule]

    def to_json(self) -> dict[str, Any]:
        return {
            "stopped": self.stopped,
            "rule": self.rule,
            "first": None if self.first is None else self.first.to_dict(),
            "second": None if self.second is None else self.second.to_dict(),
            "ratio": self.ratio,
            "margin": self.margin,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Verdict:
        first, second = (None if d.get(k) is None else Config.from_dict(d[k]) for k in ("first", "second"))
        return cls(bool(d["stopped"]), str(d["rule"]), first, second, d.get("ratio"), d.get("margin"))


@dataclass(frozen=True)
class Seeding:
    """How a study was seeded from its neighbours: the neighbours (nearest first), the configs
    measured after the default, how many of the neighbours' configs did not fit the new program,
    and the stop rule's verdict once the seeds are measured (None before). ``TuneResult.seeding``,
    ``autotune tune``'s ``neighbours:`` line and its ``--json`` ``seeding``."""

    sources: tuple[Source, ...]
    seeds: tuple[Config, ...]
    unfit: int = 0
    verdict: Verdict | None = None

    @property
    def stopped(self) -> bool:
        """Whether the search stopped after the seeds."""
        return self.verdict is not None and self.verdict.stopped

    def line(self, label=str) -> str:
        """What ``autotune tune`` prints: which neighbours seeded the study and what came of it."""
        n = len(self.sources)
        near = self.sources[0].distance
        how = "another tree structure" if math.isinf(near) else f"{near:.3g} doubling{'s' * (near != 1)} away"
        head = (
            f"neighbours: {len(self.seeds)} config{'s' * (len(self.seeds) != 1)} of {n} tuned "
            f"signature{'s' * (n != 1)} (the nearest {how}) measured after the default"
        )
        if self.unfit:
            head += f" ({self.unfit} did not fit this program)"
        return f"{head}; " + ("not decided yet" if self.verdict is None else self.verdict.text(label))

    def to_json(self, label=None) -> dict[str, Any]:
        """The JSON form (the study's attributes, ``--json``); with ``label``, the verdict's sentence too."""
        out: dict[str, Any] = {
            "neighbours": [s.to_json() for s in self.sources],
            "seeds": [c.to_dict() for c in self.seeds],
            "unfit": self.unfit,
            "stopped": self.stopped,
            "verdict": None if self.verdict is None else self.verdict.to_json(),
        }
        if label is not None:
            out["why"] = None if self.verdict is None else self.verdict.text(label)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Seeding | None:
        if not d:
            return None
        return cls(
            tuple(Source.from_json(s) for s in d.get("neighbours") or ()),
            tuple(Config.from_dict(c) for c in d.get("seeds") or ()),
            int(d.get("unfit") or 0),
            None if d.get("verdict") is None else Verdict.from_json(d["verdict"]),
        )

    def decided(self, verdict: Verdict) -> Seeding:
        return replace(self, verdict=verdict)


def _source(n: Neighbour, space: Any, goal: Objective, far: float, default: Config) -> tuple[Source | None, int]:
    """A neighbour as a source of seeds (None when none of its configs fits), and how many did not fit."""
    points = list(n.points)
    theirs = None if n.default is None else point_of(points, n.default)
    ranking: list[tuple[Config, float]] = []
    unfit = 0
    for p in _select.ranked(points, goal, n.default):
        mapped = fit(p.config, space)
        if mapped is None:
            unfit += 1
        elif all(mapped != c for c, _ in ranking):
            ranking.append((mapped, _select.cost(p, goal, theirs)))
    seeds = tuple(c for c, _ in ranking if c != default)[:SEEDS_PER_NEIGHBOUR]
    if not seeds:
        return None, unfit
    pick = _select.winner(points, goal, n.default)
    winner = None if pick is None else fit(pick.config, space)
    return Source(n.signature, n.fingerprint, far, winner, tuple(ranking), seeds), unfit


def plan(neighbours: list[Neighbour], space: Any, goal: Objective, signature: str, limit: int) -> Seeding | None:
    """The seeding of a new study of ``space`` at ``signature`` for ``goal``: up to ``limit``
    configs from the nearest neighbours (oldest first in ``neighbours``; a tie in distance goes
    to the newest), or None when no neighbour has a config that fits besides the default."""
    default = space.default()
    order = sorted(range(len(neighbours)), key=lambda i: (distance(signature, neighbours[i].signature), -i))
    sources: list[Source] = []
    seeds: list[Config] = []
    unfit = 0
    for i in order:
        if len(sources) >= NEIGHBOURS or len(seeds) >= limit:
            break
        n = neighbours[i]
        src, bad = _source(n, space, goal, distance(signature, n.signature), default)
        unfit += bad
        if src is None:
            continue
        sources.append(src)
        seeds.extend(c for c in src.seeds if c not in seeds)
    if not sources or limit <= 0:
        return None
    return Seeding(tuple(sources), tuple(seeds[: max(0, limit)]), unfit)


__all__ = ["NEIGHBOURS", "SEEDS_PER_NEIGHBOUR", "Neighbour", "Seeding", "Source", "Verdict", "distance", "fit", "plan"]
