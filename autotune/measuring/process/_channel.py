"""One worker process, from the parent's side: started in its own session, spoken to in JSON
lines, read with deadlines (and woken by a caught interrupt), killed as a process group,
and, when it died, diagnosed from its exit status and its last words on stderr."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from autotune import _interrupt
from autotune.measuring._oom import OutOfMemory, oom_reason, out_of_memory
from autotune.measuring.process._codec import SPILL_ENV, spill_dir
from autotune.measuring.process._protocol import PROTOCOL, Event

_SIGNAL_WORDS = {
    "SIGSEGV": "segmentation fault",
    "SIGABRT": "abort",
    "SIGBUS": "bus error",
    "SIGILL": "illegal instruction",
    "SIGFPE": "floating-point exception",
}


PREMAPPED_BYTES = 256 << 20
"""The host buffer a worker's TPU runtime maps for its transfers (``TPU_PREMAPPED_BUFFER_SIZE``)
where the user set none. Mapping libtpu's default buffer is most of a TPU process's start and
stop on a host without transparent hugepages: a v5e process that opens the chip and runs one
matmul took 15.0-15.6 s with the default and 5.5 s with 256 MiB (open 9.9 -> 2.8 s), and a 4 MB
transfer took the same 3.6 ms. The buffer stages host transfers only; the calls timed on the device
do not touch it. Measured: docs/results/tuning-wall.md."""


class Dead(Exception):
    """The worker closed its end: it died."""


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the worker's whole process group and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                proc.kill()
            except ProcessLookupError:
                pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
        pass
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def diagnose(rc: int | None, tail: str, pid: Any, when: str) -> tuple[str, str]:
    """(state, reason) for a worker that died with exit status ``rc`` and last words ``tail``."""
    said = f"; its last words: {tail}" if tail else ""
    oom_words = out_of_memory(tail) is not None
    if rc is not None and rc < 0:
        sig = signal_name(-rc)
        if sig == "SIGKILL":
            return "oom", (
                f"the worker (pid {pid}) was killed by SIGKILL {when}, which on Linux is almost "
                f"always the kernel's out-of-memory killer{said}"
            )
        if oom_words:
            return "oom", f"the worker (pid {pid}) ran out of memory {when} and died from {sig}{said}"
        words = _SIGNAL_WORDS.get(sig, "")
        return "crashed", f"the worker (pid {pid}) died from {sig}{f' ({words})' if words else ''} {when}{said}"
    state = "oom" if oom_words else "crashed"
    return state, f"the worker (pid {pid}) exited with status {rc} {when}{said}"


class WorkerProcess:
    """A started worker: ``python -m autotune.worker --parent PID [--memory-bytes N]``.

    Arguments:
        python: the interpreter.
        env: its environment.
        memory_bytes: ``RLIMIT_DATA`` for it, or None.
        module: the program it runs (a builder process: ``autotune.worker._build_child``).
    """

    def __init__(
        self, python: str, env: dict[str, str], memory_bytes: int | None = None, module: str = "autotune.worker"
    ):
        cmd = [python, "-m", module, "--parent", str(os.getpid())]
        if memory_bytes is not None:
            cmd += ["--memory-bytes", str(int(memory_bytes))]
        self.memory_bytes = memory_bytes
        self.stderr = tempfile.TemporaryFile(prefix="autotune-worker-", suffix=".log")
        self.spawned_at = time.monotonic()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**env, SPILL_ENV: spill_dir()},  # where large arrays travel both ways (_codec)
            start_new_session=True,
            close_fds=True,
        )
        self._finalizer = weakref.finalize(self, kill_group, self.proc)
        # What was read past the last event. A bytearray grows in place, and a read looks for the
        # line's end in its new chunk only: an event of hundreds of MB (a large function's
        # outputs) arrives in linear time, where re-copying and re-scanning the whole buffer per
        # chunk took minutes.
        self.buf = bytearray()
        self.received = 0  # bytes read from it so far (a sign of life while it sends a large event)
        self._signs: tuple[float | None, int] = (None, 0)  # what quiet_s last saw
        self._active_at = self.spawned_at
        self.ready: dict[str, Any] | None = None  # the "ready" event, once received
        self.loaded = False  # it has the function / the inputs
        self.compiled = 0  # trials it has compiled

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, message: dict[str, Any] | bytes) -> None:
        """Write one request line; raises :class:`Dead` when the worker is gone."""
        data = message if isinstance(message, bytes) else (json.dumps(message) + "\n").encode()
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise Dead() from None

    def read(self, deadline: float | None) -> dict[str, Any] | None:
        """The next event, None at the deadline; raises :class:`Dead` at end of file.

        While an interrupt latch is active its wakeup fd is watched too: a caught SIGINT,
        SIGTERM or SIGHUP kills this worker and raises :class:`~autotune._interrupt.Interrupted`
        at once, instead of after the trial.
        """
        fd = self.proc.stdout.fileno()
        end = self.buf.find(b"\n")
        while end < 0:
            latch = _interrupt.current()
            wake = latch.wakeup_fd if latch is not None else None
            if latch is not None and latch.requested:
                self.kill()
                latch.check()
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd] + ([wake] if wake is not None else []), [], [], timeout)
            if not ready:
                return None
            if wake is not None and wake in ready and fd not in ready:
                if latch.requested:
                    continue  # handled at the top of the loop
                _drain(wake)  # a stale wakeup byte: the signal was already acted on
                continue
            chunk = os.read(fd, 1 << 22)
            if not chunk:
                raise Dead()
            at = chunk.find(b"\n")
            end = -1 if at < 0 else len(self.buf) + at
            self.buf += chunk
            self.received += len(chunk)
        line = bytes(self.buf[:end])
        del self.buf[: end + 1]
        try:
            return json.loads(line)
        except ValueError:
            return {"event": "noise", "text": line[:200].decode("utf-8", "replace")}

    def cpu_s(self) -> float | None:
        """Its CPU seconds so far (user + system, every thread), None where unknown (no ``/proc``)."""
        try:
            with open(f"/proc/{self.pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def watch(self) -> float | None:
        """Start counting :meth:`quiet_s` from now; its CPU seconds now."""
        cpu = self.cpu_s()
        self._signs, self._active_at = (cpu, self.received), time.monotonic()
        return cpu

    def quiet_s(self, now: float) -> float:
        """Seconds since it last showed a sign of progress (CPU seconds used, bytes sent), or since
        :meth:`watch`: a process stopped (SIGSTOP) or blocked shows none. Where its CPU seconds cannot
        be read, the bytes alone count."""
        signs = (self.cpu_s(), self.received)
        if signs != self._signs:
            self._signs, self._active_at = signs, now
        return now - self._active_at

    def stderr_tail(self, n: int = 1500) -> str:
        """The last few non-empty lines the worker wrote to stderr, on one line."""
        try:
            self.stderr.flush()
            size = self.stderr.seek(0, os.SEEK_END)
            self.stderr.seek(max(0, size - n))
            text = self.stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return " | ".join(lines[-4:])[-600:]

    def death(self, when: str) -> tuple[str, str]:
        """(state, reason) for this worker, which closed its end: out of memory, the one line of
        :func:`~autotune.measuring._oom.oom_reason` under this worker's limit."""
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = None
        state, why = diagnose(rc, self.stderr_tail(), self.pid, when)
        if state == "oom":
            limit = None if self.memory_bytes is None else self.memory_bytes / 2**30
            why = oom_reason(when, OutOfMemory(said=why), limit)
        return state, why

    def exit(self) -> None:
        """Ask the worker to exit, wait briefly, then kill it anyway."""
        if self.alive():
            try:
                self.send({"op": "exit"})
                self.proc.wait(timeout=2)
            except (Dead, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        """SIGKILL the worker's process group, reap it, close its files (idempotent)."""
        kill_group(self.proc)
        self._finalizer.detach()
        try:
            self.stderr.close()
        except OSError:
            pass


def ready_problem(event: dict[str, Any] | None, startup_timeout: float) -> tuple[str, str] | None:
    """What is wrong with a new worker's first event, as (state, reason), or None when it is
    ready to serve this process (same protocol, same platform)."""
    from autotune.measuring.process._policy import platform

    if event is None:
        return "timeout", f"the worker process did not import JAX within {startup_timeout:g} s"
    if event.get("event") != Event.READY or event.get("protocol") != PROTOCOL:
        return "crashed", f"the worker process spoke an unexpected protocol: {str(event)[:200]}"
    mine = platform()
    if mine is not None and event.get("platform") != mine:
        return "error", f"the worker process runs on {event.get('platform')!r}, this process on {mine!r}"
    return None


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 64):
            pass
    except OSError:
        pass


def worker_env(extra: dict[str, str]) -> dict[str, str]:
    """The worker's environment: this one, the autotune package importable, ``extra`` on top."""
    root = str(Path(__file__).resolve().parents[__name__.count(".")])  # the folder above autotune/
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the parent may hold the GPU too
    env.setdefault("TPU_PREMAPPED_BUFFER_SIZE", str(PREMAPPED_BYTES))  # opens and closes the chip in a third
    env.update(extra)
    return env


def default_python() -> str:
    return sys.executable
