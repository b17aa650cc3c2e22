"""The parent side: :class:`WorkerRunner` measures configs in a worker process, with a time
limit, a memory cap and crash containment.

Three ways to get the function into the worker (``Mode``): export mode (what
:func:`autotune.tune` builds: this process traces and lowers, ``jax.export`` carries the
program; closures work; its trials, and the builder processes that compile them ahead, are
``_exported``'s), import mode (a program ``jax.export`` cannot serialise, e.g. with
host callbacks, and a :class:`Location`: the worker imports the function, gets the arguments
as JSON and traces it itself) and study-file mode (:meth:`WorkerRunner.for_study_file`).
Arguments cross with their meshes and shardings: a sharded call is measured as it runs. Such
a program without a location, a sharding that cannot cross, or a worker that cannot place the
arguments as the call has them (fewer devices) means in-process measurement, with one warning.
The memory cap is ``RLIMIT_DATA`` in the worker (heap and anonymous mappings, where XLA
allocates; ``RLIMIT_AS`` is unusable: XLA reserves large virtual ranges at start-up).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from autotune import _interrupt
from autotune._errors import StudyError
from autotune.measuring._runner import RECENT, InProcessRunner, RunnerBase, TrialFailed
from autotune.measuring._sampling import Sampling
from autotune.measuring._stages import LOWERED_FIGURES, Measurement, OnLowered, Stages, reuse
from autotune.measuring.process._channel import WorkerProcess
from autotune.measuring.process._codec import decode_array
from autotune.measuring.process._exported import ExportHost, FellBack
from autotune.measuring.process._follow import latch, request_reply, retime_in
from autotune.measuring.process._policy import CompilePolicy
from autotune.measuring.process._protocol import CARRIED_JIT_OPTIONS, Location, Mode, Op
from autotune.program._call import Call
from autotune.program._config import Config


@dataclass(frozen=True)
class WorkerOptions:
    """How a :class:`WorkerRunner` runs its worker: its limits, its timeouts and its helpers.

    Arguments:
        trial_timeout: seconds one trial (trace + lower + compile + run) may take; None
            for no limit. Over it, the worker is killed: ``TrialFailed("timeout")``.
        trial_memory_gb: ``RLIMIT_DATA`` of the worker in GiB, or None.
        isolate: ``"auto"`` measures in-process, with one warning, a program the worker
            cannot take; ``True`` raises :class:`StudyError` instead.
        startup_timeout: seconds to wait for a new worker to import JAX.
        prune_grace_s: a trial over its compile budget is killed once its compile has also run
            this long. None (default): the time the last worker took to start (killing a compile
            that would end sooner than a new worker starts costs more than it saves; 0: at once).
            A build in a builder is killed at its budget when another builder is idle.
        python: the worker's interpreter (default: this one).
        policy: the :class:`~autotune.measuring.process.CompilePolicy` (default: from the platform; on
            GPU a fresh worker for every trial that compiles).
        recent: how many recent configs' executables the worker keeps for ``retime``.
        builders: builder processes that compile export-mode configs while the worker measures
            (``_builders``): a number, 0 (compile in the worker) or ``"auto"`` (a few where this
            process only traces and the worker owns a TPU chip they compile for, else none).
        build_target: the device builders compile for (platform, device_kind, device_count;
            default: the worker's).
    """

    trial_timeout: float | None = None
    trial_memory_gb: float | None = None
    isolate: bool | str = "auto"
    startup_timeout: float = 300.0
    prune_grace_s: float | None = None
    python: str | None = None
    policy: CompilePolicy | None = None
    recent: int = RECENT
    builders: int | str = 0
    build_target: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        timeout, memory, builders = self.trial_timeout, self.trial_memory_gb, self.builders
        if timeout is not None and not timeout > 0:
            raise StudyError(f"trial_timeout={timeout!r} must be a number of seconds > 0, or None.")
        if memory is not None and not memory > 0:
            raise StudyError(f"trial_memory_gb={memory!r} must be a number of GiB > 0, or None.")
        if self.isolate not in ("auto", True):
            raise StudyError(f"WorkerRunner(isolate={self.isolate!r}): use 'auto' or True.")
        if builders != "auto" and (isinstance(builders, bool) or not isinstance(builders, int) or builders < 0):
            raise StudyError(f"WorkerRunner(builders={builders!r}): use 'auto' or a number of processes >= 0.")


class WorkerRunner(ExportHost, RunnerBase):
    """Measures configs in a worker process: the :class:`~autotune.measuring._runner.Runner` contract
    with time limits, a memory cap and crash containment.

    Arguments:
        call: the function, its example inputs and the ``jax.jit`` options (:class:`autotune.Call`);
            None for a study file (:meth:`for_study_file`).
        timing: how runtime is sampled: a :class:`~autotune.measuring._sampling.Sampling`, a mapping of its
            fields (``mode``, ``warmup``, ``min_reps``, ``max_reps``, ``target_s``), a mode alone, or None.
        options: the worker's limits, timeouts and helpers (:class:`WorkerOptions`).
        location: where the worker can import the function from (:class:`Location`), used when
            ``jax.export`` cannot serialise the program (import mode).
        settings: fields of :class:`WorkerOptions` by name (``trial_timeout=60``), over ``options``.

    Example::

        >>> import jax.numpy as jnp, autotune as at
        >>> f = lambda x: at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=8, name="l")[0]
        >>> with WorkerRunner(at.Call(f, (jnp.ones(3),)), {"target_s": 0.01}, trial_timeout=60) as r:
        ...     m = r.measure({"l": {"repr": "for"}})
        >>> m.compile_s > 0
        True
    """

    def __init__(
        self,
        call: Call | None,
        timing: Sampling | Mapping[str, Any] | str | None = None,
        options: WorkerOptions | None = None,
        *,
        location: Location | None = None,
        **settings: Any,
    ):
        if call is not None and not isinstance(call, Call):
            raise StudyError(
                f"WorkerRunner({call!r}, ...): pass the function and its arguments as one "
                "autotune.Call(fn, args, kwargs, jit_kwargs), or None with a study file's location."
            )
        unknown = sorted(set(settings) - {f.name for f in fields(WorkerOptions)})
        if unknown:
            raise StudyError(
                f"WorkerRunner got unknown option(s) {unknown}; use fields of WorkerOptions: "
                f"{[f.name for f in fields(WorkerOptions)]}."
            )
        options = replace(options or WorkerOptions(), **settings)
        if location is not None and not isinstance(location, Location):
            raise StudyError(
                f"WorkerRunner(location={location!r}): pass an autotune.measuring.process.Location or None."
            )
        self.call, self.options = call, options
        self.sampling = Sampling.of(timing)
        self.trial_timeout, self.trial_memory_gb = options.trial_timeout, options.trial_memory_gb
        self.strict = options.isolate is True
        self.startup_timeout, self.prune_grace_s = options.startup_timeout, options.prune_grace_s
        self.startup_s: float | None = None  # how long the last worker took to become ready
        self.python, self.location = options.python or sys.executable, location
        self.policy, self.recent = options.policy, options.recent
        self.mode = Mode.EXPORT if call is not None else Mode.STUDY
        self.study_file = location.file if location is not None and location.is_study_file else None
        self.index = location.index if self.study_file else 0
        self.fallback_reason: str | None = None  # why trials run in-process (not isolated)
        self.import_reason: str | None = None  # why the worker imports the function (export failed)
        self.worker_info: dict[str, Any] = {}  # the current worker's "ready" event
        self._worker: WorkerProcess | None = None
        self._in_process_runner: InProcessRunner | None = None
        self._starts, self._ever_ready, self._trial_id = 0, False, 0
        self._args_line: bytes | None = None
        self._import_request: dict[str, Any] | None = None
        self._input_digest: str | None = None
        self._placement: dict[str, Any] | None = None  # where the call's arguments live (the worker's must match)
        self._closed = False
        self._init_builds(options.builders, options.build_target)
        if call is not None:
            extra = sorted(set(call.jit_kwargs) - CARRIED_JIT_OPTIONS)
            if extra:
                self._fall_back(f"the jax.jit option(s) {extra} cannot be carried to a worker process")

    @classmethod
    def from_options(cls, call: Call, options: Any, location: Location | None = None) -> WorkerRunner:
        """The runner a study with these :class:`autotune.TuneOptions` measures ``call`` with."""
        limits = WorkerOptions(
            trial_timeout=options.trial_timeout,
            trial_memory_gb=options.trial_memory_gb,
            isolate=options.isolate,
            builders=options.builders,
        )
        return cls(call, options.timing, limits, location=location)

    @classmethod
    def for_study_file(cls, path: str | os.PathLike, index: int = 0, **options: Any) -> WorkerRunner:
        """A runner whose worker imports the study file itself and measures ``examples()[index]``.

        The whole trial (trace, lower, compile, run) runs in the worker; no array crosses
        except the outputs. ``options`` are those of :class:`WorkerRunner`.
        """
        if not os.path.isfile(path):
            raise StudyError(f"Study file {os.fspath(path)!r} does not exist.")
        return cls(None, location=Location.study_file(path, index), **options)

    # -- public ------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The current worker's process id, or None when none is running."""
        return self._worker.pid if self._worker is not None and self._worker.alive() else None

    @property
    def restarts(self) -> int:
        """How many workers were started after the first (one per crash, kill or replacement)."""
        return max(0, self._starts - 1)

    @property
    def isolated(self) -> bool:
        """False once this runner measures in-process (see ``fallback_reason``)."""
        return self.fallback_reason is None

    def _measure(self, config: Config, compile_budget_s: float | None, on_lowered: OnLowered | None) -> Measurement:
        """Measure ``config`` in the worker (the Runner contract in ``autotune.measuring._runner``): raises
        :class:`TrialFailed`, or ``Interrupted`` for a signal while waiting (the worker killed first)."""
        if self._closed:
            raise StudyError("This WorkerRunner is closed.")
        if self.fallback_reason is None:
            with latch():
                try:
                    _interrupt.check()
                    if self.mode == Mode.EXPORT:
                        return self._measure_export(config, compile_budget_s, on_lowered)
                    return self._measure_traced(config, compile_budget_s, on_lowered)
                except FellBack:
                    pass
                except (TrialFailed, StudyError):
                    raise
                except BaseException:
                    # Interrupted or broken mid-protocol: the worker's state is unknown.
                    self._discard()
                    raise
        return self._in_process().measure(config, compile_budget_s=compile_budget_s, on_lowered=on_lowered)

    def _retime(self, config: Config, beside: bool, sampling: Sampling) -> Measurement | None:
        """Time the runtime again on ``config``'s executable kept in the warm worker (one a
        builder compiled for it is loaded where the worker lacks it); None when it is gone
        (evicted, or the worker was replaced). ``beside``: while the worker compiles beside the
        calls (`autotune.measuring._beside`)."""
        if self._closed:
            raise StudyError("This WorkerRunner is closed.")
        if self.fallback_reason is not None:
            return self._in_process().retime(config, beside=beside, sampling=sampling)
        worker = self._worker
        held = worker is not None and worker.alive() and worker.loaded
        if not held and config.to_json() not in self._built:
            return None
        with latch():
            try:
                _interrupt.check()
                m = self._retime_in(worker, config, beside, sampling) if held else None
                if m is None:
                    loaded = self._retime_built(config)  # the builder's executable, now kept in the worker
                    if not beside or loaded is None or self._worker is None:
                        return loaded
                    m = self._retime_in(self._worker, config, True, sampling)
                    if m is None:
                        return None
            except FellBack:
                return None
            except (TrialFailed, StudyError):
                if self._worker is not None and not self._worker.alive():
                    self._discard()
                raise
            except BaseException:
                self._discard()
                raise
        return Measurement.from_dict(m).replace(config=config)

    def _retime_in(
        self, worker: WorkerProcess, config: Config, beside: bool, sampling: Sampling
    ) -> dict[str, Any] | None:
        self._trial_id += 1
        return retime_in(worker, self._trial_id, config.to_json(), sampling, self.trial_timeout, beside)

    def device_info(self) -> dict[str, Any]:
        """The device trials run on (``_keys.device_info``'s fields). In a trace-only parent
        (``autotune.measuring._host.pin``) the worker reports it, so this starts one and waits for it."""
        from autotune.measuring import _host

        if _host.pinned() and _host.learned() is None and self.fallback_reason is None and not self._closed:
            self._spawn()
            self._await_ready()
        return _host.target_device()

    def _target_platform(self) -> str | None:
        """The platform to lower for when it is not this process's own (a trace-only parent's
        worker owns an accelerator), else None."""
        from autotune.measuring import _host

        if not _host.pinned():
            return None
        platform = self.device_info()["platform"]
        return None if platform == "cpu" else platform

    def start(self) -> None:
        """Start the worker process now (its JAX import overlaps with whatever the caller does
        next); measuring starts it anyway."""
        if not self._closed and self.fallback_reason is None:
            self._spawn()
            self._start_builders()

    def renew(self) -> bool:
        """Measure in a fresh worker from now on (its executables are lost; what builders compiled
        is loaded there instead of compiling again); False when in-process."""
        if self._closed or self.fallback_reason is not None:
            return False
        self._discard()
        self._spawn()
        self._renewed = True
        return True

    def _retain(self, keys: list[str]) -> None:
        """Keep only these configs' executables for :meth:`retime` (a worker that loaded nothing has none)."""
        self._keep_only(keys)
        if self.fallback_reason is not None:
            self._in_process()._retain(keys)
            return
        if self._worker is not None and self._worker.loaded and self._worker.alive() and not self._closed:
            self._trial_id += 1
            try:
                request_reply(
                    self._worker,
                    {"op": Op.RETAIN, "id": self._trial_id, "keys": keys},
                    time.monotonic() + self.startup_timeout,
                    "dropping kept executables",
                    rid=self._trial_id,
                )
            except TrialFailed:
                self._discard()  # nothing is kept now, which retime() will say

    def close(self) -> None:
        """Stop the worker and the builders (politely, then by SIGKILL) and reap them. Idempotent."""
        self._closed = True
        self._close_builders()
        if self._worker is not None and self._worker.ready is not None:  # one still starting has nothing to end
            self._worker.exit()
        self._discard()
        if self._in_process_runner is not None:
            self._in_process_runner.close()

    # -- in-process fallback --------------------------------------------------------------
    def _fall_back(self, reason: str) -> FellBack:
        from autotune.measuring import _host

        target = (_host.learned() or {}).get("platform", "cpu") if _host.pinned() else "cpu"
        if self.strict or target != "cpu":  # a trace-only parent would measure its CPU, not the device
            self._discard()
            raise StudyError(
                f"Cannot measure this function in a worker process: {reason}. "
                + (
                    "This process traces on the CPU and leaves the device to its worker, so it cannot "
                    "measure in-process; run the program with AUTOTUNE_RECORD=1 and tune it with "
                    "`autotune tune --recorded`, or tune it where the device is this process's."
                    if target != "cpu"
                    else "Pass isolate='auto' to measure it in-process, or isolate=False."
                )
            )
        self.fallback_reason = reason
        deadline = "trial_timeout" if self.trial_timeout else "the compile budget"
        lost = f"; {deadline} is a deadline there (a trial past it is dropped and finishes in the background)" + (
            "; trial_memory_gb does not apply" if self.trial_memory_gb else ""
        )
        warnings.warn(
            f"autotune: measuring in-process, without isolation: {reason}{lost}.", RuntimeWarning, stacklevel=5
        )
        self._discard()
        return FellBack()  # for the caller to raise: from now on it measures in-process

    def _in_process(self) -> InProcessRunner:
        if self.call is None:  # study-file mode never falls back
            raise StudyError(f"The worker for {self.study_file} is unavailable: {self.fallback_reason}")
        if self._in_process_runner is None:
            self._in_process_runner = InProcessRunner(
                self.call, self.sampling, recent=self.recent, trial_timeout=self.trial_timeout
            )
        return self._in_process_runner

    # -- study-file and import modes --------------------------------------------------------
    def _measure_traced(self, config: Config, budget: float | None, on_lowered) -> Measurement:
        self._spawn()
        started = time.monotonic()
        request = {
            "op": Op.TRIAL,
            "mode": self.mode,
            "config": config.to_dict(),
            "sampling": self.trial_sampling.to_dict(),
            "keep_outputs": True,
            "ask_lowered": on_lowered is not None,
        }
        done, reused = self._run(request, budget, started, parent_s=0.0, on_lowered=on_lowered)
        if done.get("skipped"):
            return reuse(reused, Stages(None, **{k: done["measurement"].get(k) for k in LOWERED_FIGURES}), config)
        outputs = [decode_array(d) for d in done.get("outputs") or []]
        return Measurement.from_dict(done["measurement"]).replace(config=config, outputs=outputs)
