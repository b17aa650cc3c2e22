"""Following one trial in the worker: its events, its deadlines, and what stopping it means.

Two deadlines run while a trial is measured: the trial timeout (trace + lower + compile +
run) and, once the study has a best cost, the compile budget (trace + lower + compile, but
never before ``grace`` seconds of it: killing a compile that would finish sooner than a new
worker starts costs more wall time than it saves). Past either, the worker's process group
is killed and the trial fails with how many seconds of trace + lower + compile it had
already spent (``TrialFailed.compile_s_at_least``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from autotune import _interrupt
from autotune._errors import MAX_ERROR_TEXT
from autotune.measuring._runner import TrialFailed
from autotune.measuring._sampling import Sampling
from autotune.measuring._stages import Measurement
from autotune.measuring.process._channel import Dead, WorkerProcess
from autotune.measuring.process._protocol import Event, Mode, Op, oom_event_reason


@dataclass
class _Clock:
    """Where the trial is, and the trace + lower + compile seconds it has spent so far."""

    parent_s: float  # trace + lower already spent in the parent (export mode)
    phase: str = "waiting"
    phase_started: float = field(default_factory=time.monotonic)
    trace_s: float = 0.0
    lower_s: float = 0.0
    compile_s: float | None = None  # known once compiling ended

    def enter(self, phase: str, now: float) -> None:
        self.phase, self.phase_started = phase, now

    def spent(self, now: float) -> float:
        """Trace + lower + compile seconds so far (a lower bound when stopped midway)."""
        if self.compile_s is not None:
            return self.parent_s + self.trace_s + self.lower_s + self.compile_s
        running = now - self.phase_started if self.phase in ("trace", "compile") else 0.0
        return self.parent_s + self.trace_s + self.lower_s + running


@dataclass
class TrialRun:
    """What a trial needs to be followed."""

    worker: WorkerProcess
    request: dict[str, Any]
    started: float  # time.monotonic() when the trial began
    budget: float | None = None  # compile budget, seconds
    trial_timeout: float | None = None
    grace: float = 0.0  # never prune before this much trace + lower + compile
    parent_s: float = 0.0
    trial_memory_gb: float | None = None
    on_lowered: Callable[[str], Measurement | None] | None = None
    reused: Measurement | None = None  # what on_lowered returned (the worker skipped compiling)


def follow(run: TrialRun) -> dict[str, Any]:
    """Send ``run.request`` and follow its events to the ``result`` event.

    Raises:
        TrialFailed: timeout, pruned, crashed, oom (the worker is killed or dead), or error
            (the config raised; the worker stays).
    """
    worker, request = run.worker, run.request
    traced_here = request.get("mode") in Mode.TRACED_IN_WORKER
    clock = _Clock(parent_s=run.parent_s)
    compile_deadline = None
    try:
        worker.send(request)
    except Dead:
        state, why = worker.death("while receiving a request")
        worker.kill()
        raise TrialFailed(state, why) from None
    while True:
        deadlines = []
        if run.trial_timeout is not None:
            deadlines.append((run.started + run.trial_timeout, "timeout"))
        if compile_deadline is not None:
            deadlines.append((compile_deadline, "pruned"))
        deadline, kind = min(deadlines) if deadlines else (None, None)
        try:
            event = worker.read(deadline)
        except Dead:
            state, why = worker.death(f"during {clock.phase}")
            worker.kill()
            raise TrialFailed(state, why) from None
        now = time.monotonic()
        if event is None:
            _stop(run, clock, kind, now)
        name = event.get("event")
        if event.get("id") not in (None, request["id"]):
            continue
        if name == Event.STARTED:
            clock.enter("trace" if traced_here else "load", now)
            if run.budget is not None and traced_here:
                compile_deadline = now + max(run.budget, run.grace)
        elif name == Event.LOWERED:
            clock.trace_s, clock.lower_s = float(event.get("trace_s", 0.0)), float(event.get("lower_s", 0.0))
            clock.enter("lower", now)
            if request.get("ask_lowered"):
                run.reused = run.on_lowered(event["program_hash"]) if run.on_lowered is not None else None
                _reply(worker, {"op": Op.LOWERED_REPLY, "id": request["id"], "skip": run.reused is not None})
        elif name == Event.COMPILE_START:
            if traced_here:
                clock.trace_s, clock.lower_s = float(event.get("trace_s", 0.0)), float(event.get("lower_s", 0.0))
            clock.enter("compile", now)
            if run.budget is not None:
                left = run.budget - clock.parent_s - clock.trace_s - clock.lower_s
                compile_deadline = now + max(left, run.grace - clock.trace_s - clock.lower_s)
        elif name == Event.COMPILE_END:
            clock.compile_s = float(event.get("compile_s", now - clock.phase_started))
            clock.enter("run", now)
            compile_deadline = None
        elif name in (Event.RESULT, Event.REFUSED):  # refused: a built executable the worker cannot load
            return event
        elif name == Event.ERROR:
            text = f"{event.get('type')}: {event.get('message')}"
            if event.get("oom"):
                worker.kill()  # a worker that ran out of memory is replaced
                why = oom_event_reason(event, run.trial_memory_gb, event.get("phase", clock.phase))
                raise TrialFailed("oom", why[:MAX_ERROR_TEXT])
            raise TrialFailed("error", text[:MAX_ERROR_TEXT])


def latch():
    """The active interrupt latch, or one of our own while we wait on the worker (so a
    signal stops the wait at once and never lands inside a garbage-collector callback)."""
    return contextlib.nullcontext() if _interrupt.current() is not None else _interrupt.InterruptLatch()


def _reply(worker: WorkerProcess, message: dict[str, Any]) -> None:
    try:
        worker.send(message)
    except Dead:
        pass  # the next read diagnoses it


def _stop(run: TrialRun, clock: _Clock, kind: str | None, now: float) -> None:
    """A deadline passed: kill the worker and say why."""
    pid = run.worker.pid
    run.worker.kill()
    spent = clock.spent(now)
    if kind == "pruned":
        waited = (
            (f" (killed once it had also run {run.grace:.3g} s, as long as starting a new worker takes)")
            if run.grace > run.budget
            else ""
        )
        raise TrialFailed(
            "pruned",
            (
                f"stopped during {clock.phase} after {spent:.3g} s of trace+lower+compile, over the compile budget "
                f"of {run.budget:.3g} s (best cost / compile weight), so this config can no longer win{waited}; "
                f"worker pid {pid} killed"
            ),
            compile_s_at_least=spent,
        )
    raise TrialFailed(
        "timeout",
        (
            f"over the trial timeout of {run.trial_timeout:g} s during {clock.phase} "
            f"({now - run.started:.3g} s in all); worker pid {pid} killed"
        ),
        compile_s_at_least=spent,
    )


def request_reply(
    worker: WorkerProcess,
    message: dict[str, Any] | bytes,
    deadline: float | None,
    what: str,
    timeout_s: float | None = None,
    rid: int | None = None,
) -> dict[str, Any]:
    """Send one request that is answered by one event (load, retime, retain); events of
    another request id and lines that were not JSON are skipped."""
    try:
        worker.send(message)
        while True:
            event = worker.read(deadline)
            if event is None or (event.get("event") != Event.NOISE and event.get("id") in (None, rid)):
                break
    except Dead:
        state, why = worker.death(what)
        worker.kill()
        raise TrialFailed(state, why) from None
    if event is None:
        pid = worker.pid
        worker.kill()
        limit = f" within {timeout_s:g} s" if timeout_s is not None else ""
        raise TrialFailed(
            "timeout", f"the worker (pid {pid}) did not answer{limit} while {what}; killed", compile_s_at_least=None
        )
    return event


def retime_in(
    worker: WorkerProcess, rid: int, key: str, sampling: Sampling, timeout_s: float | None, beside: bool = False
) -> dict | None:
    """Ask the worker to time config ``key``'s kept executable again as ``sampling`` says (``beside``:
    while it compiles beside the calls): the measurement dict, or None when it is not kept. Raises
    :class:`TrialFailed` (timeout, crash, error)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    request = {"op": Op.RETIME, "id": rid, "key": key, "sampling": sampling.to_dict()}
    if beside:
        request["beside"] = True
    event = request_reply(
        worker,
        request,
        deadline,
        "re-timing a kept executable",
        timeout_s,
        rid,
    )
    if event.get("event") == Event.GONE:
        return None
    if event.get("oom"):  # the worker is replaced, as after a trial that ran out
        worker.kill()
        raise TrialFailed("oom", oom_event_reason(event, worker.memory_bytes and worker.memory_bytes / 2**30, "run"))
    if event.get("event") != Event.RESULT:
        raise TrialFailed("error", f"{event.get('type')}: {event.get('message')}"[:MAX_ERROR_TEXT])
    return event["measurement"]


class Misplaced(Exception):
    """The worker could not place the arguments where the call has them; the message says how."""


def load_inputs(
    worker: WorkerProcess,
    message: Any,
    mode: str,
    digest: str | None,
    timeout_s: float,
    placement: dict[str, Any] | None = None,
) -> str | None:
    """Send the worker its inputs (``message``, by ``mode``) and return their digest, which must
    equal ``digest`` (the first worker's) when given. Raises :class:`TrialFailed` ("error"), or
    :class:`Misplaced` when the worker's ``placement`` of the arguments is not the given one."""
    from autotune.measuring.process._shardings import differs

    seen = (worker.ready or {}).get("device_ids") or ()
    if placement is not None and not set(placement["devices"]) <= set(seen):
        raise Misplaced(
            f"the arguments are on devices {placement['devices']}, but the worker process sees "
            f"only devices {list(seen)} (its XLA_FLAGS: {(worker.ready or {}).get('xla_flags')!r})"
        )
    event = request_reply(worker, message, time.monotonic() + timeout_s, "loading the inputs", timeout_s)
    if event.get("event") == Event.ERROR:
        if event.get("type") == "NotPortable":
            raise Misplaced(str(event.get("message")))
        raise TrialFailed("error", f"{event.get('type')}: {event.get('message')}")
    why = None if placement is None else differs(placement, event.get("placement"))
    if why is not None:
        raise Misplaced(why)
    if digest is not None and event.get("digest") != digest:
        raise TrialFailed(
            "error",
            (
                "the worker decoded other inputs than this process sent"
                if mode == Mode.IMPORT
                else "the restarted worker got other inputs than the first one (examples() is not deterministic; "
                "seed its random inputs), so its outputs cannot be compared"
            ),
        )
    return event.get("digest") if digest is None else digest
