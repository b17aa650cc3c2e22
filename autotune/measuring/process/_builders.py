"""Builder processes, the parent's side: a pool of long-lived processes that compile configs on
the host's cores while the worker only loads and measures (``_build_child`` is their program).

A build is keyed by its program hash: configs that lower to one program share one build while
it is pending. Builds wait in a queue for an idle builder; the first request a new pool serves
is a probe (a tiny program compiled for the target), and where it fails no build runs: the
runner compiles in the worker as it does without builders and says why once.

A builder is a process of its own, so a compile *can* be stopped: a build past the trial timeout
(wall seconds since a builder took it) is killed as ``timeout``, and one past the compile budget
(the parent's trace + lower plus the builder's process CPU seconds, the figure the objective
charges; wall seconds where the CPU time cannot be read) as ``pruned``, but never before
``grace`` seconds (as in the worker) unless another builder is idle; the builder is replaced.
Without a trial timeout, a builder quiet on a build (no CPU seconds used, no bytes sent) for
:data:`STUCK_FACTOR` times the slowest build seen, at least :data:`STUCK_FLOOR_S`, is stuck: it is
replaced, the worker compiles the config, and one warning names it and the option that bounds a build.
The parent is single-threaded: the pool advances (reads events, starts queued builds, applies
the deadlines) whenever it is polled, which waiting on a build does.
"""

from __future__ import annotations

import os
import select
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from autotune import _interrupt
from autotune.measuring._runner import TrialFailed
from autotune.measuring.process._channel import Dead, WorkerProcess
from autotune.measuring.process._protocol import PROTOCOL, TPU_TOPOLOGIES, Event, Op, oom_event_reason

MODULE = "autotune.worker._build_child"
POLL_S = 0.05  # how often a wait re-checks the deadlines
MAX_BUILDERS = 4  # builders="auto" starts at most this many
STUCK_FACTOR = 10.0  # a build this many times the slowest seen without any progress: its builder is stuck
STUCK_FLOOR_S = 30.0  # ... and never sooner than this


def auto_count(value: int | str, *, pinned: bool, device: dict[str, Any], cores: int | None = None) -> int:
    """How many builders ``builders=value`` means: an int is itself; ``"auto"`` is
    min(:data:`MAX_BUILDERS`, cores - 1), at least 1, for a parent pinned to trace only whose
    worker owns a TPU chip builders can compile for (:data:`TPU_TOPOLOGIES`), else 0 (on a CPU
    target builders would compile on the cores the runtime is timed on; other devices have no
    deviceless compile here).

    Example::

        >>> tpu = {"platform": "tpu", "device_kind": "TPU v5 lite", "device_count": 1}
        >>> auto_count("auto", pinned=True, device=tpu, cores=8), auto_count("auto", pinned=False, device=tpu)
        (4, 0)
    """
    if value != "auto":
        return int(value)
    known = device.get("platform") == "tpu" and device.get("device_kind") in TPU_TOPOLOGIES
    if not pinned or not known or int(device.get("device_count") or 1) != 1:
        return 0
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(MAX_BUILDERS, cores - 1))


@dataclass(eq=False)
class Build:
    """One program to compile, and what became of it: ``result`` (the ``built`` event), ``failed``
    (a :class:`TrialFailed`, the config's outcome: timeout, pruned, oom), or ``error`` (the builder
    raised or crashed compiling it; the runner compiles it instead)."""

    key: str
    request: dict[str, Any]
    parent_cpu_s: float = 0.0  # trace + lower in the parent, charged against the budget too
    parent_s: float = 0.0
    started: float | None = None  # when a builder took it
    cpu_at_start: float | None = None
    pid: int | None = None
    result: dict[str, Any] | None = None
    failed: TrialFailed | None = None
    error: str | None = None

    @property
    def done(self) -> bool:
        return self.result is not None or self.failed is not None or self.error is not None


@dataclass(eq=False)
class _Builder:
    proc: WorkerProcess
    ready: bool = False
    build: Build | None = None
    rid: int = 0
    failures: list[str] = field(default_factory=list)


class BuilderPool:
    """``n`` builder processes compiling for ``target`` (the worker's device: platform,
    device_kind, device_count; None until it is set, when the pool starts before the worker
    reported), started at once (they import JAX while the parent traces).

    Arguments:
        python: their interpreter; env: their environment (``JAX_PLATFORMS=cpu`` is forced).
        memory_bytes: ``RLIMIT_DATA`` of each, as the worker's.
        startup_timeout: seconds a builder may take to import JAX.
        trial_timeout: wall seconds one build may take, or None.
    """

    def __init__(
        self,
        n: int,
        target: dict[str, Any] | None,
        *,
        python: str,
        env: dict[str, str],
        memory_bytes: int | None = None,
        startup_timeout: float = 300.0,
        trial_timeout: float | None = None,
    ):
        self.n, self.target = int(n), dict(target) if target is not None else None  # None: set it before builds
        self.python, self.memory_bytes = python, memory_bytes
        self.env = {**env, "JAX_PLATFORMS": "cpu", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
        self.startup_timeout, self.trial_timeout = startup_timeout, trial_timeout
        self.unavailable: str | None = None  # why nothing can be built (the probe, or builders never start)
        self.deviceless: bool | None = None  # known once the probe built
        self.startup_s: float | None = None
        self.budget: float | None = None  # the compile budget running builds are held to
        self.grace, self.built = 0.0, 0
        self.at_once: int | None = None  # the most builds running at once (None: one per builder)
        self.slowest_s = 0.0  # the longest a build took, from a builder taking it to its answer
        self._rid = 0
        self._queue: deque[Build] = deque()
        self._pending: dict[str, Build] = {}
        self._probe = Build("probe", {"op": Op.PROBE})
        self._queue.append(self._probe)
        self._builders = [self._spawn() for _ in range(self.n)]

    # -- public ------------------------------------------------------------------------------
    def submit(self, key: str, request: dict[str, Any], parent_cpu_s: float = 0.0, parent_s: float = 0.0) -> Build:
        """Queue a build of ``request`` (a trial request of export mode) under ``key``; a build
        of the same key still pending is shared."""
        held = self._pending.get(key)
        if held is not None and not held.done:
            return held
        build = Build(key, {"op": Op.BUILD, **_build_fields(request)}, parent_cpu_s, parent_s)
        self._pending[key] = build
        self._queue.append(build)
        self.poll(0.0)
        return build

    def wait(self, build: Build, budget: float | None = None, grace: float = 0.0) -> dict[str, Any] | None:
        """Wait for ``build``: its ``built`` event, or None when the runner must compile it
        (no builds here, or the builder could not). Raises the build's :class:`TrialFailed`
        (timeout, pruned past ``budget`` seconds, oom, crashed), or ``Interrupted``."""
        self.budget, self.grace = budget, grace
        while not build.done and self.unavailable is None:
            self.poll(POLL_S)
        if build.failed is not None:
            raise build.failed
        return build.result

    def cancel(self, build: Build) -> None:
        """Drop a build nobody will wait for (a running one's builder is replaced)."""
        if build.done:
            return
        build.error = "cancelled"
        if build in self._queue:
            self._queue.remove(build)
        for b in self._builders:
            if b.build is build:
                self._replace(b)
        if self._pending.get(build.key) is build:
            del self._pending[build.key]

    def pending(self) -> list[Build]:
        """Builds queued or running."""
        return [b for b in self._pending.values() if not b.done]

    def close(self) -> None:
        """End every builder (an idle one politely, a busy one at once) and reap it. Idempotent."""
        for b in self._builders:
            if b.ready and b.build is None:
                b.proc.exit()
            else:
                b.proc.kill()
        self._builders = []
        for build in list(self._queue):
            build.error = build.error or "the builders were closed"
        self._queue.clear()

    # -- driving the processes -----------------------------------------------------------
    def poll(self, timeout: float) -> None:
        """Read what the builders said (waiting up to ``timeout`` s), apply the deadlines and
        start queued builds on idle builders."""
        self._dispatch()
        watched = {b.proc.proc.stdout.fileno(): b for b in self._builders if not b.ready or b.build is not None}
        latch = _interrupt.current()
        wake = latch.wakeup_fd if latch is not None else None
        if latch is not None and latch.requested:
            latch.check()
        readable = [b for b in watched.values() if b"\n" in b.proc.buf]
        if not readable:
            fds = list(watched) + ([wake] if wake is not None else [])
            if fds:
                ready, _, _ = select.select(fds, [], [], timeout)
            else:
                time.sleep(timeout)
                ready = []
            if wake is not None and wake in ready and latch.requested:
                latch.check()
            readable = [watched[fd] for fd in ready if fd in watched]
        for b in readable:
            while b in self._builders:
                try:
                    event = b.proc.read(time.monotonic())
                except Dead:
                    self._died(b)
                    break
                if event is None:
                    break
                self._event(b, event)
        self._deadlines(time.monotonic())
        self._dispatch()

    def _spawn(self) -> _Builder:
        return _Builder(WorkerProcess(self.python, self.env, self.memory_bytes, module=MODULE))

    def _replace(self, b: _Builder, failure: str | None = None) -> None:
        b.proc.kill()
        if b not in self._builders:  # the pool gave up meanwhile
            return
        fresh = self._spawn()
        if failure is not None:
            fresh.failures = b.failures + [failure]
        self._builders[self._builders.index(b)] = fresh
        if len(fresh.failures) >= 2:  # this slot never came up twice running: builders cannot start here
            self._give_up(f"a builder process could not start: {failure}")

    def _give_up(self, why: str) -> None:
        self.unavailable = self.unavailable or why
        for build in list(self._queue) + [b.build for b in self._builders if b.build is not None]:
            build.error = build.error or why
        self._queue.clear()
        for b in self._builders:
            b.proc.kill()
        self._builders = []

    def _dispatch(self) -> None:
        while self._queue and self.unavailable is None and self.target is not None:
            if self.deviceless is None and self._queue[0] is not self._probe:
                if self._probe in self._queue:
                    self._queue.remove(self._probe)
                    self._queue.appendleft(self._probe)
                elif not self._probe.done:
                    return  # the probe is running: nothing else starts before it answers
            idle = next((b for b in self._builders if b.ready and b.build is None and b.proc.alive()), None)
            if idle is None or sum(b.build is not None for b in self._builders) >= (self.at_once or self.n):
                return
            build = self._queue.popleft()
            self._rid += 1
            idle.rid, idle.build = self._rid, build
            build.started, build.pid = time.monotonic(), idle.proc.pid
            build.cpu_at_start = idle.proc.watch()
            try:
                idle.proc.send({**build.request, "id": self._rid, "target": self.target})
            except Dead:
                self._died(idle)

    def _event(self, b: _Builder, event: dict[str, Any]) -> None:
        name = event.get("event")
        if name == Event.READY:
            if event.get("protocol") != PROTOCOL:
                self._give_up(f"the builder process spoke an unexpected protocol: {str(event)[:200]}")
                return
            b.ready, b.failures = True, []
            self.startup_s = time.monotonic() - b.proc.spawned_at
            return
        build = b.build
        if build is None or event.get("id") != b.rid or name not in (Event.BUILT, Event.ERROR):
            return
        b.build = None
        if name == Event.BUILT:
            self.slowest_s = max(self.slowest_s, time.monotonic() - (build.started or b.proc.spawned_at))
            build.result = event
            self.built += build is not self._probe
            if build is self._probe:
                self.deviceless = bool(event.get("deviceless"))
        else:
            text = f"{event.get('type')}: {event.get('message')}"
            if event.get("oom"):
                why = oom_event_reason(event, self.memory_bytes and self.memory_bytes / 2**30, "compile")
                build.failed = TrialFailed("oom", f"{why.replace('the worker', 'the builder')} (pid {b.proc.pid})")
                self._replace(b)
            else:
                build.error = text
            if build is self._probe:
                self._give_up(f"a builder process cannot compile for {self._device()}: {event.get('message')}")
        self._settled(build)

    def _died(self, b: _Builder) -> None:
        build = b.build
        state, why = b.proc.death("while compiling" if build is not None else "while starting")
        if build is not None:
            b.build = None
            if build is self._probe:
                build.error = why
                self._give_up(f"a builder process died compiling a tiny program for {self._device()}: {why}")
                return
            why = why.replace("the worker", "the builder")
            if state == "oom":
                build.failed = TrialFailed(state, why)
            else:  # a crash may be the builder's own (a deviceless compile): the worker compiles it, isolated too
                build.error = why
            self._settled(build)
            self._replace(b)
        else:
            self._replace(b, why if not b.ready else None)

    def _deadlines(self, now: float) -> None:
        for b in list(self._builders):
            if b not in self._builders:  # the pool gave up meanwhile
                return
            if not b.ready and now - b.proc.spawned_at > self.startup_timeout:
                self._replace(b, f"it did not import JAX within {self.startup_timeout:g} s")
                continue
            build = b.build
            if build is None or build.started is None:
                continue
            cpu, quiet = b.proc.cpu_s(), b.proc.quiet_s(now)
            if self.trial_timeout is None and quiet >= self.stuck_after_s:
                self._stuck(b, build, quiet)
                continue
            ran = now - build.started
            if build is self._probe:
                if ran > self.startup_timeout:
                    build.error = f"compiling a tiny program took over {self.startup_timeout:g} s"
                    self._give_up(f"a builder process cannot compile for {self._device()}: {build.error}")
                    return
                continue
            spent = build.parent_cpu_s + (cpu - build.cpu_at_start) if None not in (cpu, build.cpu_at_start) else None
            spent = build.parent_s + ran if spent is None else spent
            held = build.parent_s + ran < self.grace and not self._spare(b)  # within the grace: no kill yet
            if self.trial_timeout is not None and ran >= self.trial_timeout:
                why = f"compiling took over the trial timeout of {self.trial_timeout:g} s in builder pid {b.proc.pid}"
                build.failed = TrialFailed("timeout", f"{why}; killed", compile_s_at_least=spent)
            elif self.budget is not None and spent >= self.budget and not held:
                build.failed = TrialFailed(
                    "pruned",
                    f"stopped compiling after {spent:.3g} s of trace+lower+compile, over the compile budget of "
                    f"{self.budget:.3g} s (best cost / compile weight), so this config can no longer win; "
                    f"builder pid {b.proc.pid} killed",
                    compile_s_at_least=spent,
                )
            else:
                continue
            b.build = None
            self._settled(build)
            self._replace(b)

    def _spare(self, b: _Builder) -> bool:
        """Whether another builder is up and idle: then killing ``b`` for its budget costs the study
        nothing (its replacement starts in the background), so the grace does not hold it."""
        return any(o is not b and o.ready and o.build is None and o.proc.alive() for o in self._builders)

    @property
    def stuck_after_s(self) -> float:
        """Seconds without any progress after which a builder holding a build is stuck (no trial timeout)."""
        return max(STUCK_FLOOR_S, STUCK_FACTOR * self.slowest_s)

    def _stuck(self, b: _Builder, build: Build, idle_s: float) -> None:
        """Abandon a stuck builder's build (the runner compiles it) and replace the builder; say so once."""
        b.build = None
        build.error = (
            f"builder pid {b.proc.pid} showed no sign of progress for {idle_s:.0f} s (no CPU time used, nothing "
            f"sent; the slowest build took {self.slowest_s:.2g} s)"
        )
        if build is self._probe:
            self._give_up(f"{build.error} compiling a tiny program for {self._device()}")
            return
        self._settled(build)
        self._replace(b)
        warnings.warn(
            f"autotune: {build.error} compiling a config: killed and replaced, and the worker compiles the config "
            "instead; a trial timeout (--trial-timeout, trial_timeout=) bounds every build.",
            RuntimeWarning,
            stacklevel=2,
        )

    def _settled(self, build: Build) -> None:
        if self._pending.get(build.key) is build:
            del self._pending[build.key]

    def _device(self) -> str:
        target = self.target or {}
        return f"{target.get('device_kind') or target.get('platform')}"


def _build_fields(request: dict[str, Any]) -> dict[str, Any]:
    """What a builder needs of an export-mode trial request."""
    return {k: request.get(k) for k in ("program", "donate", "compiler_options", "program_hash")}
