"""`Outcome`: what a trial came to, the one tally of outcomes, and which count toward ``n_trials``
(:func:`counts_toward_trials`, the one rule).

The study owns outcomes (it records them, counts them and publishes the enum as
``autotune.study.Outcome``), but the enum is defined here, below ``_runner``: a runner
reports a failed trial as ``TrialFailed(outcome)``, and ``_runner`` sits below ``study/``
in the import order. Only the standard library is imported.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Protocol


class Outcome(enum.StrEnum):
    """What a trial came to. The value is what studies, reports and JSON output show."""

    COMPLETE = "complete"  # measured, and its outputs matched the default's
    SHARED = "shared"  # lowered to the same program as an earlier config: its measurement is shared
    DUPLICATE = "duplicate"  # the same config as an earlier trial (two workers drew it at once)
    REJECTED = "rejected"  # the correctness guard: its outputs differ from the default's
    PRUNED = "pruned"  # its compile alone could not beat the best cost (measured or predicted)
    TIMEOUT = "timeout"  # over the trial time limit
    CRASHED = "crashed"  # the worker died (signal, abort, exit)
    OOM = "oom"  # out of memory
    ERROR = "error"  # the config raised while tracing, lowering, compiling or running
    INTERRUPTED = "interrupted"  # Ctrl-C, SIGTERM or SIGHUP while it was measured
    ABANDONED = "abandoned"  # the process measuring it died; the config is free to measure again

    def __str__(self) -> str:
        return self.value

    @property
    def counts(self) -> bool:
        """Whether the trial produced a measurement a ranking can use."""
        return self in (Outcome.COMPLETE, Outcome.SHARED)

    @property
    def stopped(self) -> bool:
        """Whether the config was stopped for being slow to compile (it might still win at
        more calls than the study was tuned for)."""
        return self in (Outcome.PRUNED, Outcome.TIMEOUT)

    @property
    def releases(self) -> bool:
        """Whether the config may be measured again by a later trial."""
        return self in (Outcome.INTERRUPTED, Outcome.ABANDONED, Outcome.DUPLICATE)


def tally(states: Iterable[str | Outcome | None]) -> dict[str, int]:
    """How many trials came to each state (a trial still running has its own state
    string, or None), in the order first seen.

    Example::

        >>> tally(["complete", "pruned", Outcome.COMPLETE])
        {'complete': 2, 'pruned': 1}
    """
    out: dict[str, int] = {}
    for state in states:
        key = str(state)
        out[key] = out.get(key, 0) + 1
    return out


def counts_toward_trials(outcome: Outcome | None, skipped: bool, *, running: bool = False) -> bool:
    """Whether a trial that ended as ``outcome`` counts toward ``n_trials``: not a duplicate,
    an interrupted or abandoned trial (their config is free again), nor a config ``skipped``
    before compiling on its predicted compile time. A trial still being measured (``outcome``
    None) counts only where ``running`` says it is taken: the search's budget counts such a
    trial (its config is taken), a queued one never, and a run's tally of ended trials neither.

    This is the one rule: ``TrialView.counted`` (the search's budget), ``TrialRecord.counted``
    (a result's trials) and :func:`counted` all apply it.

    Example::

        >>> [counts_toward_trials(o, False) for o in (Outcome.PRUNED, Outcome.DUPLICATE, None)]
        [True, False, False]
        >>> counts_toward_trials(None, False, running=True)
        True
    """
    if outcome is None:
        return running
    return not outcome.releases and not skipped


class _Counted(Protocol):
    @property
    def counted(self) -> bool: ...


def counted(trials: Iterable[_Counted]) -> int:
    """How many of ``trials`` (study views or result records) count toward ``n_trials``: each
    says so through its ``counted`` property, :func:`counts_toward_trials`."""
    return sum(1 for t in trials if t.counted)


__all__ = ["Outcome", "counted", "counts_toward_trials", "tally"]
