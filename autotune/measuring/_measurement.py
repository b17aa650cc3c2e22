"""`Measurement`: what one config costs, as a value (no JAX needed to read or write one).

:mod:`autotune.measuring._stages` produces it; the study, the cache and the report read it back from
JSON (:meth:`Measurement.from_dict`). Glossary of the compile figures (docs/architecture.md):
``compile_s`` is XLA's compile alone; :attr:`Measurement.compile_total_s` is trace + lower +
compile in wall seconds; :attr:`Measurement.compile_cost_s` is the same sum in process CPU
seconds where known, the one-off seconds the objective charges.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any

from autotune.program._config import Config

STAGES = ("trace_s", "lower_s", "compile_s")
"""The stages paid once per signature, in wall seconds; their sum is ``compile_total_s``."""

OPTIONAL_SECONDS = ("trace_cpu_s", "lower_cpu_s", "compile_cpu_s", "run_p10_s", "load_cost_s", "sampled_s", "loaded_s")
"""Seconds a record may lack (None): older records, or not measured."""

MEMORY_PARTS = ("temp", "generated_code", "argument", "output", "alias")
"""The byte counts kept of XLA's ``Compiled.memory_analysis()`` (``<part>_size_in_bytes``), under these names."""

OLDER_TIMING = "blocking"
"""The timing of a record written before the mode was kept: every call was waited for on its own."""


@dataclass(frozen=True)
class Measurement:
    """What one config costs.

    Attributes:
        trace_s, lower_s, compile_s: seconds spent in ``jit(...).trace``, ``.lower``
            and ``.compile`` (JAX's in-memory caches cleared and the persistent
            compilation cache off, so each is a real, cold number).
        run_s: median seconds per call after warm-up, timed as :attr:`timing` says; ``run_iqr_s`` is
            the interquartile range of the samples.
        reps: how many calls the runtime figures are based on.
        memory: bytes XLA reports (:data:`MEMORY_PARTS`: ``temp``, ``generated_code``, ``argument``,
            ``output``, ``alias``); their one total is :attr:`memory_bytes`.
        flops: flops XLA's cost analysis reports, or None.
        program_hash: sha256 of the lowered program's text (computed before compiling):
            two configs with the same hash compile to the same program.
        trace_cpu_s, lower_cpu_s, compile_cpu_s: the process's CPU seconds (all threads)
            over the same three stages, or None where not measured (older records).
        run_p10_s: the 10th percentile of the per-call seconds (None in older records).
        load_cost_s: what a later process pays with JAX's persistent compilation cache on: trace +
            lower + the load of the cached executable, CPU seconds, the load measured in a fresh
            process (``autotune.measuring.process._load_probe``); None where not measured (see
            :attr:`load_charged_s`).
        timing: the timing mode the runtime figures were charged in
            (:data:`autotune.measuring._sampling.TIMING_MODES`): the mode asked for, except
            ``"steady"`` where ``"device"`` was asked and the platform's profile has no device time
            (the CPU). A record without it reads as ``"blocking"``, the way runtimes were timed
            before the mode was kept.
        compile_stretch: on a re-timing beside a compile (``retime(beside=True)``), how many times
            longer a stand-in program compiled beside these calls than alone (at least 1); else None.
        sampled_s: the wall seconds the runtime sampling took, warm-up included (where the
            tuner's wall goes: `autotune.measuring._wall`); None in older records.
        loaded_s: the wall seconds the measuring process spent loading an executable compiled
            elsewhere (a builder's) instead of compiling it; None where it compiled it.
        stopped_early: its sampling stopped after a few samples, every one slower than the
            sampling's ``stop_above_s`` (a trial that cannot win: its runtime figures are a short estimate).
    """

    trace_s: float
    lower_s: float
    compile_s: float
    run_s: float
    run_iqr_s: float
    reps: int
    config: Config = field(default_factory=Config)
    memory: dict[str, int] = field(default_factory=dict)
    flops: float | None = None
    program_hash: str | None = None
    outputs: Any = field(default=None, compare=False, repr=False)
    trace_cpu_s: float | None = None
    lower_cpu_s: float | None = None
    compile_cpu_s: float | None = None
    run_p10_s: float | None = None
    load_cost_s: float | None = None
    timing: str = "steady"
    compile_stretch: float | None = None
    sampled_s: float | None = None
    loaded_s: float | None = None
    stopped_early: bool = False

    @property
    def run_cost_s(self) -> float:
        """The per-call seconds the objective charges: :attr:`run_p10_s` (a call another
        process preempts takes longer, never shorter), else ``run_s``."""
        return self.run_s if self.run_p10_s is None else self.run_p10_s

    @property
    def memory_bytes(self) -> int | None:
        """The config's device memory (:func:`device_memory`), or None where XLA reports none."""
        return device_memory(self.memory)

    @property
    def compile_total_s(self) -> float:
        """Everything paid once per signature, in wall seconds: trace + lower + compile."""
        return compile_total(self)

    @property
    def compile_total_cpu_s(self) -> float | None:
        """trace + lower + compile in process CPU seconds; None if a stage's is unknown."""
        cpu = (self.trace_cpu_s, self.lower_cpu_s, self.compile_cpu_s)
        return None if None in cpu else sum(cpu)

    @property
    def compile_cost_s(self) -> float:
        """The one-off seconds the objective charges: :attr:`compile_total_cpu_s` (load stretches
        wall time, a compile waiting for a core, not CPU time), else the wall seconds."""
        return self.compile_total_s if self.compile_total_cpu_s is None else self.compile_total_cpu_s

    @property
    def load_estimate_s(self) -> float:
        """THE estimate of a cached load where none was measured: trace + lower (CPU seconds where
        known, else wall), the part of the one-off seconds a cache hit does not skip."""
        cpu = (self.trace_cpu_s, self.lower_cpu_s)
        return self.trace_s + self.lower_s if None in cpu else sum(cpu)

    @property
    def load_charged_s(self) -> float:
        """The load seconds the objective charges a later process with the cache on:
        :attr:`load_cost_s` where measured, else :attr:`load_estimate_s`."""
        return self.load_estimate_s if self.load_cost_s is None else self.load_cost_s

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON data but the call's ``outputs`` (kept for the correctness guard only)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "outputs"}
        return {**out, "config": self.config.to_dict(), "memory": dict(self.memory)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        return cls(
            trace_s=float(d["trace_s"]),
            lower_s=float(d["lower_s"]),
            compile_s=float(d["compile_s"]),
            run_s=float(d["run_s"]),
            run_iqr_s=float(d.get("run_iqr_s", 0.0)),
            reps=int(d.get("reps", 0)),
            config=Config.from_dict(d.get("config") or {}),
            memory=dict(d.get("memory") or {}),
            flops=d.get("flops"),
            program_hash=d.get("program_hash"),
            **{k: None if d.get(k) is None else float(d[k]) for k in OPTIONAL_SECONDS},
            timing=str(d.get("timing") or OLDER_TIMING),
            compile_stretch=None if d.get("compile_stretch") is None else float(d["compile_stretch"]),
            stopped_early=bool(d.get("stopped_early", False)),
        )

    def replace(self, **changes: Any) -> Measurement:
        return dataclasses.replace(self, **changes)


def compile_total(figures: Any) -> float | None:
    """THE sum trace + lower + compile (wall seconds) of a measurement's figures (a dict or an
    object with those attributes): a missing lower or compile counts 0, a missing trace gives None.

    Example::

        >>> compile_total({"trace_s": 0.5, "lower_s": 0.25, "compile_s": 1.0}), compile_total({})
        (1.75, None)
    """
    get = figures.get if isinstance(figures, dict) else (lambda k: getattr(figures, k, None))
    if get("trace_s") is None:
        return None
    return sum(float(get(k) or 0.0) for k in STAGES)


def device_memory(memory: Any) -> int | None:
    """THE device memory of a config, in bytes, from XLA's figures (``Measurement.memory``):
    arguments + outputs + temporaries + generated code − aliased bytes, what one call of the
    executable holds on the device at its peak as XLA's buffer assignment plans it (an output that
    reuses a donated argument's buffer is counted once). None where XLA reports no arguments,
    outputs nor temporaries (a backend without a memory analysis).

    Example::

        >>> device_memory({"argument": 400, "output": 400, "temp": 100, "generated_code": 20, "alias": 400})
        520
        >>> device_memory({}) is None
        True
    """
    memory = dict(memory or {})
    if not any(k in memory for k in ("argument", "output", "temp")):
        return None
    total = sum(int(memory.get(k) or 0) for k in ("argument", "output", "temp", "generated_code"))
    return max(0, total - int(memory.get("alias") or 0))


def median_of(ms: list[Measurement]) -> Measurement:
    """One measurement of several of the same config: the median of each figure, the calls summed,
    the rest the first one's (the default's reference rounds, as trial 0 records them)."""
    if len(ms) == 1:
        return ms[0]
    med = {
        k: statistics.median(getattr(m, k) for m in ms)
        for k in ("trace_s", "lower_s", "compile_s", "run_s", "run_iqr_s")
    }
    for k in ("trace_cpu_s", "lower_cpu_s", "compile_cpu_s", "run_p10_s"):
        values = [getattr(m, k) for m in ms if getattr(m, k) is not None]
        med[k] = statistics.median(values) if values else None
    first = ms[0]
    return Measurement(
        reps=sum(m.reps for m in ms),
        config=first.config,
        memory=first.memory,
        flops=first.flops,
        outputs=first.outputs,
        program_hash=first.program_hash,
        timing=first.timing,
        **med,
    )
