"""Confirmation: re-measure the contenders side by side, so one noisy sample cannot win.

The contenders (one per lowered program, :func:`contenders`) are measured again in interleaved
rounds in one process, and a challenger that beats the default again in a fresh worker; each
becomes a :class:`autotune.select.Point` with paired per-round samples, which
:mod:`autotune.select` decides on. The rules and why they hold: ``docs/explanation/confirmation.md``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from autotune import select as _select
from autotune.measuring._measurement import Measurement
from autotune.measuring._runner import RunnerBase
from autotune.measuring._sampling import Sampling
from autotune.program._config import Config
from autotune.select import Point, point_of
from autotune.select._objective import Objective
from autotune.study._contenders import CALLS, PICK, by_program, contenders
from autotune.study._second import lead_needed, second_process

COMPILE_NOISE = 0.15
"""Relative compile-time noise assumed between two measurements of one config (at least)."""

ROUND_SAMPLING = 1 / 3
"""How long a confirmation round samples a contender's calls, as a share of a trial's sampling
(``TuneOptions.timing``'s ``target_s``): the rounds are paired and interleaved, and the rule takes
their median and their signs, so each needs only a share of a trial's samples. Measured:
docs/results/tuning-wall.md."""

SEARCH_COMPILE_NOISE = 1.0
"""How far two compile figures of the search may stand apart by noise alone (relative to the two):
they were taken minutes apart, under whatever load each moment had (one compile can take twice
another of the same program, `COMPILE_NOISE`'s note). Confirmation compiles its contenders again,
side by side, only where a difference that large could flip the decision; else it re-times the
executables the search kept and carries the search's compiles."""

BUILD_AHEAD = True
"""On an accelerator, compiled rounds build the next contender on the host's CPUs while this one
is timed on the device (one build at a time: `_Rounds.take`); on the CPU that compile would share
the cores the timed calls run on. Measured: docs/results/tuning-wall.md."""

STALL = 3.0
"""A round whose runtime exceeds this many times its contender's median over the process's
rounds (3 or more) was measured in a stall and is taken again, once: the sign test needs the
challenger to win enough of few rounds, so one round stalled by another process's load could
otherwise sink a challenger that wins every other round by far.
Measured: docs/results/design-figures.md#a-stalled-confirmation-round."""


def _sample(runner, config: Config, full: bool) -> tuple[Measurement | None, bool]:
    """One round's measurement of ``config`` and whether it compiled afresh (a full measure).
    Either samples the calls for :data:`ROUND_SAMPLING` of a trial's sampling where the runner
    says how it samples (a runner of `autotune.measuring._runner`), else as its trials do."""
    how = _round_sampling(runner)
    try:
        if not full:
            m = runner.retime(config, **how)
            if m is not None:
                return m, False
        return runner.measure(config, **how), True
    except KeyboardInterrupt:
        raise
    except Exception:
        return None, True


def _round_sampling(runner) -> dict[str, Sampling]:
    """``{"sampling": ...}`` for a runner of `autotune.measuring._runner`, else nothing (a
    :class:`autotune.Runner` of the user's samples as it does)."""
    if not isinstance(runner, RunnerBase):
        return {}
    return {"sampling": runner.sampling.replace(target_s=runner.sampling.target_s * ROUND_SAMPLING)}


def _rotated(configs: list[Config], r: int) -> list[Config]:
    """Round ``r``'s order: A B C, then B C A, then C A B ..."""
    return configs[r % len(configs) :] + configs[: r % len(configs)]


def compile_noise(first: Sequence[Point], searched: Sequence[Point]) -> float:
    """The relative compile noise to allow for: :data:`COMPILE_NOISE`, or the largest
    disagreement between a contender's compile in confirmation's round 1 and its compile in the
    search (``|a - b| / min(a, b)``) where that is larger. The search figure only sizes the noise:
    it never enters a decision.

    Example::

        >>> first = [Point(Config({}), 0.2, 1e-3)]
        >>> compile_noise(first, [Point(Config({}), 0.1, 1e-3)])
        1.0
    """
    searched_s = {p.config: p.compile_cost_s for p in searched}
    seen = [
        abs(a - b) / min(a, b)
        for p in first
        if (b := searched_s.get(p.config)) is not None and (a := p.compile_cost_s) > 0 and b > 0
    ]
    return max([COMPILE_NOISE, *seen])


def compile_could_flip(
    points: Sequence[Point], default: Config, objective: Objective, noise: float = COMPILE_NOISE
) -> bool:
    """Whether one compile sample's noise could change the decision: a contender whose cost is
    within ``noise`` of both one-off charges of the default's or of the winner's (each charge as
    the objective makes it, :meth:`Objective.line`'s intercept: the compile weighted, once per
    process unless later ones load from the persistent cache), so either its standing against the
    default or the choice between it and the winner could turn on one compile."""
    d = point_of(points, default)
    if d is None or objective.compile_weight <= 0:
        return False
    chosen = _select.winner(points, objective, default)
    anchors = [d] if chosen is None or chosen is d else [d, chosen]

    def one_off(q: Point) -> float:
        return float(objective.line(q.compile_cost_s, 0.0, q.load_cost_s)[0])

    def close(p: Point, a: Point) -> bool:
        return abs(_select.cost(p, objective) - _select.cost(a, objective)) < noise * (one_off(p) + one_off(a))

    return any(close(p, a) for a in anchors for p in points if p is not a)


Round = tuple[Measurement, bool]  # a round's measurement and whether it compiled afresh


class _Rounds:
    """The rounds of one process: every config's samples, round by round (None: it failed)."""

    def __init__(self, configs: list[Config], rounds: int, ahead: bool = False):
        self.configs = configs
        self.ahead = ahead  # compiled rounds: the next contender compiles while this one is timed
        self.samples: dict[Config, list[Round | None]] = {c: [None] * rounds for c in configs}
        self.each_round = False  # compiled again in every round (else round 1's compile is carried)
        self.out: set[Config] = set()  # challengers no later round can make a winner: not measured again

    def take(
        self,
        runner,
        rounds: range,
        full: bool,
        check: Callable[[], None],
        default: Config | None = None,
        race: bool = False,
        goal: Objective | None = None,
    ) -> None:
        """Measure rounds ``rounds`` (again, if taken before), interleaved. Compiled rounds with
        :attr:`ahead` have the runner prepare and build the next contender while this one is timed
        (one build at a time: a compile never runs beside another). With ``default``, the rounds stop
        once no challenger is left; with ``race`` too, :meth:`race` after each (at ``goal``)."""
        prefetch = getattr(runner, "prefetch", None) if full and self.ahead else None
        rounds = list(rounds)
        for k, r in enumerate(rounds):
            if default is not None and not self.challengers(default):
                break  # the default alone: no round left can change the decision
            this = self.order(r)
            after = self.order(rounds[k + 1])[:1] if k + 1 < len(rounds) else []
            for i, config in enumerate(this):
                check()
                if prefetch is not None:
                    prefetch((this[i : i + 2] + after)[:2], fresh=True)
                m, fresh = _sample(runner, config, full)
                self.samples[config][r] = None if m is None else (m, fresh)
            if default is not None and race:
                self.race(default, goal, r)
        if prefetch is not None:
            prefetch([])  # nothing left prepared

    def order(self, r: int) -> list[Config]:
        """Round ``r``'s contenders, in its order (:func:`_rotated`), less those left out."""
        return _rotated([c for c in self.configs if c not in self.out], r)

    def challengers(self, default: Config) -> list[Config]:
        """The contenders still measured, less the default."""
        return [c for c in self.configs if c != default and c not in self.out]

    def retake_stalls(self, runner, check: Callable[[], None]) -> None:
        """Take again, once, each round whose runtime was measured in a stall (:data:`STALL`): in
        the process's compile mode (re-timed, or compiled again when every round compiles)."""
        for config, samples in self.samples.items():
            runs = [s[0].run_cost_s for s in samples if s is not None]
            if len(runs) < 3:
                continue
            mid = statistics.median(runs)
            for r, got in enumerate(samples):
                if got is not None and got[0].run_cost_s > STALL * mid:
                    check()
                    m, fresh = _sample(runner, config, self.each_round)
                    if m is not None and got[1] and not fresh:  # a re-time keeps the round's own compile
                        m, fresh = got[0].replace(run_s=m.run_s, run_iqr_s=m.run_iqr_s, run_p10_s=m.run_p10_s), True
                    if m is not None:
                        samples[r] = (m, fresh)

    def race(self, default: Config, objective: Objective | None = None, r: int = 0) -> None:
        """Leave out of the later rounds each challenger that lost round ``r`` to the default: where
        the winner rule needs a challenger to win every round (3 of 3: `autotune.select.wins_needed`),
        no later round can make it a winner; its rounds so far stay its point's. It lost at every call
        count when the default dominated it (compiled no faster and ran no faster); with ``objective``
        (a confirmation that serves the tuned call count alone), when it cost no less there. A round
        whose runtime looks stalled (over :data:`STALL` times the challenger's fastest before it)
        rules nothing out: :meth:`retake_stalls` takes it again."""
        mine = self.samples.get(default)
        n = len(mine) if mine is not None and mine[r] is not None else 0
        if n == 0 or _select.wins_needed(n) < n:  # a challenger may lose a round and still win
            return
        at = self._index(default, r)
        d_compile, d_run = self.rows(default)[at]
        theirs = None if objective is None else _point(default, [self])
        bar = None if theirs is None else _select.round_costs(theirs, objective)[at]  # at the tuned call count
        for config in self.challengers(default):
            got = self.samples[config][r]
            if got is None:
                continue
            i = self._index(config, r)
            compile_s, run_s = self.rows(config)[i]
            before = [s[0].run_cost_s for s in self.samples[config][:r] if s is not None]
            if before and run_s > STALL * min(before):
                continue
            if compile_s >= d_compile and run_s >= d_run:
                self.out.add(config)
            elif bar is not None and _select.round_costs(_point(config, [self]), objective, theirs)[i] >= bar:
                self.out.add(config)

    def _index(self, config: Config, r: int) -> int:
        """Round ``r``'s place among ``config``'s rounds taken (:meth:`rows` leaves out the failed)."""
        return sum(1 for s in self.samples[config][:r] if s is not None)

    def rows(self, config: Config) -> list[tuple[float, float]]:
        """``[(compile_cost_s, run_cost_s), ...]``: each round's own compile, or round 1's where carried."""
        got = [s for s in self.samples[config] if s is not None]
        if not got:
            return []
        first = next((m.compile_cost_s for m, fresh in got if fresh), got[0][0].compile_cost_s)
        return [(m.compile_cost_s if self.each_round and fresh else first, m.run_cost_s) for m, fresh in got]


def _point(config: Config, processes: list[_Rounds], equivalent: tuple[Config, ...] = ()) -> Point | None:
    """A confirmed point: its rounds from every process it was measured in, paired by index."""
    mine = [rounds for rounds in processes if config in rounds.samples]
    rows = [row for rounds in mine for row in rounds.rows(config)]
    taken = [s for rounds in mine for s in rounds.samples[config] if s is not None]
    ms, fresh = [m for m, _ in taken], [m for m, compiled in taken if compiled]
    if not rows:
        return None

    def med(name: str, of: list[Measurement]) -> Any:
        values = [getattr(m, name) for m in of if getattr(m, name) is not None]
        return statistics.median(values) if values else None

    compiled = fresh or ms  # compile figures from the compiles confirmation took
    summary = Measurement(
        trace_s=med("trace_s", compiled),
        lower_s=med("lower_s", compiled),
        compile_s=med("compile_s", compiled),
        trace_cpu_s=med("trace_cpu_s", compiled),
        lower_cpu_s=med("lower_cpu_s", compiled),
        compile_cpu_s=med("compile_cpu_s", compiled),
        run_s=med("run_s", ms),
        run_iqr_s=med("run_iqr_s", ms),
        run_p10_s=med("run_p10_s", ms),
        reps=sum(m.reps for m in ms),
        config=config,
        memory=ms[-1].memory,
        flops=ms[-1].flops,
        program_hash=ms[-1].program_hash,
        timing=ms[-1].timing,
    )
    return Point(
        config,
        compile_cost_s=statistics.median(r[0] for r in rows),
        run_cost_s=statistics.median(r[1] for r in rows),
        rounds=tuple(rows),
        confirmed=True,
        equivalent=equivalent,
        worker_processes=sum(1 for rounds in mine if any(s is not None for s in rounds.samples[config])),
        compiles=len(fresh),
        measurement=summary,
    )


def _measure_rounds(
    runner,
    configs: list[Config],
    rounds: int,
    default: Config,
    objective: Objective,
    check: Callable[[], None],
    searched: Sequence[Point] = (),
    each_round: bool | None = None,
    serve: str | None = CALLS,
    ahead: bool = False,
) -> _Rounds:
    """One process's rounds (see the module docstring); ``searched``: the search's points, which
    size the compile noise (:func:`compile_noise`); ``each_round`` forces the compile mode; ``serve``:
    what the confirmation serves, whose race leaves out the challengers a round rules out
    (:meth:`_Rounds.race`: round 1, and every compiled round; at the tuned call count alone where it
    serves :data:`~autotune.study._contenders.PICK`) and takes no more rounds once the default is
    left alone; None: no race (a second process, where the rule allows a lost round); ``ahead``:
    see :class:`_Rounds`."""
    got, race = _Rounds(configs, rounds, ahead), serve is not None
    # round 1: every contender side by side, compiled where a compile sample could flip the decision on
    # the search's figures (taken at other moments: SEARCH_COMPILE_NOISE), else re-timed, its executable kept
    ranked = [p for p in searched if p.config in configs]
    full = (
        each_round if each_round is not None else compile_could_flip(ranked, default, objective, SEARCH_COMPILE_NOISE)
    )
    got.take(runner, range(1), full, check)

    def points() -> list[Point]:
        return [p for c in configs if (p := _point(c, [got])) is not None]

    noise = compile_noise(points(), searched)
    got.each_round = each_round if each_round is not None else compile_could_flip(points(), default, objective, noise)
    if got.each_round and not full:
        got.take(runner, range(1), True, check)  # round 1 again, compiled side by side
    goal = objective if serve == PICK else None
    if race:
        got.race(default, goal)
    # compiled rounds race after each round (their figures are final); re-timed rounds carry round 1's
    # compile and may yet be compiled again below, so only a default left alone stops them
    alone = default if race else None
    got.take(runner, range(1, rounds), got.each_round, check, alone, race and got.each_round, goal)
    if (
        each_round is None
        and not got.each_round
        and rounds > 1
        and compile_could_flip(points(), default, objective, noise)
    ):
        got.each_round = True  # the re-timed rounds brought them within compile noise: compile them again
        got.take(runner, range(1, rounds), True, check, alone, race, goal)
    got.retake_stalls(runner, check)
    return got


def confirm(
    runner,
    points: Sequence[Point],
    default: Config,
    objective: Objective,
    *,
    top: int = 3,
    rounds: int = 3,
    check: Callable[[], None] = lambda: None,
    serve: str = CALLS,
    platform: str = "cpu",
) -> list[Point]:
    """Confirmed points of the contenders (see the module docstring); the default's always among them
    when it can be measured at all. A point lists the configs that lowered to its program in
    ``equivalent``, how many compiles confirmation took of it in ``compiles`` and in how many
    processes it was measured in ``processes``. ``serve``: what the confirmation serves
    (:func:`autotune.study._contenders.serves`): the pick at the tuned call count alone takes fewer
    contenders and leaves a challenger out of the later rounds once it lost round 1 there."""
    rounds = max(1, int(rounds))
    configs = contenders(points, default, objective, top, serve=serve)
    equivalent = {p.config: p.equivalent for p in by_program(points, default)}
    runner.retain(configs)
    # an accelerator's contender is timed on the device while the next one compiles on the host's CPUs
    ahead = BUILD_AHEAD and platform != "cpu"
    first = _measure_rounds(runner, configs, rounds, default, objective, check, points, serve=serve, ahead=ahead)
    processes = [first]

    def confirmed_now() -> list[Point]:
        return [p for c in configs if (p := _point(c, processes, equivalent.get(c, ()))) is not None]

    confirmed = confirmed_now()
    challengers = second_process(confirmed, default, objective, lead_needed(platform))
    renew = getattr(runner, "renew", None)  # a runner without another process to use has none
    if challengers and renew is not None and renew():
        pair = challengers + [default]
        second = _measure_rounds(
            runner, pair, rounds, default, objective, check, each_round=first.each_round, serve=None, ahead=ahead
        )
        processes.append(second)
        confirmed = confirmed_now()
    return confirmed
