"""How a study gets a config measured: the `Runner` contract, the failures a runner reports
(`TrialFailed`, with an `Outcome` of ``_outcome``), and the in-process runner, which keeps its
compiled executables for re-timing in an ``_executables.ExecutableStore``.

``tune(runner=...)`` accepts any object with this interface; the default is a worker
process (:class:`autotune.measuring.process.WorkerRunner`), which adds time limits, memory caps and
crash containment. A runner never raises for a config that merely fails: it raises
:class:`TrialFailed` with the outcome, and the study records it and goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from autotune import _interrupt
from autotune._errors import AutotuneError, error_text
from autotune.measuring import _wall
from autotune.measuring._executables import RECENT, ExecutableStore
from autotune.measuring._oom import RanOutOfMemory, oom_reason, out_of_memory
from autotune.measuring._outcome import Outcome as Outcome  # defined below the runner; the study publishes it
from autotune.measuring._sampling import DEFAULT as DEFAULT_SAMPLING
from autotune.measuring._sampling import Sampling
from autotune.measuring._stages import Measurement, OnLowered, Stages, measure_executable
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
    ``retime(config, *, beside=False[, sampling]) -> Measurement | None``
        Time the runtime again on the executable already compiled for ``config`` (kept
        since its ``measure``: the last :data:`RECENT` configs and those named by
        ``retain``), returning a measurement with the new runtime figures and the kept
        compile figures (``outputs`` None); None when it is no longer kept (evicted, or the
        worker holding it was replaced). May raise :class:`TrialFailed` (a run that hangs
        or crashes). With ``beside``, the calls are timed while a compile runs beside them
        in the same process (`autotune.measuring._beside`: tier-up's slowdown). The runners here
        also take ``sampling`` (a :class:`Sampling` to sample the calls with instead of their
        own: confirmation's shorter rounds); a runner without it samples as its trials do.
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
        self, config: Config, *, compile_budget_s: float | None = None, on_lowered: OnLowered | None = None
    ) -> Measurement: ...

    def retime(self, config: Config, *, beside: bool = False) -> Measurement | None: ...

    def retain(self, configs: Iterable[Config]) -> None: ...

    def close(self) -> None: ...


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


class RunnerBase:
    """What the runners here share: the :class:`Runner` contract's ``measure``, ``retime`` and
    ``retain`` read their configs (a :class:`Config`, its dict, or None for the default) once and hand
    them to the runner's own ``_measure``, ``_retime`` and ``_retain`` (configs' JSON keys); and a
    runner is its own context manager (``close`` on leaving). ``sampling`` is how its trials sample
    a config's calls (:class:`Sampling`)."""

    sampling: Sampling = DEFAULT_SAMPLING
    trial_sampling: Sampling = DEFAULT_SAMPLING  # the measure under way's: ``sampling``, its ceiling set

    def measure(
        self,
        config: Config | dict | None,
        *,
        compile_budget_s: float | None = None,
        on_lowered: OnLowered | None = None,
        run_ceiling_s: float | None = None,
        sampling: Sampling | None = None,
    ) -> Measurement:
        """Measure ``config`` (the :class:`Runner` contract); ``run_ceiling_s``: a call slower than
        this cannot win, so its sampling stops once a short estimate says so (``Sampling.stop_above_s``);
        ``sampling``: sample its calls so instead of as the runner's trials do (confirmation's
        shorter rounds). Its wall is charged to the open wall's stages (`autotune.measuring._wall`)."""
        started, starts = time.perf_counter(), _wall.charged("process starts")

        def waited() -> float:
            return time.perf_counter() - started - (_wall.charged("process starts") - starts)

        self.trial_sampling = (sampling or self.sampling).replace(stop_above_s=run_ceiling_s)
        try:
            m = self._measure(Config.from_dict(config), compile_budget_s, on_lowered)
        except TrialFailed:
            _wall.charge("compile", waited())  # stopped in its compile (pruned, timed out) or failed there
            raise
        finally:
            self.trial_sampling = self.sampling
        _wall.account(m, waited(), True)
        return m

    def retime(
        self, config: Config | dict | None, *, beside: bool = False, sampling: Sampling | None = None
    ) -> Measurement | None:
        """Time ``config``'s kept executable again (the :class:`Runner` contract); ``sampling``:
        sample its calls so instead of as the runner's trials do (confirmation's shorter rounds)."""
        m = self._retime(Config.from_dict(config), beside, sampling or self.sampling)
        if m is not None:
            _wall.account(m, 0.0, False)
        return m

    def retain(self, configs: Iterable[Config | dict]) -> None:
        """Keep only these configs' executables for :meth:`retime`."""
        self._retain([Config.from_dict(c).to_json() for c in configs])

    def _measure(self, config: Config, compile_budget_s: float | None, on_lowered: OnLowered | None) -> Measurement:
        raise NotImplementedError

    def _retime(self, config: Config, beside: bool, sampling: Sampling) -> Measurement | None:
        raise NotImplementedError

    def _retain(self, keys: list[str]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# A trial measured in-process on a compile deadline gets this much beyond it for its runtime sampling.
SAMPLING_SLACK_S = 5.0


class InProcessRunner(RunnerBase):
    """Measures configs in this process (no isolation: a crash is the study's).

    The compile budget is checked after tracing and after lowering. With ``trial_timeout``
    (or a compile budget) a trial also has a deadline: it runs on a thread of its own, and one
    that outlives it is reported (``timeout`` / ``pruned``) and left to finish in the background,
    since a compile in this process cannot be stopped midway; the study goes on meanwhile, and a
    signal is acted on at once. ``retime`` re-runs kept executables.

    Arguments:
        call: the function, its example arguments and ``jax.jit`` options (:class:`autotune.Call`).
        timing: how runtime is sampled: a :class:`~autotune.measuring._sampling.Sampling`, a mapping of its
            fields (``mode``, ``warmup``, ``min_reps``, ``max_reps``, ``target_s``), a mode alone, or None.
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
        self,
        call: Call,
        timing: Sampling | Mapping[str, Any] | str | None = None,
        *,
        recent: int = RECENT,
        trial_timeout: float | None = None,
    ):
        if not isinstance(call, Call):
            raise TypeError(
                f"InProcessRunner({call!r}, ...): pass the function and its arguments as one "
                "autotune.Call(fn, args, kwargs, jit_kwargs)."
            )
        self.call = call
        self.sampling = Sampling.of(timing)
        self.store = ExecutableStore(recent)
        self.trial_timeout = trial_timeout
        self.abandoned = 0  # trials left running past their deadline

    def _deadline(self, compile_budget_s: float | None) -> tuple[float | None, str]:
        """(seconds the whole trial may take, the outcome past it): the trial timeout, else the
        compile budget plus time to sample the runtime (a compile past the budget cannot win)."""
        if self.trial_timeout is not None:
            return self.trial_timeout, "timeout"
        if compile_budget_s is not None:
            return compile_budget_s + 4 * self.sampling.target_s + SAMPLING_SLACK_S, "pruned"
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

    def _measure(self, config: Config, compile_budget_s: float | None, on_lowered: OnLowered | None) -> Measurement:
        _interrupt.check()
        try:
            m, exe = self._on_deadline(
                lambda: measure_executable(
                    self.call,
                    config,
                    sampling=self.trial_sampling,
                    keep_outputs=True,
                    on_stage=stage_guard(compile_budget_s),
                    on_lowered=on_lowered,
                ),
                compile_budget_s,
            )
        except (TrialFailed, KeyboardInterrupt):
            raise
        except RanOutOfMemory as exc:
            raise TrialFailed("oom", oom_reason("run", exc.found, asked_bytes=exc.asked_bytes)) from exc
        except Exception as exc:  # the config does not trace, compile or run: a result
            found = out_of_memory(str(exc), memory_error=isinstance(exc, MemoryError))
            if found is not None:  # a TPU's compile over its HBM
                raise TrialFailed("oom", oom_reason("while tracing, lowering or compiling", found)) from exc
            raise TrialFailed("error", error_text(exc, first_line=False)) from exc
        if exe is not None:
            self.store.put(config.to_json(), exe)
        else:
            self.store.alias(config.to_json(), m)
        return m

    def _retime(self, config: Config, beside: bool, sampling: Sampling) -> Measurement | None:
        _interrupt.check()
        return self.store.retime(config.to_json(), sampling, beside=beside)

    def start(self) -> None:
        """Nothing to start in this process (the worker runner starts its process here)."""

    def renew(self) -> bool:
        """There is no other process to measure in: False."""
        return False

    def _retain(self, keys: list[str]) -> None:
        self.store.retain(keys)

    def close(self) -> None:
        self.store.clear()
