"""Out of memory: which errors mean a config ran out of memory, what it asked for, and the one
line a failed trial says.

The one place that reads XLA's words. Seen for real: on a TPU a compile over the chip's HBM
(``RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm.
Used 17.52G of 15.75G hbm. ...``); on the CPU under the worker's ``RLIMIT_DATA``
(``trial_memory_gb``) a run whose buffers do not fit (``RESOURCE_EXHAUSTED: Out of memory
allocating 536879104 bytes.``), a worker whose threads cannot get their stacks (``LLVM ERROR:
pthread_create failed: Resource temporarily unavailable``) and C++'s ``std::bad_alloc``.
Only the standard library is imported.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

MARKERS = (
    "resource_exhausted",
    "out of memory",
    "bad_alloc",
    "cannot allocate memory",
    "memoryerror",
    "failed to allocate",
    "pthread_create failed: resource temporarily unavailable",
)
"""Words (lower case) in an error, or in a dying process's last lines, that mean it ran out of memory."""

SAID_CHARS = 300
"""How much of the error's own words a failed trial's line keeps (XLA lists allocations after them)."""

_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# XLA writes sizes with binary multiples and a bare letter ("17.52G", tsl::strings::HumanReadableNumBytes).
_SIZE = r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?"
_USED_OF = re.compile(rf"used {_SIZE} of {_SIZE}(?: (\w+))?", re.IGNORECASE)
# The v5e's wording in jax 0.10.2 when a compile's temporaries alone are over the chip (seen for real:
# "... the total memory required for HLO temporaries (33.28G) exceeds available HBM (15.75G).").
_REQUIRED = re.compile(rf"required for [^(]*\({_SIZE}\) exceeds available (\w+) \({_SIZE}\)", re.IGNORECASE)
_ALLOCATING = re.compile(r"(?:allocating|allocate)\s+(\d+)\s*bytes", re.IGNORECASE)
_ALLOCATE_SIZE = re.compile(rf"(?:allocating|allocate)\s+{_SIZE}", re.IGNORECASE)


@dataclass(frozen=True)
class OutOfMemory:
    """What an out-of-memory error said: the bytes the config asked for and the bytes there
    were, where the message names them (else None), the memory space (``hbm``), and the
    message's own words."""

    asked_bytes: int | None = None
    capacity_bytes: int | None = None
    space: str | None = None
    said: str = ""


def _bytes(number: str, unit: str) -> int:
    return int(float(number) * _UNITS[unit.upper()])


def out_of_memory(text: str, *, memory_error: bool = False) -> OutOfMemory | None:
    """The :class:`OutOfMemory` that ``text`` (an error's message, or a dead process's last
    words) reports, or None when it does not say the process ran out of memory.
    ``memory_error``: the error was Python's ``MemoryError`` (out of memory whatever it says).

    Example::

        >>> tpu = "RESOURCE_EXHAUSTED: ... Used 17.52G of 15.75G hbm. Exceeded hbm capacity by 1.77G."
        >>> round(out_of_memory(tpu).asked_bytes / 2**30, 2), out_of_memory(tpu).space
        (17.52, 'hbm')
        >>> out_of_memory("ValueError: shapes differ") is None
        True
    """
    lower = text.lower()
    if not memory_error and not any(marker in lower for marker in MARKERS):
        return None
    said = " ".join(text.split())[:SAID_CHARS]
    used = _USED_OF.search(text)
    if used is not None:
        space = used.group(5)
        return OutOfMemory(_bytes(*used.group(1, 2)), _bytes(*used.group(3, 4)), space, said)
    required = _REQUIRED.search(text)
    if required is not None:
        asked, space, capacity = required.group(1, 2), required.group(3).lower(), required.group(4, 5)
        return OutOfMemory(_bytes(*asked), _bytes(*capacity), space, said)
    exact = _ALLOCATING.search(text)
    if exact is not None:
        return OutOfMemory(int(exact.group(1)), said=said)
    sized = _ALLOCATE_SIZE.search(text)
    if sized is not None:
        return OutOfMemory(_bytes(*sized.group(1, 2)), said=said)
    return OutOfMemory(said=said)


def device_bytes(memory: Mapping[str, int]) -> int | None:
    """The device memory an executable asks for, from XLA's memory analysis (the
    ``Measurement.memory`` figures): its arguments, outputs and temporaries; None when unknown."""
    parts = [memory.get(k) for k in ("argument", "output", "temp")]
    return sum(parts) if all(p is not None for p in parts) else None


def gib(n: int | float) -> str:
    """Bytes as GiB with two decimals (XLA's own figures, as ``17.52G``, keep theirs): ``0.50 GiB``."""
    return f"{n / 2**30:.2f} GiB"


PHASES = {"compile": "while compiling", "run": "while running", "load": "while loading"}


def oom_reason(
    phase: str,
    found: OutOfMemory | None,
    limit_gb: float | None = None,
    in_use_bytes: int | None = None,
    asked_bytes: int | None = None,
) -> str:
    """The one line of a trial that ran out of memory in ``phase`` (``compile``, ``run``,
    ``load`` or words of its own): what the config asked for (``asked_bytes``, from the compiled
    executable's memory analysis where it is known, else the figure in XLA's message), what there
    was (the message's capacity, or the worker's ``trial_memory_gb`` and how much of it the
    process itself already used), and XLA's words.

    Example::

        >>> said = OutOfMemory(said="RESOURCE_EXHAUSTED: Out of memory")
        >>> oom_reason("run", said, 1.0, 2**29, 2**31).split(" (")[0]
        "ran out of memory while running: the config asks for 2.00 GiB of device memory, the worker's limit is 1.00 GiB"
    """
    found = found or OutOfMemory()
    when = PHASES.get(phase, phase)
    asked = asked_bytes if asked_bytes is not None else found.asked_bytes
    space = f" ({found.space})" if found.space else ""
    parts = [f"the config asks for {gib(asked)} of device memory{space}"] if asked is not None else []
    if found.capacity_bytes is not None:
        parts.append(f"the device has {gib(found.capacity_bytes)}")
    if limit_gb is not None:
        used = f"; {gib(in_use_bytes)} of it in use by the worker itself" if in_use_bytes else ""
        parts.append(f"the worker's limit is {gib(limit_gb * 2**30)} (trial_memory_gb{used})")
    said = f"; the error: {found.said}" if found.said else ""
    return f"ran out of memory {when}: " + (", ".join(parts) if parts else "no size was reported") + said


class RanOutOfMemory(Exception):
    """A compiled config ran out of memory while running (raised from XLA's own error): what
    it asked for, from the executable's memory analysis, and what the process already used."""

    def __init__(self, found: OutOfMemory, asked_bytes: int | None, in_use_bytes: int | None):
        super().__init__(found.said)
        self.found, self.asked_bytes, self.in_use_bytes = found, asked_bytes, in_use_bytes


@contextlib.contextmanager
def running_out_of_memory(memory: Callable[[], Mapping[str, int]]) -> Iterator[None]:
    """Around the calls of a compiled config: an error that says it ran out of memory is raised
    as :class:`RanOutOfMemory`, asking for ``device_bytes(memory())`` (the executable's memory
    analysis, read only then)."""
    try:
        yield
    except Exception as exc:
        found = out_of_memory(str(exc), memory_error=isinstance(exc, MemoryError))
        if found is None:
            raise
        raise RanOutOfMemory(found, device_bytes(memory()), data_in_use()) from exc


def default_out_of_memory(reason: str, limit_gb: float | None) -> str:
    """The one line a study stops with when its default config ran out of memory (``reason``,
    :func:`oom_reason`'s line) under a limit of ``limit_gb`` GiB (``trial_memory_gb``) or none."""
    fix = (
        f"raise trial_memory_gb above {limit_gb:g} (autotune tune --trial-memory GIB) or tune at smaller shapes"
        if limit_gb is not None
        else "the program as written does not fit the device; tune it at shapes that fit"
    )
    said = reason.rstrip(". ")
    return f"The default config ran out of memory, so no config can be compared with it: {said}. To tune, {fix}."


def data_in_use() -> int | None:
    """This process's data segment in bytes (Linux's ``VmData``: what ``RLIMIT_DATA`` counts), or
    None where ``/proc`` does not say."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


__all__ = [
    "MARKERS",
    "OutOfMemory",
    "RanOutOfMemory",
    "data_in_use",
    "default_out_of_memory",
    "device_bytes",
    "gib",
    "oom_reason",
    "out_of_memory",
    "running_out_of_memory",
]
