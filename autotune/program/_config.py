"""`Config`: the representation and unroll chosen for each loop site, and its one notation.

The notation, used by the CLI, the report, the benchmarks and the docs alike:
``scan×4`` (``lax.scan(unroll=4)``; ``scan×1`` is the plain scan), ``for`` (fully
unrolled), ``fori×2`` (``lax.fori_loop(unroll=2)``), ``while×4`` (a while loop whose
body runs up to 4 times per iteration, extra steps guarded by ``select``) and
``while×4/cond`` (guarded by ``lax.cond``); a checkpointed loop body's rematerialisation
policy follows a ``+``: ``scan×4+dots``, ``for+nothing`` (no ``+``: the program's own policy).
:meth:`SiteChoice.parse` reads it back and also accepts an ASCII ``x`` for ``×``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune._errors import ConfigError
from autotune.program._xla import XlaChoice

REPRS = ("scan", "for", "fori", "while")
"""Every representation a config may name."""
LOOP_REPRS = ("scan", "for", "fori")
"""The representations of a scan-like site (``lax.scan``, ``lax.fori_loop``, ``at.loop``)."""
GUARDS = ("select", "cond")
"""How the extra body applications of an unrolled while loop are guarded."""

POLICIES = ("nothing", "dots", "dots_no_batch", "everything")
"""The rematerialisation policies a checkpointed loop body may be given, by name: JAX's
``nothing_saveable``, ``dots_saveable``, ``dots_with_no_batch_dims_saveable`` and
``everything_saveable`` (``jax.checkpoint_policies``)."""

_KEYS = ("repr", "unroll", "guard", "policy")
XLA_KEY = "@xla"
"""The reserved key of a config's JSON that holds its XLA options (absent when it has none)."""
_NOTATION = re.compile(
    r"^(?:(?P<for>for)|(?P<repr>scan|fori|while)(?:\s*[×x]\s*(?P<unroll>\d+))?(?:\s*/\s*(?P<guard>select|cond))?)"
    r"(?:\s*\+\s*(?P<policy>\w+))?$"
)


@dataclass(frozen=True, order=True)
class SiteChoice:
    """How one loop site is emitted.

    Arguments:
        repr: ``"scan"`` (``lax.scan`` with ``unroll``), ``"for"`` (fully unrolled;
            for an ``at.loop`` a Python ``for`` traced once per iteration),
            ``"fori"`` (``lax.fori_loop``; only for loops without stacked outputs) or
            ``"while"`` (only for ``lax.while_loop`` sites).
        unroll: iterations per rolled step for ``"scan"``/``"fori"``, body applications
            per iteration for ``"while"``; ignored by ``"for"``.
        guard: only for ``"while"`` with ``unroll > 1``: ``"select"`` (every extra
            application is computed and discarded once the predicate is false; the
            default) or ``"cond"`` (skipped with ``lax.cond``). It is None otherwise.
        policy: only for a loop whose body is checkpointed (``jax.checkpoint``): the
            rematerialisation policy its checkpointed calls get, a name of :data:`POLICIES`;
            None keeps the program's own.

    Example::

        >>> str(SiteChoice("while", 4, "cond")), SiteChoice.parse("scan x 4")
        ('while×4/cond', SiteChoice(repr='scan', unroll=4, guard=None, policy=None))
        >>> str(SiteChoice("scan", 4, policy="dots")), SiteChoice.parse("for+nothing").policy
        ('scan×4+dots', 'nothing')
    """

    repr: str = "scan"
    unroll: int = 1
    guard: str | None = None
    policy: str | None = None

    def __post_init__(self):
        rep, unroll, guard = checked_choice(self.repr, self.unroll, self.guard, "A site choice")
        object.__setattr__(self, "unroll", unroll)
        object.__setattr__(self, "guard", guard)
        checked_policy(self.policy, "A site choice")

    def to_dict(self) -> dict[str, Any]:
        """``{"repr", "unroll"}``, plus ``"guard"`` when one is set (an unrolled while) and
        ``"policy"`` when one is chosen."""
        d: dict[str, Any] = {"repr": self.repr, "unroll": self.unroll}
        if self.guard is not None:
            d["guard"] = self.guard
        if self.policy is not None:
            d["policy"] = self.policy
        return d

    def __str__(self) -> str:
        text = "for" if self.repr == "for" else f"{self.repr}×{self.unroll}"
        text = f"{text}/cond" if self.guard == "cond" else text
        return f"{text}+{self.policy}" if self.policy is not None else text

    @classmethod
    def parse(cls, text: str) -> SiteChoice:
        """Read the notation of :meth:`__str__` back (``x`` may stand for ``×``).

        A bare ``scan``, ``fori`` or ``while`` means unroll 1; ``while×4/select`` is
        accepted and equals ``while×4``.
        """
        if not isinstance(text, str):
            raise ConfigError(f"A site choice must be text like 'scan×4', got {type(text).__name__} {text!r}.")
        m = _NOTATION.match(text.strip())
        if m is None:
            raise ConfigError(
                f"Cannot read the site choice {text!r}; write one of 'for', 'scan×K', 'fori×K', "
                "'while×K' or 'while×K/cond' (K a positive integer; 'x' works for '×'), optionally "
                f"followed by '+POLICY' (one of {list(POLICIES)})."
            )
        where = f"The site choice {text!r}"
        policy = checked_policy(m["policy"], where)
        if m["for"]:
            return cls("for", policy=policy)
        return cls(*checked_choice(m["repr"], int(m["unroll"] or 1), m["guard"], where), policy=policy)


def checked_choice(rep: Any, unroll: Any, guard: Any, where: str) -> tuple[str, int, str | None]:
    """THE rules of one site choice: ``(repr, unroll, guard)`` checked and normalised (an unrolled
    while's guard defaults to ``"select"``; any other choice has none), or a :class:`ConfigError`
    that starts with ``where`` (who gave it: a config entry, the notation, a :class:`SiteChoice`)."""
    if not isinstance(rep, str) or rep not in REPRS:
        raise ConfigError(f"{where} has repr={rep!r}; valid choices are {list(REPRS)}.")
    if isinstance(unroll, bool) or not isinstance(unroll, int):
        if not (isinstance(unroll, float) and math.isfinite(unroll) and unroll == int(unroll)):
            raise ConfigError(f"{where} has unroll={unroll!r}; unroll must be a positive integer.")
        unroll = int(unroll)
    if unroll < 1:
        raise ConfigError(f'{where} has unroll={unroll}; unroll must be >= 1 (use {{"repr": "for"}} to unroll fully).')
    if guard is not None and rep != "while":
        raise ConfigError(
            f'{where} has guard={guard!r} with repr={rep!r}; a guard applies only to repr "while". Remove it.'
        )
    if guard is not None and (not isinstance(guard, str) or guard not in GUARDS):
        raise ConfigError(f"{where} has guard={guard!r}; valid guards are {list(GUARDS)}.")
    if rep != "while" or unroll == 1:  # while×1 is the original loop: there is nothing to guard
        return rep, unroll, None
    return rep, unroll, guard or "select"


def checked_policy(policy: Any, where: str) -> str | None:
    """THE rule of a choice's policy: None or a name of :data:`POLICIES`, else a
    :class:`ConfigError` that starts with ``where``."""
    if policy is not None and (not isinstance(policy, str) or policy not in POLICIES):
        raise ConfigError(f"{where} has policy={policy!r}; valid policies are {list(POLICIES)} (or none).")
    return policy


def misfit(
    choice: SiteChoice, kind: str, length: int | None, has_ys: bool, effects: bool = False, checkpointed: bool = False
) -> tuple[str, str] | None:
    """THE rule of which choice fits which site: None when ``choice`` can be emitted at a site of
    ``kind`` (``"while"``, or a static loop of ``length`` steps, stacking outputs when ``has_ys``,
    with side effects in its body when ``effects``, a checkpointed body when ``checkpointed``),
    else ``(field, why)``: the choice's field at fault (``"repr"``, ``"unroll"``, ``"guard"``,
    ``"policy"``) and why. The rewrite and the cache's entry check both ask it.

    Example::

        >>> misfit(SiteChoice("scan", 16), "scan", 8, has_ys=False)[0]
        'unroll'
    """
    if choice.policy is not None and not checkpointed:
        return "policy", (
            f"{choice.policy!r} applies only to a loop whose body is checkpointed (jax.checkpoint); "
            "this one's is not: remove the policy"
        )
    if kind == "while":
        if choice.repr != "while":
            return "repr", (
                f'"{choice.repr}" does not fit a site of kind "while" (a while loop: its trip count is only known '
                'at run time); its choices are {"repr": "while", "unroll": k, "guard": "select" | "cond"}'
            )
        if choice.guard == "select" and effects:
            return "guard", (
                '"select" would run the body\'s side effects (callbacks, prints) on the discarded steps; '
                'use "guard": "cond"'
            )
        return None
    if choice.repr == "while":
        valid = "'scan' and 'for'" if has_ys else "'scan', 'for' and 'fori'"
        return "repr", (
            f'"while" does not fit a site of kind "{kind}" (a loop with a static trip count of {length}); '
            f"valid reprs for it are {valid}"
        )
    if choice.repr == "fori" and has_ys:
        return (
            "repr",
            "\"fori\" does not fit a site with stacked outputs (has_ys); valid reprs for it are 'scan' and 'for'",
        )
    if choice.repr != "for" and length is not None and choice.unroll > max(1, length):
        return "unroll", (
            f"is {choice.unroll}, more than the site's length {length}; "
            f"choose unroll in 1..{max(1, length)} or repr 'for'"
        )
    return None


def canonical_json(value: Any) -> str:
    """The one canonical JSON text: sorted keys, no spaces, no NaN or Infinity (a ``ValueError``).

    Example::

        >>> canonical_json({"b": 1, "a": [1.5, None]})
        '{"a":[1.5,null],"b":1}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def scan_unroll(choice: SiteChoice, length: int) -> int:
    """The ``unroll`` a scan of ``length`` steps is emitted with under ``choice``.

    ``"for"`` is ``unroll=length``; any other factor is clamped to ``1..length``.
    Both ``at.loop`` and the rewriter use it, so the two never disagree.
    """
    top = max(1, length)
    return top if choice.repr == "for" else max(1, min(choice.unroll, top))


def _parse_choice(site_id: str, value: Any) -> SiteChoice:
    if isinstance(value, SiteChoice):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"Config entry for site {site_id!r} must be a dict like "
            f'{{"repr": "scan", "unroll": 4}}, got {type(value).__name__} {value!r}.'
        )
    unknown = set(value) - set(_KEYS)
    if unknown:
        raise ConfigError(
            f"Config entry for site {site_id!r} has unknown keys {sorted(map(str, unknown))}; "
            'the valid keys are "repr", "unroll", (for "while") "guard" and (for a checkpointed body) "policy".'
        )
    where = f"Config entry for site {site_id!r}"
    rep, unroll, guard = checked_choice(value.get("repr", "scan"), value.get("unroll", 1), value.get("guard"), where)
    return SiteChoice(rep, unroll, guard, checked_policy(value.get("policy"), where))


class Config(Mapping):
    """An immutable mapping ``site_id -> SiteChoice`` (sites it omits keep their default), plus the
    XLA options of the function's compile (:attr:`xla`, an :class:`XlaChoice`; empty by default).

    Iteration, ``len`` and ``[]`` are the sites only; ``bool(config)`` is True when a site or an
    XLA option is set. Configs compare equal by value, hash by value, and have a deterministic
    string form, so they can key dictionaries and round-trip through JSON (the XLA options under
    the reserved key ``"@xla"``, absent when empty)::

        >>> c = Config.from_dict({"algo": {"repr": "for"}, "algo/scan@x.py:3": {"unroll": 4}})
        >>> Config.from_dict(json.loads(json.dumps(c.to_dict()))) == c
        True
        >>> str(c), str(Config(xla="xla:O1")), Config(xla="xla:O1").to_json()
        ('algo=for, algo/scan@x.py:3=scan×4', 'xla:O1', '{"@xla":["O1"]}')
    """

    __slots__ = ("_choices", "xla")

    def __init__(self, choices: Mapping[str, Any] | None = None, xla: XlaChoice | str | Sequence[str] | None = None):
        parsed = {}
        for site_id, value in (choices or {}).items():
            if site_id == XLA_KEY:
                if xla is None:
                    xla = value
                continue
            if not isinstance(site_id, str) or not site_id:
                raise ConfigError(f"Config keys must be non-empty site id strings, got {site_id!r}.")
            parsed[site_id] = _parse_choice(site_id, value)
        self._choices = dict(sorted(parsed.items()))
        self.xla: XlaChoice = XlaChoice.parse(xla)

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

    def with_xla(self, xla: XlaChoice | str | None) -> Config:
        """This config's site choices with the XLA options ``xla``."""
        return Config(self._choices, xla=XlaChoice.parse(xla))

    def to_dict(self) -> dict[str, Any]:
        """Site id -> choice dict, and ``"@xla": [option names]`` when XLA options are set."""
        out: dict[str, Any] = {k: v.to_dict() for k, v in self._choices.items()}
        if self.xla:
            out[XLA_KEY] = list(self.xla.names)
        return out

    def to_json(self) -> str:
        """THE canonical text of a config (:func:`canonical_json` of :meth:`to_dict`): its identity in
        a study's trials, in tie-breaks and wherever a config is written as text."""
        return canonical_json(self.to_dict())

    def label(self, sites: Sequence[Any] = ()) -> str:
        """A short readable form: ``algo_iters=for, scan@f.py:53=scan×2`` (see :func:`config_label`)."""
        return config_label(self, sites)

    def __getitem__(self, site_id: str) -> SiteChoice:
        return self._choices[site_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._choices)

    def __len__(self) -> int:
        return len(self._choices)

    def __bool__(self) -> bool:
        return bool(self._choices) or bool(self.xla)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Config):
            return self._choices == other._choices and self.xla == other.xla
        if isinstance(other, Mapping):
            try:
                return self == Config.from_dict(other)
            except ConfigError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        if self.xla:
            return hash((tuple(self._choices.items()), self.xla))
        return hash(tuple(self._choices.items()))

    def __str__(self) -> str:
        sites = ", ".join(f"{k}={v}" for k, v in self._choices.items())
        if not self.xla:
            return sites or "default"
        return f"{sites}, {self.xla}" if sites else str(self.xla)

    def __repr__(self) -> str:
        return f"Config({self.to_dict()!r})"


def _site_field(site: Any, name: str) -> Any:
    return site.get(name) if isinstance(site, Mapping) else getattr(site, name, None)


def site_label(site: Any) -> str:
    """An ``at.loop``'s name, else the last part of the site id (``scan@file.py:53``).

    ``site`` is a :class:`LoopSite` or its ``to_dict()`` form.
    """
    return _site_field(site, "name") or str(_site_field(site, "id") or "?").rsplit("/", 1)[-1]


def choice_label(choice: SiteChoice | Mapping[str, Any]) -> str:
    """The notation of one choice given as a :class:`SiteChoice` or its dict."""
    if isinstance(choice, SiteChoice):
        return str(choice)
    try:
        return str(_parse_choice("?", choice))
    except ConfigError:  # a foreign or hand-edited record: show it, do not fail a report
        return json.dumps(choice, sort_keys=True, default=str)


def config_label(config: Config | Mapping[str, Any], sites: Sequence[Any] = ()) -> str:
    """A short readable form of a config (sites in program order, then any others).

    Arguments:
        config: a :class:`Config` or its ``to_dict()`` form.
        sites: the program's sites (:class:`LoopSite` or dicts): they give the order and
            the short names (an ``at.loop``'s name, else the last part of the id).

    Returns:
        e.g. ``"algo_iters=for, scan@f.py:53=scan×2"`` (its XLA options last: ``..., xla:O1``),
        or ``"default"`` for an empty config.
    """
    xla = xla_label(config)
    ids = [_site_field(s, "id") for s in sites]
    names = {i: site_label(s) for i, s in zip(ids, sites)}
    keys = [k for k in config if k != XLA_KEY]
    order = [i for i in ids if i in keys] + sorted(k for k in keys if k not in names)
    parts = [f"{names.get(k, k.rsplit('/', 1)[-1])}={choice_label(config[k])}" for k in order]
    parts += [xla] if xla else []
    return ", ".join(parts) if parts else "default"


def xla_label(config: Config | Mapping[str, Any]) -> str:
    """The notation of a config's XLA options (``xla:O1``), or ``""`` when it has none; a
    foreign record's unreadable ``"@xla"`` value is shown as it is."""
    if isinstance(config, Config):
        return str(config.xla) if config.xla else ""
    raw = config.get(XLA_KEY) if isinstance(config, Mapping) else None
    if not raw:
        return ""
    try:
        return str(XlaChoice.parse(raw))
    except ConfigError:
        return f"xla:{raw}"
