"""`Config`: the representation and unroll chosen for each loop site."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ._errors import ConfigError

REPRS = ("scan", "for", "fori")


@dataclass(frozen=True, order=True)
class SiteChoice:
    """How one loop site is emitted.

    Arguments:
        repr: ``"scan"`` (``lax.scan`` with ``unroll``), ``"for"`` (fully unrolled;
            for an ``at.loop`` a Python ``for`` traced once per iteration) or
            ``"fori"`` (``lax.fori_loop``; only for loops without stacked outputs).
        unroll: iterations per rolled step for ``"scan"``/``"fori"``; ignored by ``"for"``.
    """

    repr: str = "scan"
    unroll: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"repr": self.repr, "unroll": self.unroll}

    def __str__(self) -> str:
        return "for" if self.repr == "for" else f"{self.repr}x{self.unroll}"


def _parse_choice(site_id: str, value: Any) -> SiteChoice:
    if isinstance(value, SiteChoice):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"Config entry for site {site_id!r} must be a dict like "
            f'{{"repr": "scan", "unroll": 4}}, got {type(value).__name__} {value!r}.'
        )
    unknown = set(value) - {"repr", "unroll"}
    if unknown:
        raise ConfigError(
            f"Config entry for site {site_id!r} has unknown keys {sorted(unknown)}; "
            'the valid keys are "repr" and "unroll".'
        )
    rep = value.get("repr", "scan")
    if rep not in REPRS:
        raise ConfigError(
            f"Config entry for site {site_id!r} has repr={rep!r}; valid choices are {list(REPRS)}."
        )
    unroll = value.get("unroll", 1)
    if isinstance(unroll, bool) or not isinstance(unroll, int):
        if isinstance(unroll, float) and math.isfinite(unroll) and unroll == int(unroll):
            unroll = int(unroll)
        else:
            raise ConfigError(
                f"Config entry for site {site_id!r} has unroll={unroll!r}; "
                "unroll must be a positive integer."
            )
    if unroll < 1:
        raise ConfigError(
            f"Config entry for site {site_id!r} has unroll={unroll}; unroll must be >= 1 "
            '(use {"repr": "for"} to unroll fully).'
        )
    return SiteChoice(rep, unroll)


class Config(Mapping):
    """An immutable mapping ``site_id -> SiteChoice``; sites it omits keep their default.

    Configs compare equal by value, hash by value, and have a deterministic string
    form, so they can key dictionaries and round-trip through JSON::

        >>> c = Config.from_dict({"algo": {"repr": "for"}, "algo/scan@x.py:3": {"unroll": 4}})
        >>> Config.from_dict(json.loads(json.dumps(c.to_dict()))) == c
        True
    """

    __slots__ = ("_choices",)

    def __init__(self, choices: Mapping[str, Any] | None = None):
        parsed = {}
        for site_id, value in (choices or {}).items():
            if not isinstance(site_id, str) or not site_id:
                raise ConfigError(f"Config keys must be non-empty site id strings, got {site_id!r}.")
            parsed[site_id] = _parse_choice(site_id, value)
        self._choices = dict(sorted(parsed.items()))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | Config | None) -> Config:
        if isinstance(d, Config):
            return d
        if d is not None and not isinstance(d, Mapping):
            raise ConfigError(f"A config must be a dict of site id -> choice, got {type(d).__name__}.")
        return cls(d)

    @classmethod
    def from_json(cls, text: str) -> Config:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as e:
            raise ConfigError(f"Config JSON is malformed: {e}.") from None

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {k: v.to_dict() for k, v in self._choices.items()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def __getitem__(self, site_id: str) -> SiteChoice:
        return self._choices[site_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._choices)

    def __len__(self) -> int:
        return len(self._choices)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Config):
            return self._choices == other._choices
        if isinstance(other, Mapping):
            try:
                return self == Config.from_dict(other)
            except ConfigError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._choices.items()))

    def __str__(self) -> str:
        if not self._choices:
            return "default"
        return ", ".join(f"{k}={v}" for k, v in self._choices.items())

    def __repr__(self) -> str:
        return f"Config({self.to_dict()!r})"
