"""The worker-process half of :class:`~autotune.measuring.process.WorkerRunner`: start a worker (or
keep the warm one), wait until it has imported JAX, load the call's inputs into it, and send
one trial and follow it to its result. ``_worker_runner`` holds the Runner contract and the three
ways a function gets into the worker (export mode: ``_exported``); this module only drives the process.
"""

from __future__ import annotations

import time
from typing import Any

from autotune._errors import StudyError
from autotune.measuring import _host, _wall
from autotune.measuring._runner import TrialFailed
from autotune.measuring._stages import Measurement
from autotune.measuring.process._channel import Dead, WorkerProcess, ready_problem, worker_env
from autotune.measuring.process._follow import Misplaced, TrialRun, follow, load_inputs
from autotune.measuring.process._policy import CompilePolicy, compile_policy, jax_env, platform
from autotune.measuring.process._protocol import Mode, Op

# A worker refused a device another process holds: how long to keep trying, and how often.
BUSY_RETRY_S, BUSY_PAUSE_S = 20.0, 1.0


def _start_failure(why: str) -> str:
    """Why trials run in-process when the first worker could not start, naming the isolated path
    when the reason is a device this process holds."""
    if _host.busy(why) and _host.holds_devices():
        return (
            "this process holds the accelerator, which admits one process at a time, so no worker can open it; "
            "to tune isolated, run the program with AUTOTUNE_RECORD=1, then `autotune tune --recorded`"
        )
    return f"the worker process could not start ({why})"


def _held_elsewhere(why: str) -> str:
    """The error when another process keeps the device for longer than a worker start waits."""
    return (
        f"Cannot start a worker process: another process holds the device ({why.strip()[:300]}), and it is "
        f"still held after {BUSY_RETRY_S:g} s. An accelerator such as a TPU chip admits one process at a "
        "time: stop the program that holds it and tune again, or tune inside that program with fn.tune(...)."
    )


class WorkerHost:
    """Drives :attr:`_worker`; the subclass sets the attributes read here in its ``__init__``
    and says how to fall back to in-process measurement (:meth:`_fall_back`)."""

    call: Any  # the Call measured; None in study-file mode
    mode: Mode
    policy: CompilePolicy | None
    python: str
    startup_timeout: float
    prune_grace_s: float | None
    startup_s: float | None
    trial_timeout: float | None
    trial_memory_gb: float | None
    worker_info: dict[str, Any]
    study_file: str | None
    index: int
    _worker: WorkerProcess | None
    _starts: int
    _ever_ready: bool
    _trial_id: int
    _args_line: bytes | None
    _import_request: dict[str, Any] | None
    _input_digest: str | None
    _placement: dict[str, Any] | None

    def _fall_back(self, reason: str) -> Exception:
        raise NotImplementedError

    def _run(
        self, request: dict[str, Any], budget: float | None, started: float, parent_s: float, on_lowered=None
    ) -> tuple[dict[str, Any], Measurement | None]:
        """Send one trial and follow it to its result (see ``_trial.follow``)."""
        setup = time.monotonic()
        self._await_ready()
        self._load()
        started += time.monotonic() - setup  # starting a worker is not the trial's time
        self._trial_id += 1
        request["id"] = self._trial_id
        grace = self.prune_grace_s if self.prune_grace_s is not None else (self.startup_s or 0.0)
        run = TrialRun(
            self._worker,
            request,
            started,
            budget,
            self.trial_timeout,
            grace,
            parent_s,
            self.trial_memory_gb,
            on_lowered,
        )
        try:
            done = follow(run)
        except TrialFailed:
            if self._worker is not None and not self._worker.alive():
                self._discard()
                self._spawn()  # the replacement imports JAX while this process records the trial
            raise
        if not done.get("skipped") and done.get("compiled_in") != "builder" and done.get("event") == "result":
            self._worker.compiled += 1  # a compile in this worker (a loaded executable is none)
        return done, run.reused

    def _spawn(self) -> None:
        """Start a worker if none is alive (without waiting for it to be ready); under a
        fresh-worker-per-trial policy (GPU), replace one that has already compiled."""
        if self.policy is None:
            target = platform()  # None in a trace-only parent before its first worker reported
            self.policy = compile_policy(target) if target is not None else None
        worker = self._worker
        if worker is not None and worker.alive():
            if not (self.policy is not None and self.policy.fresh_worker_per_trial and worker.compiled):
                return
        self._discard()
        self._starts += 1
        memory = None if self.trial_memory_gb is None else int(self.trial_memory_gb * 2**30)
        policy_env = self.policy.env if self.policy is not None else {}
        self._worker = WorkerProcess(self.python, worker_env({**jax_env(), **policy_env}), memory)

    def _discard(self) -> None:
        """Kill and reap the current worker (the next trial starts a new one)."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill()

    def _await_ready(self) -> None:
        if self._worker.ready is not None:
            return
        with _wall.timed("process starts"):  # this process waits for the worker to import JAX, open the device
            self._wait_ready()

    def _wait_ready(self) -> None:
        worker = self._worker
        busy_until = time.monotonic() + BUSY_RETRY_S
        while True:
            try:
                event = worker.read(time.monotonic() + self.startup_timeout)
                break
            except Dead as exc:
                state, why = worker.death("while starting")
                first = not self._ever_ready
                self._discard()
                elsewhere = _host.busy(why) and not _host.holds_devices()
                if elsewhere and time.monotonic() < busy_until:
                    # another process holds the device: our own last worker a moment ago (libtpu
                    # frees a chip with a lag), or a program that may be about to exit
                    time.sleep(BUSY_PAUSE_S)
                    self._spawn()
                    worker = self._worker
                    continue
                if elsewhere:  # measuring here instead would open the same device, or time the CPU
                    raise StudyError(_held_elsewhere(why)) from None
                if state == "oom":  # measuring in-process would drop the memory limit the study was given
                    raise TrialFailed("oom", why) from None
                if first and self.call is not None:
                    raise self._fall_back(_start_failure(why)) from exc
                raise TrialFailed("crashed", f"the worker process could not start: {why}") from None
        problem = ready_problem(event, self.startup_timeout)
        if problem is not None:
            self._discard()
            if problem[0] != "error" or self.call is None:
                raise TrialFailed(*problem)
            raise self._fall_back(problem[1])
        worker.ready = self.worker_info = event
        self._ever_ready = True
        self.startup_s = time.monotonic() - worker.spawned_at
        if event.get("device"):
            _host.learn(event["device"])
        if self.policy is None:  # a trace-only parent learns the platform from its first worker
            self.policy = compile_policy(event.get("platform") or "cpu")
            if self.policy.env:  # the policy changes the worker's environment: start it again so
                self._discard()
                self._spawn()
                self._wait_ready()  # within the caller's charge of the start

    def _load(self) -> None:
        worker = self._worker
        if worker.loaded:
            return
        message = {
            Mode.EXPORT: self._args_line,
            Mode.IMPORT: self._import_request,
            Mode.STUDY: {"op": Op.LOAD_STUDY, "path": self.study_file, "index": self.index},
        }[self.mode]
        try:
            self._input_digest = load_inputs(
                worker,
                message,
                self.mode,
                self._input_digest,
                self.startup_timeout,
                None if self.mode == Mode.STUDY else self._placement,
            )
        except Misplaced as exc:  # measuring here beats measuring another program there
            raise self._fall_back(f"the worker process cannot run the program as the call does: {exc}") from None
        except TrialFailed:
            self._discard()
            raise
        worker.loaded = True
