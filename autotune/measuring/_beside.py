"""A compile running beside the calls being timed: what tier-up's background compile does to them.

``retime(config, beside=True)`` (every runner) times a kept executable's calls while a thread
compiles a stand-in program again and again (:func:`compiling`), so that a study tuned for
``@at.autotuned(tier_up=True)`` can measure the slowdown ``s`` of the default's calls during a
background compile (`autotune.study._slowdown`) instead of assuming one. The stand-in is a fixed
program, not the winner, because a worker fed by builders never holds the winner's lowered
program; how far its figure is from the winner's own is measured (:func:`_stand_in`). It compiles
for the runner's own backend (a TPU worker compiles for its chip, as the decorator's thread would
in the user's process). A stand-in that cannot compile there fails the block with
:class:`BesideFailed` rather than time the calls alone.

The block also measures the other side: how much longer the stand-in compiles beside the calls
than alone (:attr:`Compiles.stretch`). On a host whose cores the calls keep busy (the CPU as the
device) the compile waits for them, and a winner compiled beside the default arrives that much
later (the tiered cost's ``c``); beside an accelerator's calls it runs on spare host cores.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["BesideFailed", "Compiles", "compiled_beside", "compiling"]

_finished = [0]  # stand-in compiles finished in this process


class BesideFailed(RuntimeError):
    """The stand-in program did not compile beside the calls (the message says why)."""


def compiled_beside() -> int:
    """How many stand-in compiles this process has finished beside timed calls (all blocks)."""
    return _finished[0]


def _stand_in(k: int) -> Any:
    """The ``k``-th stand-in program, traced and lowered afresh (a new function each time: JAX
    keeps the executable of a program it has compiled, keyed on the lowered module): 32 unrolled
    steps of a polynomial chain, which compiles in about 0.15 s on a 2-core CPU with jax 0.10 and
    0.12. A polynomial, because a chain of sin and cos compiles 100x longer with jax 0.12.1 (14 s),
    and a block waits for the compile under way. Its trace and lower hold the GIL for about a
    tenth of that. The decorator's thread replays the winner's whole program in Python before its
    compile, so the stand-in reads ``s`` low: 0-0.5 below the winner's own compile on the 2-core
    CPU (docs/results/tier-up.md). A stand-in traced in Python reads it up to 1.7x too high for a
    program of 24 µs calls, whose dispatch needs the GIL."""
    import jax
    import jax.numpy as jnp

    def stand_in(x):
        def body(c, _):
            for _ in range(6):
                c = c * c * (0.5 + 1e-9 * k) + 0.25 * c + 0.1
            return c, None

        return jax.lax.scan(body, x, None, length=32, unroll=32)[0]

    return jax.jit(stand_in).lower(jax.ShapeDtypeStruct((1024,), jnp.float32))


class Compiles:
    """What :func:`compiling` yields: called, how many stand-in compiles have finished; the wall
    seconds of each compiled while the block ran (``beside_s``) and, once the block has ended, of
    one compiled alone right after it (``alone_s``)."""

    def __init__(self) -> None:
        self.alone_s: float | None = None
        self.beside_s: list[float] = []
        self.finished = 0

    def __call__(self) -> int:
        return self.finished

    @property
    def stretch(self) -> float | None:
        """The median compile beside the calls over the compile alone (at least 1); None before
        a compile beside them has finished."""
        if not self.beside_s or not self.alone_s:
            return None
        return max(1.0, statistics.median(self.beside_s) / self.alone_s)


@contextlib.contextmanager
def compiling() -> Iterator[Compiles]:
    """While the block runs, a thread compiles the stand-in program back to back; yields a
    :class:`Compiles` (called: how many compiles have finished). Leaving the block waits for the
    compile under way (a daemon thread inside XLA at interpreter exit aborts the process), then
    compiles one stand-in alone, the baseline of :attr:`Compiles.stretch`.

    Example::

        >>> with compiling() as done:
        ...     pass
        >>> done() >= 0 and done.alone_s > 0
        True
    """
    stop, started = threading.Event(), threading.Event()
    failed: list[BaseException] = []
    compiles = Compiles()

    def loop() -> None:
        started.set()
        try:
            while not stop.is_set():
                t = time.perf_counter()
                _stand_in(compiles.finished).compile()
                compiles.finished += 1
                if not stop.is_set():  # a compile the block's calls ran beside all along
                    compiles.beside_s.append(time.perf_counter() - t)
                _finished[0] += 1
        except Exception as exc:  # reported when the block ends: the calls were not timed beside a compile
            failed.append(exc)

    thread = threading.Thread(target=loop, daemon=True, name="autotune-compile-beside")
    thread.start()
    started.wait()
    try:
        yield compiles
    finally:
        stop.set()
        thread.join()
    if failed:
        raise BesideFailed(f"the stand-in program did not compile beside the calls: {failed[0]!r}"[:500])
    t0 = time.perf_counter()  # after the block: a process's first compile also pays XLA's start
    _stand_in(compiles.finished).compile()
    compiles.alone_s = time.perf_counter() - t0
