"""Which config to measure next: every proposal is a config no trial holds yet.

A study's budget counts distinct measurements, so the proposers never hand out a config
already measured, pruned, failed or being measured by another worker of the same study
(``taken``). The grid walks the space in order (the default first); random search draws
uniformly from the configs not taken; TPE and NSGA-II keep their model: they draw from
the study's trials so far (without recording a trial) and draw again when the draw is
taken, and after ``redraws`` taken draws the nearest config not taken to the model's last
draw is measured instead.

TPE's random start is measured cheapest compile first: its random draws are made at once and
handed out in the order of their body copies (``_predict.copies``), so the same configs are tried,
but a costly one (a full unroll) comes after cheap ones have lowered the compile budget it is
pruned at, and after the compile predictor has trials enough to skip it.

A site the rewrite cannot re-emit at all is *pinned* (:meth:`pin`): from then on every
proposal holds it at its default, so a study spends one trial on such a site, not many.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any

from autotune.program._config import Config, SiteChoice
from autotune.study._predict import copies

ENUMERATE_LIMIT = 20_000
"""Spaces up to this many configs are enumerated for random and nearest-config search."""


def _choice_distance(a: SiteChoice, b: SiteChoice) -> float:
    if a == b:
        return 0.0
    if a.policy != b.policy:  # another rematerialisation policy: a program as different as another repr
        return 1.0
    if a.repr != b.repr:
        return 1.0
    return min(1.0, abs(math.log2(max(1, a.unroll)) - math.log2(max(1, b.unroll))) / 4) or 0.25


def distance(space, a: Config, b: Config) -> float:
    """How far apart two configs are: per site 0 (same), up to 1 (another representation)."""
    total = 0.0
    for e in space.entries:
        total += _choice_distance(a.get(e.site.id, e.site.default), b.get(e.site.id, e.site.default))
    return total + (a.xla != b.xla)  # another XLA choice counts as another representation


def _configs(space, rng: random.Random, limit: int) -> Iterator[Config]:
    """Every config (small spaces), else ``limit`` random ones."""
    if len(space) <= ENUMERATE_LIMIT:
        yield from space.configs()
        return
    for _ in range(limit):
        yield random_config(space, rng)


def random_config(space, rng: random.Random) -> Config:
    xla = rng.choice(space.xla) if space.xla else None
    return Config({e.site.id: rng.choice(e.choices) for e in space.entries}, xla=xla)


class _Pinning:
    """``pin(site_ids)``: propose only configs that hold those sites at their default."""

    full: Any
    space: Any
    pinned: frozenset = frozenset()

    def pin(self, site_ids) -> None:
        ids = frozenset(site_ids)
        if ids != self.pinned:
            self.pinned = ids
            self.space = self.full.pinned(ids)


class GridProposer(_Pinning):
    """Every config of the space in order, the default first."""

    kind = "grid"

    def __init__(self, space):
        self.full = self.space = space

    def propose(self, taken: set[str]) -> Config | None:
        for config in self.space.configs():
            if config.to_json() not in taken:
                return config
        return None

    def upcoming(self, taken: set[str], n: int) -> list[Config]:
        """The next ``n`` configs :meth:`propose` would hand out, in order, were each taken in
        turn (a runner compiles them ahead)."""
        out: list[Config] = []
        for config in self.space.configs():
            if len(out) >= n:
                break
            if config.to_json() not in taken:
                out.append(config)
        return out


class RandomProposer(_Pinning):
    """A uniform draw among the configs not taken."""

    kind = "random"

    def __init__(self, space, seed: int | None):
        self.full = self.space = space
        self.rng = random.Random(seed)

    def propose(self, taken: set[str]) -> Config | None:
        if len(self.space) <= ENUMERATE_LIMIT:
            free = [c for c in self.space.configs() if c.to_json() not in taken]
            return self.rng.choice(free) if free else None
        for _ in range(10_000):
            config = random_config(self.space, self.rng)
            if config.to_json() not in taken:
                return config
        return None


class SamplerProposer(_Pinning):
    """An Optuna sampler's draw (TPE, NSGA-II), redrawn while taken, then the nearest free config.

    The sampler draws from the whole space (its model keeps the study's parameters); a pinned
    site of a draw is set to its default.
    """

    def __init__(self, kind: str, study, space, sampler: Any, seed: int | None, redraws: int = 12, startup: int = 0):
        self.kind, self.study, self.sampler = kind, study, sampler
        self.full = self.space = space
        self.rng, self.redraws = random.Random(seed), redraws
        self.walks = 0  # proposals that came from the nearest-config walk, for the record
        self.startup = startup  # the sampler's random draws before its model (0: none ordered)
        self._start: list[Config] | None = None  # those draws, cheapest compile first

    def propose(self, taken: set[str]) -> Config | None:
        first = self._startup_next(taken)
        if first is not None:
            return first
        draws = self.study.sample(self.sampler, self.full, self.redraws)
        if self.pinned:
            draws = [self.full.with_defaults(c, self.pinned) for c in draws]
        for config in draws:
            if config.to_json() not in taken:
                return config
        return self.nearest_free(draws[-1], taken)

    def _startup_next(self, taken: set[str]) -> Config | None:
        """The next of the random start's draws not taken, the fewest body copies first (drawn
        together at the first proposal of a study still in its random start)."""
        if self._start is None:
            from autotune.study._optuna import learned_from  # Optuna loads late

            left = self.startup - learned_from(self.study)
            draws = self.study.sample(self.sampler, self.full, max(self.redraws, 4 * left)) if left > 0 else []
            free = {c.to_json(): c for c in draws if c.to_json() not in taken}
            picked = list(free.values())[: max(0, left)]
            self._start = sorted(picked, key=lambda c: sum(copies(self.full, c).values()))
        while self._start:
            config = self._start.pop(0)
            if self.pinned:
                config = self.full.with_defaults(config, self.pinned)
            if config.to_json() not in taken:
                return config
        return None

    def nearest_free(self, config: Config, taken: set[str]) -> Config | None:
        best, best_d = None, math.inf
        for other in _configs(self.space, self.rng, 4000):
            if other.to_json() in taken:
                continue
            d = distance(self.space, config, other) + self.rng.random() * 1e-6
            if d < best_d:
                best, best_d = other, d
        if best is not None:
            self.walks += 1
        return best


def make_proposer(kind: str, study, space, seed: int | None, budget: int, constrained: bool = False):
    """The proposer of a sampler name: ``grid``, ``random``, ``tpe``, ``nsga2`` or ``ladder`` (``constrained``:
    under a memory budget, which TPE and NSGA-II are told as a constraint)."""
    if kind == "grid":
        return GridProposer(space)
    if kind == "ladder":
        from autotune.study._ladder import LadderProposer

        return LadderProposer(study, space)
    if kind == "random":
        return RandomProposer(space, seed)
    from autotune.study._optuna import make_sampler, startup_trials

    startup = startup_trials(budget) if kind == "tpe" else 0
    return SamplerProposer(kind, study, space, make_sampler(kind, seed, budget, constrained), seed, startup=startup)
