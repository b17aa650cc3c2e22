"""The search space of a program: per site a representation, an unroll factor,
for a while loop a guard, for a checkpointed loop body a rematerialisation policy; and how
many body copies each config emits.

Unroll factors are remainder-aware. ``scan(unroll=k)`` over ``L`` steps emits
``k + L mod k`` copies of the body (``k`` in the rolled loop, the remainder after it),
so a power of two that leaves a big remainder costs compile time for nothing
(``L=31, k=16``: 31 copies, as many as the full unroll). For each power of two
``t = 2, 4, 8, ... < L`` the space takes one factor ``k`` from the band
``[t/√2, t·√2]``: the one nearest to ``t`` (in ratio) among those whose remainder
wastes at most an eighth (``L mod k <= k/8``), else the one with the smallest
remainder (nearest on a tie). Factors that emit ``L`` copies or more are dropped:
full unroll (``"for"``) is offered anyway, with no loop left. So a site keeps about
``log2(L)`` factors spread geometrically, plus 1 and its default unroll. ``L=31``
gives 1, 2, 5, 10, 15 (1, 3, 6, 11, 16 copies) where powers of two gave 1, 2, 4, 8, 16
(1, 3, 7, 15, 31 copies).
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from autotune.program._config import GUARDS, POLICIES, Config, SiteChoice
from autotune.program._rewrite import rewrite_error
from autotune.program._sites import LoopSite
from autotune.program._xla import PARAM as XLA_PARAM
from autotune.program._xla import XlaChoice

WHILE_UNROLLS = (1, 2, 4, 8)
"""Body applications per iteration offered for a while site (its trip count is unknown)."""


def copies_of_unroll(length: int, unroll: int) -> int:
    """Body copies ``lax.scan(length=length, unroll=unroll)`` emits: ``k + L mod k``, at most ``L``."""
    if length <= 0:
        return 0
    k = max(1, unroll)
    return length if k >= length else k + length % k


def _pick(length: int, target: int) -> int | None:
    lo, hi = max(2, math.ceil(target / math.sqrt(2))), min(length - 1, math.floor(target * math.sqrt(2)))
    band = [k for k in range(lo, hi + 1) if copies_of_unroll(length, k) < length]
    if not band:
        return None
    near = lambda k: (abs(math.log(k / target)), k)  # noqa: E731
    efficient = [k for k in band if 8 * (length % k) <= k]
    if efficient:
        return min(efficient, key=near)
    return min(band, key=lambda k: (length % k, *near(k)))


def unroll_options(length: int, default: int = 1) -> list[int]:
    """Remainder-aware unroll factors below the trip count, with 1 and ``default``.

    Full unroll is the ``"for"`` choice, so it is not listed. See the module docstring
    for the rule.

    Example::

        >>> unroll_options(31), unroll_options(100), unroll_options(8)
        ([1, 2, 5, 10, 15], [1, 2, 4, 9, 20, 32, 50], [1, 2, 4])
    """
    options = {1}
    if 1 <= default < length:
        options.add(default)
    t = 2
    while t < length:
        k = _pick(length, t)
        if k is not None:
            options.add(k)
        t *= 2
    return sorted(options)


def body_copies(site: LoopSite, choice: SiteChoice) -> int:
    """Copies of ``site``'s body that ``choice`` emits, for one execution of the site.

    ``"for"`` emits ``length`` copies, ``scan``/``fori`` with unroll ``k`` emit
    ``k + length mod k`` (at most ``length``), a while loop with unroll ``k`` emits ``k``
    (and ``k`` copies of its predicate: ``k - 1`` guards and the loop's own).
    """
    if site.kind == "while":
        return max(1, choice.unroll)
    if choice.repr == "for":
        return max(0, site.length)
    return copies_of_unroll(site.length, choice.unroll)


@dataclass(frozen=True)
class SiteSpace:
    """The choices one site offers: representations, unroll factors, while guards and, for a
    checkpointed body, rematerialisation policies (None, the program's own, first)."""

    site: LoopSite
    reprs: tuple[str, ...]
    unrolls: tuple[int, ...]
    guards: tuple[str, ...] = ()
    policies: tuple[str | None, ...] = (None,)

    @property
    def choices(self) -> list[SiteChoice]:
        out = []
        for rep in self.reprs:
            if rep == "for":
                out.append(SiteChoice("for"))
            elif rep == "while":
                for u in self.unrolls:
                    out.extend([SiteChoice("while", 1)] if u == 1 else [SiteChoice("while", u, g) for g in self.guards])
            else:
                out.extend(SiteChoice(rep, u) for u in self.unrolls)
        return [SiteChoice(c.repr, c.unroll, c.guard, p) for p in self.policies for c in out]

    def param_names(self) -> tuple[str, str]:
        """The Optuna parameter names of this site's representation and unroll."""
        return f"{self.site.id}.repr", f"{self.site.id}.unroll"

    @property
    def guard_param(self) -> str:
        """The Optuna parameter name of a while site's guard (set only when unroll > 1)."""
        return f"{self.site.id}.guard"

    @property
    def policy_param(self) -> str:
        """The Optuna parameter name of a checkpointed site's policy (its value :data:`OWN`
        for the program's own)."""
        return f"{self.site.id}.policy"


OWN = "own"
"""The Optuna value of a site's policy parameter that keeps the program's own policy."""


def policy_options(site: LoopSite) -> tuple[str | None, ...]:
    """The policies a site offers: None (the program's own) and every other one of
    :data:`POLICIES` when its body is checkpointed, else None alone."""
    if site.policy is None:
        return (None,)
    return (None, *(p for p in POLICIES if p != site.policy))


def _site_space(s: LoopSite) -> SiteSpace:
    if s.kind == "while":
        # A select guard would run a side-effecting body on discarded steps.
        return SiteSpace(s, ("while",), WHILE_UNROLLS, ("cond",) if s.effects else GUARDS, policy_options(s))
    reprs = ("scan", "for") if s.kind == "scan" or s.has_ys else ("scan", "for", "fori")
    default_unroll = s.default.unroll if s.default.repr != "for" else 1
    return SiteSpace(s, reprs, tuple(unroll_options(s.length, default_unroll)), (), policy_options(s))


def _default_only(e: SiteSpace) -> SiteSpace:
    d = e.site.default
    return SiteSpace(e.site, (d.repr,), (max(1, d.unroll),), (d.guard,) if d.guard else ())


def probe_choices(e: SiteSpace, first: SiteChoice | None = None) -> list[SiteChoice]:
    """Up to two choices of a site other than its default, ``first`` (when given) first and then
    the most different one (another representation where there is one): a rewrite that fails
    on both fails for a reason that is not particular to the choice."""
    others = [c for c in e.choices if c != e.site.default]
    out = [first] if first is not None and first != e.site.default else []
    lead = out[0] if out else (others[0] if others else None)
    if lead is None:
        return []
    rest = [c for c in others if c != lead]
    rest.sort(key=lambda c: (c.repr == lead.repr, c.repr == "for", c.unroll))  # another representation first
    return [lead, *rest[:1]]


class Space:
    """Every tunable site of a program and the choices each offers.

    A site of length <= 1 has nothing to tune and is left out. An automatic scan
    offers ``scan`` (remainder-aware unroll factors, see :func:`unroll_options`) and
    ``for`` (fully unrolled); an ``at.loop`` also offers ``fori`` when it stacks no
    outputs; a while site offers ``while`` with unroll 1, 2, 4, 8, each unroll above 1
    with the guard ``select`` or ``cond`` (only ``cond`` when the body has side effects). A
    site whose body is checkpointed offers each of those with its own policy and with every
    other one of JAX's (:func:`policy_options`).

    Example::

        >>> space = Space(at.sites(f, x))
        >>> len(space), space.default(), space.copies(space.default())
    """

    def __init__(self, sites: list[LoopSite], xla: tuple[XlaChoice, ...] = ()):
        self.all_sites = list(sites)
        self.sites = [s for s in sites if s.length is None or s.length > 1]
        self.entries: list[SiteSpace] = [_site_space(s) for s in self.sites]
        # The XLA dimension (`_xla.choices`, the default first): absent unless the study searches it.
        self.xla: tuple[XlaChoice, ...] = tuple(xla) if len(xla) > 1 else ()

    def __len__(self) -> int:
        return self.product_size()

    def product_size(self) -> int:
        """Every combination of the sites' choices and the XLA choices (a staged space measures fewer)."""
        n = max(1, len(self.xla))
        for e in self.entries:
            n *= len(e.choices)
        return n

    def default(self) -> Config:
        return Config({e.site.id: e.site.default for e in self.entries})

    def leanest(self) -> Config:
        """The config likeliest to need the least device memory: every site rolled (its default's
        representation where that is a loop, else ``scan``; unroll 1) and, where its body is
        checkpointed, the policy that saves nothing. A study under a memory budget its default is
        over measures it next (`autotune.study._search`)."""
        choices = {}
        for e in self.entries:
            d = e.site.default
            rep = d.repr if d.repr in e.reprs and d.repr != "for" else e.reprs[0]
            policy = None if e.site.policy in (None, "nothing") else "nothing"
            choices[e.site.id] = SiteChoice(rep, 1, None, policy)
        return Config(choices)

    def configs(self) -> Iterator[Config]:
        """Every config, the default first (for each XLA choice, every site combination)."""
        default = self.default()
        yield default
        for xla in self.xla or (XlaChoice(),):
            for combo in itertools.product(*[e.choices for e in self.entries]):
                config = Config({e.site.id: c for e, c in zip(self.entries, combo)}, xla=xla)
                if config != default:
                    yield config

    def copies(self, config: Config) -> dict[str, int]:
        """Copies of each site's body in the program ``config`` emits.

        Multiplied along the nesting: a site inside a fully unrolled parent of length 8
        has 8 times its own copies. Every site of the program is listed (those with
        nothing to tune at their default), so a model of compile time can sum them.
        """
        config = Config.from_dict(config)
        by_id = {s.id: s for s in self.all_sites}
        own = {s.id: body_copies(s, config.get(s.id, s.default)) for s in self.all_sites}
        total: dict[str, int] = {}
        for s in self.all_sites:  # outermost first: a parent is done before its children
            parent = by_id.get(s.parent) if s.parent else None
            total[s.id] = own[s.id] * (total[parent.id] if parent is not None else 1)
        return total

    def pinned(self, site_ids) -> Space:
        """This space with the sites ``site_ids`` held at their default (the only choice left).

        A site the rewrite cannot re-emit at all (see :func:`unrewritable`) is
        pinned so that a search stops proposing configs that fail the same way.
        """
        ids = set(site_ids)
        out = copy.copy(self)  # a staged space (`autotune.program._staged`) stays one
        out.entries = [e if e.site.id not in ids else _default_only(e) for e in self.entries]
        return out

    def with_defaults(self, config: Config, site_ids) -> Config:
        """``config`` with the sites ``site_ids`` set to their default (its XLA options kept)."""
        ids = set(site_ids)
        return Config(
            {
                e.site.id: e.site.default if e.site.id in ids else config.get(e.site.id, e.site.default)
                for e in self.entries
            },
            xla=config.xla,
        )

    def to_params(self, config: Config) -> dict[str, Any]:
        """Optuna params that reproduce ``config`` (a trial is created with them)."""
        params: dict[str, Any] = {}
        for e in self.entries:
            choice = config.get(e.site.id, e.site.default)
            repr_name, unroll_name = e.param_names()
            params[repr_name] = choice.repr
            if choice.repr != "for":
                params[unroll_name] = choice.unroll
            if choice.guard is not None:
                params[e.guard_param] = choice.guard
            if len(e.policies) > 1:
                params[e.policy_param] = choice.policy or OWN
        if self.xla:
            params[XLA_PARAM] = str(config.xla)
        return params

    def param_choices(self) -> dict[str, list[Any]]:
        """Every Optuna param :meth:`suggest` may ask for, with its choices."""
        out: dict[str, list[Any]] = {}
        for e in self.entries:
            repr_name, unroll_name = e.param_names()
            out[repr_name], out[unroll_name] = list(e.reprs), list(e.unrolls)
            if e.guards:
                out[e.guard_param] = list(e.guards)
            if len(e.policies) > 1:
                out[e.policy_param] = [p or OWN for p in e.policies]
        if self.xla:
            out[XLA_PARAM] = [str(c) for c in self.xla]
        return out

    def from_params(self, params: dict[str, Any]) -> Config:
        """The config of a set of Optuna params (the inverse of :meth:`to_params`)."""
        choices = {}
        for e in self.entries:
            repr_name, unroll_name = e.param_names()
            rep = params.get(repr_name, e.reprs[0] if len(e.reprs) == 1 else e.site.default.repr)
            unroll = 1 if rep == "for" else int(params.get(unroll_name, 1))
            guard = params.get(e.guard_param) if rep == "while" and unroll > 1 else None
            policy = params.get(e.policy_param, OWN) if len(e.policies) > 1 else None
            choices[e.site.id] = SiteChoice(rep, unroll, guard, None if policy == OWN else policy)
        return Config(choices, xla=params.get(XLA_PARAM) if self.xla else None)

    def queued(self, fixed: dict[str, Any]) -> Space:
        """The space a queued trial whose params are ``fixed`` (``study.enqueue_trial``) is
        sampled from: this one."""
        return self

    def suggest(self, trial: Any) -> Config:
        """Sample a config from an ``optuna.Trial``; unroll is conditional on the
        representation, a while site's guard on its unroll being above 1; a checkpointed
        site's policy is always asked (jointly with its unroll)."""
        choices = {}
        for e in self.entries:
            repr_name, unroll_name = e.param_names()
            rep = trial.suggest_categorical(repr_name, list(e.reprs))
            unroll, guard = 1, None
            if rep != "for":
                unroll = int(trial.suggest_categorical(unroll_name, list(e.unrolls)))
            if rep == "while" and unroll > 1:
                guard = trial.suggest_categorical(e.guard_param, list(e.guards))
            policy = None
            if len(e.policies) > 1:
                policy = trial.suggest_categorical(e.policy_param, [p or OWN for p in e.policies])
            choices[e.site.id] = SiteChoice(rep, unroll, guard, None if policy == OWN else policy)
        xla = trial.suggest_categorical(XLA_PARAM, [str(c) for c in self.xla]) if self.xla else None
        return Config(choices, xla=xla)


def unrewritable(
    fn: Callable, args: tuple, kwargs: dict | None, jit_kwargs: dict | None, space: Any, config: Config | None = None
) -> dict[str, str]:
    """The sites of ``space`` the rewrite cannot re-emit at all: ``{site id: why}``.

    A site is unrewritable when the program, with only that site changed, fails to trace
    for two different choices of it (another representation where it has one) while the
    default traces. With ``config`` (a config that failed), only the sites it changes are
    tried, each first with its choice in ``config``; without, every site. Either way the whole
    config is traced first: one trace when it traces (as is usual), and nothing is blamed.

    Example::

        >>> space = Space(at.sites(f, x))
        >>> unrewritable(f, (x,), {}, {}, space)  # {} unless a loop cannot be re-emitted
        {}
    """
    entries = [e for e in space.entries if probe_choices(e)]
    if config is not None:
        entries = [e for e in entries if config.get(e.site.id, e.site.default) != e.site.default]
    every = config if config is not None else Config({e.site.id: probe_choices(e)[0] for e in entries})
    if not entries or rewrite_error(fn, args, kwargs, jit_kwargs, every) is None:
        return {}  # it traces: what failed (a compile, a run) is not the rewrite
    if rewrite_error(fn, args, kwargs, jit_kwargs, Config()) is not None:
        return {}  # the program fails as it is: no site is to blame
    found: dict[str, str] = {}
    for e in entries:
        first = config.get(e.site.id) if config is not None else None
        errors = []
        for choice in probe_choices(e, first):
            why = rewrite_error(fn, args, kwargs, jit_kwargs, Config({e.site.id: choice}))
            if why is None:
                break
            errors.append(why)
        else:
            if errors:
                found[e.site.id] = errors[0]
    return found
