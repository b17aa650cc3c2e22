"""A second process: where a confirmed winner's lead over the default could be one process's,
the contenders that beat the default are measured again in a fresh worker (`autotune.study._confirm`
runs it; this module says when and which). The rule and why it holds:
``docs/explanation/confirmation.md``.
"""

from __future__ import annotations

from fractions import Fraction

from autotune import select as _select
from autotune.program._config import Config
from autotune.select import Point, point_of
from autotune.select._objective import Objective

SECOND_PROCESS_LEAD = 1.5
"""A winner that stays cheaper than the default in every paired round with its calls this many
times slower is not measured again in a second process (:func:`holds_anywhere`): on the CPU a
program's runtime moves between processes by up to 1.3x (below), so such a lead holds in any of
them. Only the runtime is scaled: a compile's CPU seconds do not move with the process (its noise
is confirmation's compiled rounds' to settle), so a lead made of compile seconds needs no second
process. Measured: docs/results/tuning-wall.md."""

PLATFORM_LEAD = {"tpu": 1.05}
"""The lead that needs no second process where a platform's runtimes move less between processes
than the CPU's: a TPU v5e's default/tuned ratios across fresh processes read 1.148-1.165 and
3.040-3.110 (docs/results/tpu.md: 1.5% and 2.3% apart); a platform not named here takes
:data:`SECOND_PROCESS_LEAD`."""


def lead_needed(platform: str) -> float:
    """The lead over the default in every paired round past which a winner needs no second process on ``platform``."""
    return PLATFORM_LEAD.get(platform, SECOND_PROCESS_LEAD)


def second_process(
    points: list[Point], default: Config, objective: Objective, needed: float = SECOND_PROCESS_LEAD
) -> list[Config]:
    """The contenders to measure again in a second, fresh process: when the winner is not the
    default and its lead could be one process's (under ``needed``, :func:`lead_needed`, in some
    paired round), every contender that beats the default (any of them could win once those rounds
    count); empty when the default stays or the lead holds in any process."""
    d = point_of(points, default)
    chosen = _select.winner(points, objective, default)
    if chosen is None or d is None or chosen.config == default:
        return []
    if holds_anywhere(chosen, d, objective, needed):
        return []
    return [p.config for p in points if p is not d and _select.beats(p, d, objective)]


def holds_anywhere(winner: Point, default: Point, objective: Objective, needed: float) -> bool:
    """Whether the winner's lead over the default holds in any process: in every paired round (their
    medians where the rounds do not pair) it stays no dearer than the default with its calls ``needed``
    times slower. A round pairs the calls only: each side's compile is its median over the rounds,
    since a compile's CPU seconds do not move with the process and one round's compile sample is
    noise the rounds' median settles (on a TPU v5e one config's compile read 0.39-0.48 CPU s within
    one process, a tenth of a whole cost, which would send a 1.13x lead to a second process that
    costs a chip's close and open). Under tier-up, whose charge mixes compile and calls, its whole
    cost must lead by ``needed`` (:func:`lead`).

    Example::

        >>> w, d = Point(Config({"l": {"repr": "for"}}), 0.8, 1e-4), Point(Config({}), 1.0, 1e-4)
        >>> holds_anywhere(w, d, Objective(expected_calls=1000), 1.5)  # 0.95 s against 1.1 s: compile leads
        True
        >>> holds_anywhere(w, d, Objective(expected_calls=100_000), 1.5)  # 15.8 s against 11 s
        False
    """
    if objective.tier_up:
        return lead(winner, default, objective) >= needed

    def lines(p: Point, runs) -> list[tuple[Fraction, Fraction]]:
        return [objective.line(p.compile_cost_s, r, p.load_cost_s) for r in runs]

    mine, theirs = lines(winner, [r for _, r in winner.rounds]), lines(default, [r for _, r in default.rounds])
    if not mine or len(mine) != len(theirs):
        mine, theirs = lines(winner, [winner.run_cost_s]), lines(default, [default.run_cost_s])
    n, slower = Fraction(objective.expected_calls), Fraction(needed)
    return all(a + slower * b * n <= c + d * n for (a, b), (c, d) in zip(mine, theirs))


def lead(winner: Point, default: Point, objective: Objective) -> float:
    """The winner's smallest lead over the default in a paired round: the default's round cost
    over the winner's (their medians where the rounds do not pair)."""
    mine, theirs = _select.round_costs(winner, objective, default), _select.round_costs(default, objective)
    if len(mine) != len(theirs):
        mine, theirs = [_select.cost(winner, objective, default)], [_select.cost(default, objective)]
    return min((d / w if w > 0 else float("inf")) for w, d in zip(mine, theirs))
