"""The search space of a program: per site a representation and an unroll factor."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._config import Config, SiteChoice
from ._sites import LoopSite


def unroll_options(length: int, default: int = 1) -> list[int]:
    """1, 2, 4, ... below the trip count (full unroll is the "for" choice), plus the default."""
    options = {1, default} if default < length else {1}
    k = 2
    while k < length:
        options.add(k)
        k *= 2
    return sorted(options)


@dataclass(frozen=True)
class SiteSpace:
    site: LoopSite
    reprs: tuple[str, ...]
    unrolls: tuple[int, ...]

    @property
    def choices(self) -> list[SiteChoice]:
        out = []
        for rep in self.reprs:
            if rep == "for":
                out.append(SiteChoice("for"))
            else:
                out.extend(SiteChoice(rep, u) for u in self.unrolls)
        return out

    def param_names(self) -> tuple[str, str]:
        return f"{self.site.id}.repr", f"{self.site.id}.unroll"


class Space:
    """Every tunable site of a program and the choices each offers.

    A site of length <= 1 has nothing to tune and is left out. An automatic scan
    offers ``scan`` (unroll 1, 2, 4, ...) and ``for`` (fully unrolled); an
    ``at.loop`` also offers ``fori`` when it stacks no outputs.
    """

    def __init__(self, sites: list[LoopSite]):
        self.sites = [s for s in sites if s.length > 1]
        self.entries: list[SiteSpace] = []
        for s in self.sites:
            reprs = ("scan", "for") if s.kind == "scan" or s.has_ys else ("scan", "for", "fori")
            default_unroll = s.default.unroll if s.default.repr != "for" else 1
            self.entries.append(SiteSpace(s, reprs, tuple(unroll_options(s.length, default_unroll))))

    def __len__(self) -> int:
        n = 1
        for e in self.entries:
            n *= len(e.choices)
        return n

    def default(self) -> Config:
        return Config({e.site.id: e.site.default for e in self.entries})

    def configs(self) -> Iterator[Config]:
        """Every config, the default first."""
        default = self.default()
        yield default
        for combo in itertools.product(*[e.choices for e in self.entries]):
            config = Config({e.site.id: c for e, c in zip(self.entries, combo)})
            if config != default:
                yield config

    def to_params(self, config: Config) -> dict[str, Any]:
        """Optuna params that reproduce ``config`` (for enqueueing a trial)."""
        params: dict[str, Any] = {}
        for e in self.entries:
            choice = config.get(e.site.id, e.site.default)
            repr_name, unroll_name = e.param_names()
            params[repr_name] = choice.repr
            if choice.repr != "for":
                params[unroll_name] = choice.unroll
        return params

    def from_params(self, params: dict[str, Any]) -> Config:
        """The config of a set of Optuna params (the inverse of :meth:`to_params`)."""
        choices = {}
        for e in self.entries:
            repr_name, unroll_name = e.param_names()
            rep = params.get(repr_name, e.reprs[0] if len(e.reprs) == 1 else e.site.default.repr)
            choices[e.site.id] = SiteChoice(rep, 1 if rep == "for" else int(params.get(unroll_name, 1)))
        return Config(choices)

    def suggest(self, trial: Any) -> Config:
        """Sample a config from an ``optuna.Trial``; unroll is conditional on the representation."""
        choices = {}
        for e in self.entries:
            repr_name, unroll_name = e.param_names()
            rep = trial.suggest_categorical(repr_name, list(e.reprs))
            unroll = 1
            if rep != "for":
                unroll = trial.suggest_categorical(unroll_name, list(e.unrolls))
            choices[e.site.id] = SiteChoice(rep, int(unroll))
        return Config(choices)

    def describe(self) -> list[dict[str, Any]]:
        return [
            {"site": e.site.id, "kind": e.site.kind, "length": e.site.length,
             "reprs": list(e.reprs), "unrolls": list(e.unrolls), "choices": len(e.choices)}
            for e in self.entries
        ]
