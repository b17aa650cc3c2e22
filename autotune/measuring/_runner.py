"""How a study gets a config measured: the `Runner` contract, the failures a runner reports
(`TrialFailed`, with an `Outcome` of ``_outcome``), the store of compiled executables kept
for re-timing, and the in-process runner.

``tune(runner=...)`` accepts any object with this interface; the default is a worker
process (:class:`autotune.measuring.process.WorkerRunner`), which adds time limits, memory caps and
crash containment. A runner never raises for a config that merely fails: it raises
:class:`TrialFailed` with the outcome, and the study records it and goes on.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from autotune import _interrupt
from autotune._errors import AutotuneError, error_text
from autotune.measuring._outcome import Outcome as Outcome  # defined below the runner; the study publishes it
from autotune.measuring._stages import TIMING_OPTIONS, Executable, Measurement, Stages, measure_executable
from autotune.program._call import Call
from autotune.program._config import Config

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
        seconds reach it (a runner that cannot stop a compile checks between stages).
        ``on_lowered(program_hash)`` is called after lowering and before compiling; if it
        returns a :class:`Measurement` (an earlier config that lowered to the same program)
        the runner skips compiling and running and returns a measurement with its own
        trace and lower seconds and the earlier one's other figures. Raises
        :class:`TrialFailed` for a config that fails, and
        :class:`autotune._interrupt.Interrupted` when a signal stopped the wait.
    ``retime(config, *, beside=False) -> Measurement | None``
        Time the runtime again on the executable already compiled for ``config`` (kept
        since its ``measure``: the last :data:`RECENT` configs and those named by
        ``retain``), returning a measurement with the new runtime figures and the kept
        compile figures (``outputs`` None); None when it is no longer kept (evicted, or the
        worker holding it was replaced). May raise :class:`TrialFailed` (a run that hangs
        or crashes). With ``beside``, the calls are timed while a compile runs beside them
        in the same process (`autotune.measuring._beside`: tier-up's slowdown).
    ``retain(configs)``
        Keep the compiled executables of these configs for ``retime``; drop the others.
    ``renew() -> bool`` (optional)
        Measure from now on in a fresh process (kept executables are lost), so confirmation
        can check a new winner in a second process; False when there is no other process
        to use (an in-process runner), and a runner without it is never renewed.
    ``measure_load(config) -> Load`` (optional)
        With several processes and JAX's persistent compilation cache on, how long a later process
        takes to load ``config``'s executable from the cache (:class:`autotune.measuring.process._load_probe.Load`).
        A runner without it that measures on this machine (a worker, or in-process) gets
        :func:`autotune.measuring.process._load_probe.measure_load` (two fresh processes); any other gets the
        estimate, trace + lower, with a note.
    ``prefetch(configs)`` (optional)
        The configs the search will measure next (the grid's next few, else the one about to be
        measured): a runner may trace and compile them ahead, in parallel (the worker runner's
        builder processes); configs named before and not again are no longer wanted.
    ``close()``
        Release every resource (idempotent).
    ``isolated``
        True when trials run in another process (time limits and crash containment hold).
    """

    isolated: bool

    def measure(
        self,
        config: Config,
        *,
        compile_budget_s: float | None = None,
        on_lowered: Callable[[str], Measurement | None] | None = None,
    ) -> Measurement: ...

    def retime(self, config: Config, *, beside: bool = False) -> Measurement | None: ...

    def retain(self, configs: Iterable[Config]) -> None: ...

    def close(self) -> None: ...


RECENT = 8
"""How many of the most recently measured configs a runner keeps compiled for ``retime``."""


def stage_guard(
    budget: float | None, trial_timeout: float | None = None, started: float | None = None, where: str = ""
) -> Callable[[str, Stages], None]:
    """An ``on_stage`` hook for :func:`autotune.measuring._stages.measure_executable`: after tracing
    and after lowering, stop a config whose trace + lower already reached the compile
    ``budget`` (``"pruned"``) or whose trial passed ``trial_timeout`` seconds since
    ``started`` (``time.monotonic()``; ``"timeout"``), and act on a caught interrupt.
    These stages cannot be stopped midway, so they are checked when each finishes.

    Trace + lower count their process CPU seconds where known (the seconds the objective
    charges, :attr:`Measurement.compile_cost_s`), against a budget the search already stretched
    by the default's wall/CPU ratio for the compile's wall deadline: so the check can only prune
    a config that cannot win. Wall seconds would also count the time other processes took the CPU,
    so a moment of load could prune a config that can win, before its results were ever checked."""

    def check(stage: str, st: Stages) -> None:
        _interrupt.check()
        lowered = stage == "lower"
        cpu = [st.trace_cpu_s] + ([st.lower_cpu_s] if lowered else [])
        spent = sum(cpu) if None not in cpu else st.trace_s + (st.lower_s if lowered else 0.0)
        doing = {"trace": "tracing", "lower": "lowering"}.get(stage, stage)
        if budget is not None and spent >= budget:
            raise TrialFailed(
                "pruned",
                (
                    f"pruned after {doing}: trace+lower already took {spent:.3g} s of CPU, over the compile budget "
                    f"of {budget:.3g} s (best cost / compile weight), so this config cannot win"
                ),
                compile_s_at_least=spent,
            )
        if trial_timeout is not None and started is not None and time.monotonic() - started >= trial_timeout:
            raise TrialFailed(
                "timeout",
                (
                    f"{doing}{where} took {time.monotonic() - started:.3g} s, over the trial timeout of "
                    f"{trial_timeout:g} s (it cannot be stopped midway, so it is checked when it finishes)"
                ),
                compile_s_at_least=spent,
            )

    return check


class ExecutableStore:
    """The compiled executables of the last ``recent`` configs measured, plus the ones
    named by :meth:`retain`, so their runtime can be timed again without compiling.

    Keys are configs' JSON (``Config.to_json()``). Configs that lowered to the same
    program share one executable (by program hash).
    """

    def __init__(self, recent: int = RECENT):
        self.recent = recent
        self._programs: dict[str, Executable] = {}
        self._configs: OrderedDict[str, tuple[str, Measurement]] = OrderedDict()
        self._pinned: set[str] = set()

    def __len__(self) -> int:
        return len(self._configs)

    def __contains__(self, key: str) -> bool:
        return key in self._configs

    def put(self, key: str, executable: Executable) -> None:
        """Keep ``executable`` for config ``key``."""
        m = executable.measurement
        program = m.program_hash or key
        self._programs[program] = executable
        self._remember(key, program, m)

    def program(self, program_hash: str | None) -> Executable | None:
        """The kept executable of a program, by hash, or None."""
        return self._programs.get(program_hash) if program_hash is not None else None

    def alias(self, key: str, measurement: Measurement) -> None:
        """Config ``key`` reused the program of an earlier config (the same program hash)."""
        if measurement.program_hash in self._programs:
            self._remember(key, measurement.program_hash, measurement.replace(outputs=None))

    def _remember(self, key: str, program: str, m: Measurement) -> None:
        self._configs[key] = (program, m)
        self._configs.move_to_end(key)
        loose = [k for k in self._configs if k not in self._pinned]
        for k in loose[: max(0, len(loose) - self.recent)]:
            del self._configs[k]
        self._sweep()

    def retain(self, keys: Iterable[str]) -> None:
        """Keep only the configs ``keys`` (those still held); drop every other."""
        self._pinned = set(keys)
        for k in [k for k in self._configs if k not in self._pinned]:
            del self._configs[k]
        self._sweep()

    def _sweep(self) -> None:
        used = {program for program, _ in self._configs.values()}
        for program in [p for p in self._programs if p not in used]:
            del self._programs[program]

    def retime(self, key: str, *, beside: bool = False, **timing: Any) -> Measurement | None:
        """Time config ``key``'s kept executable again (see :meth:`Executable.retime`; ``beside``: while
        a compile runs beside the calls), as measured for ``key``; None if it is not kept."""
        held = self._configs.get(key)
        if held is None:
            return None
        program, m = held
        return (
            self._programs[program]
            .retime(beside=beside, **timing)
            .replace(
                trace_s=m.trace_s,
                lower_s=m.lower_s,
                trace_cpu_s=m.trace_cpu_s,
                lower_cpu_s=m.lower_cpu_s,
                config=m.config,
            )
        )

    def clear(self) -> None:
        self._programs.clear()
        self._configs.clear()


# A trial measured in-process on a compile deadline gets this much beyond it for its runtime sampling.
SAMPLING_SLACK_S = 5.0


class InProcessRunner:
    """Measures configs in this process (no isolation: a crash is the study's).

    The compile budget is checked after tracing and after lowering. With ``trial_timeout``
    (or a compile budget) a trial also has a deadline: it runs on a thread of its own, and one
    that outlives it is reported (``timeout`` / ``pruned``) and left to finish in the background,
    since a compile in this process cannot be stopped midway; the study goes on meanwhile, and a
    signal is acted on at once. ``retime`` re-runs kept executables.

    Arguments:
        call: the function, its example arguments and ``jax.jit`` options (:class:`autotune.Call`).
        timing: runtime sampling options (``mode``, ``warmup``, ``min_reps``, ``max_reps``, ``target_s``).
        recent: how many recent configs' executables are kept for ``retime``.
        trial_timeout: seconds one trial may take before it is reported as a timeout; None for no limit.

    Example::

        >>> import jax.numpy as jnp, autotune as at
        >>> f = lambda x: at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=8, name="l")[0]
        >>> with InProcessRunner(at.Call(f, (jnp.ones(3),)), {"target_s": 0.01}) as r:
        ...     m = r.measure({"l": {"repr": "for"}})
        >>> m.compile_s > 0
        True
    """

    isolated = False

    def __init__(
        self, call: Call, timing: dict | None = None, *, recent: int = RECENT, trial_timeout: float | None = None
    ):
        if not isinstance(call, Call):
            raise TypeError(
                f"InProcessRunner({call!r}, ...): pass the function and its arguments as one "
                "autotune.Call(fn, args, kwargs, jit_kwargs)."
            )
        self.call = call
        self.timing = {k: v for k, v in dict(timing or {}).items() if k in TIMING_OPTIONS}
        self.store = ExecutableStore(recent)
        self.trial_timeout = trial_timeout
        self.abandoned = 0  # trials left running past their deadline

    def _deadline(self, compile_budget_s: float | None) -> tuple[float | None, str]:
        """(seconds the whole trial may take, the outcome past it): the trial timeout, else the
        compile budget plus time to sample the runtime (a compile past the budget cannot win)."""
        if self.trial_timeout is not None:
            return self.trial_timeout, "timeout"
        if compile_budget_s is not None:
            target = float(self.timing.get("target_s", 0.5))
            return compile_budget_s + 4 * target + SAMPLING_SLACK_S, "pruned"
        return None, "timeout"

    def _on_deadline(self, work: Callable[[], Any], compile_budget_s: float | None) -> Any:
        """``work()`` on a thread, waited for until the deadline; interrupts are checked meanwhile."""
        import threading

        limit, outcome = self._deadline(compile_budget_s)
        if limit is None:
            return work()
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = work()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = exc

        thread = threading.Thread(target=target, name="autotune-trial", daemon=True)
        started = time.monotonic()
        thread.start()
        while thread.is_alive():
            _interrupt.check()
            waited = time.monotonic() - started
            if waited >= limit:
                self.abandoned += 1
                raise TrialFailed(
                    outcome,
                    (
                        f"the trial ran {waited:.3g} s in this process, past its deadline of {limit:.3g} s "
                        f"({'trial_timeout' if outcome == 'timeout' else 'the compile budget'}); it cannot be "
                        "stopped midway, so it finishes in the background and its result is dropped"
                    ),
                    compile_s_at_least=waited,
                )
            thread.join(min(0.1, limit - waited))
        if "error" in box:
            raise box["error"]
        return box["value"]

    def measure(
        self,
        config: Config | dict | None,
        *,
        compile_budget_s: float | None = None,
        on_lowered: Callable[[str], Measurement | None] | None = None,
    ) -> Measurement:
        config = Config.from_dict(config)
        _interrupt.check()
        try:
            m, exe = self._on_deadline(
                lambda: measure_executable(
                    self.call,
                    config,
                    timing=self.timing,
                    keep_outputs=True,
                    on_stage=stage_guard(compile_budget_s),
                    on_lowered=on_lowered,
                ),
                compile_budget_s,
            )
        except (TrialFailed, KeyboardInterrupt):
            raise
        except Exception as exc:  # the config does not trace, compile or run: a result
            raise TrialFailed("error", error_text(exc, first_line=False)) from exc
        if exe is not None:
            self.store.put(config.to_json(), exe)
        else:
            self.store.alias(config.to_json(), m)
        return m

    def retime(self, config: Config | dict | None, *, beside: bool = False) -> Measurement | None:
        _interrupt.check()
        return self.store.retime(Config.from_dict(config).to_json(), beside=beside, **self.timing)

    def start(self) -> None:
        """Nothing to start in this process (the worker runner starts its process here)."""

    def renew(self) -> bool:
        """There is no other process to measure in: False."""
        return False

    def retain(self, configs: Iterable[Config | dict]) -> None:
        self.store.retain(Config.from_dict(c).to_json() for c in configs)

    def close(self) -> None:
        self.store.clear()

    def __enter__(self) -> InProcessRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
