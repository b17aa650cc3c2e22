"""The compiled executables a process keeps for re-timing (``retime``): the last :data:`RECENT`
configs measured and those ``retain`` names, by config, configs that lowered to one program sharing
one executable. The in-process runner keeps one store, the worker process another.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from autotune.measuring._sampling import Sampling
from autotune.measuring._stages import Executable, Measurement

RECENT = 8
"""How many of the most recently measured configs a runner keeps compiled for ``retime``."""


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

    def retime(self, key: str, sampling: Sampling, *, beside: bool = False) -> Measurement | None:
        """Time config ``key``'s kept executable again as ``sampling`` says (see :meth:`Executable.retime`;
        ``beside``: while a compile runs beside the calls), as measured for ``key``; None if it is not kept."""
        held = self._configs.get(key)
        if held is None:
            return None
        program, m = held
        return (
            self._programs[program]
            .retime(sampling, beside=beside)
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
