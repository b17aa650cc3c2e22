"""How a study gets a config measured: the `Runner` contract, trial outcomes, and the
in-process runner.

``tune(runner=...)`` accepts any object with this interface; the default is a worker
process (:class:`autotune.worker.WorkerRunner`), which adds time limits, memory caps and
crash containment. A runner never raises for a config that merely fails: it raises
:class:`TrialFailed` with the outcome, and the study records it and goes on.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from ._config import Config
from ._errors import AutotuneError
from ._measure import Measurement, measure


class Outcome(str, enum.Enum):
    """What a trial came to. The value is what studies, reports and JSON output show."""

    COMPLETE = "complete"          # measured, and its outputs matched the default's
    SHARED = "shared"              # lowered to the same program as an earlier config: its measurement is shared
    DUPLICATE = "duplicate"        # the same config as an earlier trial (two workers drew it at once)
    REJECTED = "rejected"          # the correctness guard: its outputs differ from the default's
    PRUNED = "pruned"              # its compile alone could not beat the best cost (measured or predicted)
    TIMEOUT = "timeout"            # over the trial time limit
    CRASHED = "crashed"            # the worker died (signal, abort, exit)
    OOM = "oom"                    # out of memory
    ERROR = "error"                # the config raised while tracing, lowering, compiling or running
    INTERRUPTED = "interrupted"    # Ctrl-C, SIGTERM or SIGHUP while it was measured
    ABANDONED = "abandoned"        # the process measuring it died; the config is free to measure again

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


FAILURES = (Outcome.TIMEOUT, Outcome.CRASHED, Outcome.OOM, Outcome.PRUNED, Outcome.ERROR)
"""The outcomes a runner may raise as :class:`TrialFailed`."""


class TrialFailed(AutotuneError):
    """A trial that did not produce a measurement, and why.

    Arguments:
        state: one of :data:`FAILURES` (an :class:`Outcome` or its value): ``"timeout"``,
            ``"crashed"``, ``"oom"``, ``"pruned"`` or ``"error"``.
        reason: one or two sentences for people.
        compile_s_at_least: for ``"pruned"`` and ``"timeout"``, the trace + lower + compile
            seconds the config had already spent when it was stopped (a lower bound on its
            compile time), or None when unknown.
    """

    def __init__(self, state: str | Outcome, reason: str, *, compile_s_at_least: float | None = None):
        try:
            outcome = Outcome(state)
        except ValueError:
            outcome = None
        if outcome not in FAILURES:
            raise ValueError(f"TrialFailed state {state!r} is not one of {[o.value for o in FAILURES]}")
        super().__init__(f"{outcome.value}: {reason}")
        self.outcome = outcome
        self.state = outcome.value
        self.reason = reason
        self.compile_s_at_least = compile_s_at_least


@runtime_checkable
class Runner(Protocol):
    """What :func:`autotune.tune` measures configs with.

    ``measure(config, *, compile_budget_s=None, on_lowered=None) -> Measurement``
        Trace, lower, compile and time ``config``. ``Measurement.outputs`` must hold the
        outputs (NumPy or JAX leaves) for the correctness guard and
        ``Measurement.program_hash`` the hash of the lowered program text.
        ``compile_budget_s``: stop as ``TrialFailed("pruned")`` once trace + lower + compile
        seconds reach it. ``on_lowered(program_hash)`` is called after lowering and before
        compiling; if it returns a :class:`Measurement` (an earlier config that lowered to
        the same program) the runner skips compiling and running and returns a measurement
        with its own trace and lower seconds and the earlier one's other figures.
    ``retime(config) -> Measurement | None``
        Time the runtime again on the executable already compiled for ``config`` (kept
        since its ``measure``), returning a measurement with the new runtime figures and
        the kept compile figures; None when it is no longer kept.
    ``retain(configs)``
        Keep the compiled executables of these configs for ``retime``; drop the others.
    ``close()``
        Release every resource (idempotent).
    ``isolated``
        True when trials run in another process (time limits and crash containment hold).
    """

    isolated: bool

    def measure(self, config: Config, *, compile_budget_s: float | None = None,
                on_lowered: Callable[[str], Measurement | None] | None = None) -> Measurement: ...

    def retime(self, config: Config) -> Measurement | None: ...

    def retain(self, configs: Iterable[Config]) -> None: ...

    def close(self) -> None: ...


class InProcessRunner:
    """Measures configs in this process (no isolation: a hang or crash is the study's)."""

    isolated = False

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, jit_kwargs: dict, timing: dict):
        self.fn, self.args, self.kwargs, self.jit_kwargs = fn, tuple(args), dict(kwargs), dict(jit_kwargs)
        self.timing = dict(timing or {})

    def measure(self, config: Config, *, compile_budget_s: float | None = None,
                on_lowered: Callable[[str], Measurement | None] | None = None) -> Measurement:
        return measure(self.fn, self.args, self.kwargs, config, jit_kwargs=self.jit_kwargs,
                       keep_outputs=True, **self.timing)

    def retime(self, config: Config) -> Measurement | None:
        return None

    def retain(self, configs: Iterable[Config]) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> InProcessRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
