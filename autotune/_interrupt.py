"""The one interrupt latch: Ctrl-C, SIGTERM and SIGHUP during tuning.

``timeout``, Slurm and ``docker stop`` send SIGTERM; a dropped ssh session sends SIGHUP;
both must end a study as cleanly as Ctrl-C: the trial being measured is closed as
``interrupted`` and everything completed is kept. Python would raise
``KeyboardInterrupt`` wherever the main thread happens to be (inside a garbage-collector
callback it is printed as "Exception ignored" and lost), and SIGTERM/SIGHUP would kill the
process outright, so while a :class:`InterruptLatch` is active the first signal only sets
a flag, which the study checks between steps (:meth:`InterruptLatch.check`), and makes
:attr:`InterruptLatch.wakeup_fd` readable, so code that waits on a worker process wakes at
once. A second signal raises :class:`Interrupted` immediately.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

SIGNALS = tuple(
    s
    for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None))
    if s is not None
)

_active: list[InterruptLatch] = []


class Interrupted(KeyboardInterrupt):
    """Tuning was interrupted by a signal.

    Attributes:
        signum: the signal number (``signal.SIGINT``, ``SIGTERM`` or ``SIGHUP``).
    """

    def __init__(self, signum: int = signal.SIGINT):
        self.signum = int(signum)
        super().__init__(self.name)

    @property
    def name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by this signal: 128 + its number."""
        return 128 + self.signum


def current() -> InterruptLatch | None:
    """The innermost active latch of this process, or None."""
    return _active[-1] if _active else None


def check() -> None:
    """Raise :class:`Interrupted` if the active latch (if any) has caught a signal."""
    latch = current()
    if latch is not None:
        latch.check()


class InterruptLatch:
    """Context manager: catch SIGINT, SIGTERM and SIGHUP, act on them between steps.

    Handlers are installed only in the main thread and only for signals whose handler
    is still Python's default (so an application's own handler is left alone); nested
    latches share the outermost one's handlers.
    """

    def __init__(self):
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}
        self._pipe: tuple[int, int] | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def wakeup_fd(self) -> int | None:
        """An fd that becomes readable once a signal was caught (for ``select``), or None."""
        owner = _active[0] if _active else self
        return owner._pipe[0] if owner._pipe is not None else None

    def __enter__(self) -> InterruptLatch:
        if not _active and threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                current_handler = signal.getsignal(sig)
                if current_handler in (signal.default_int_handler, signal.SIG_DFL):
                    self._previous[sig] = signal.signal(sig, self._handle)
            if self._previous:
                r, w = os.pipe()
                os.set_blocking(r, False)
                os.set_blocking(w, False)
                self._pipe = (r, w)
        _active.append(self)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        for latch in _active:
            if latch.signum is not None:
                raise Interrupted(signum)
        for latch in _active:
            latch.signum = signum
        if self._pipe is not None:
            try:
                os.write(self._pipe[1], b"!")
            except OSError:
                pass

    def check(self) -> None:
        """Raise :class:`Interrupted` once for a caught signal."""
        if self.signum is not None:
            signum, self.signum = self.signum, None
            owner = _active[0] if _active else self
            if owner._pipe is not None:
                try:
                    while os.read(owner._pipe[0], 64):
                        pass
                except OSError:
                    pass
            raise Interrupted(signum)

    def __exit__(self, *exc: Any) -> bool:
        if _active and _active[-1] is self:
            _active.pop()
        elif self in _active:
            _active.remove(self)
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        if self._pipe is not None:
            for fd in self._pipe:
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._pipe = None
        return False
