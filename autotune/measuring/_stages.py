"""Measure one config honestly: trace, lower, compile and run time, separately.

This is the one timing implementation. :func:`measure` (``at.measure``), the in-process
runner, the worker process in every mode and the benchmark scripts all time through the
primitives here: :func:`time_stages` (trace, lower, hash, compile), :func:`compile_config`
(the same with JAX's caches cleared and the persistent cache off), :func:`time_calls`
(adaptive runtime sampling as a :class:`~autotune.measuring._sampling.Sampling` says,
:mod:`autotune.measuring._timing`) and
:func:`run_measurement` (a :class:`Measurement` from compiled stages). Each stage is timed in
wall seconds and in the process's CPU seconds (all threads: XLA compiles on threads of its own);
load stretches the first, not the second, which the objective charges
(:attr:`Measurement.compile_cost_s`; README, "Measuring honestly").
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax

from autotune.measuring._beside import compiling
from autotune.measuring._measurement import MEMORY_PARTS
from autotune.measuring._measurement import Measurement as Measurement  # the value this module produces
from autotune.measuring._oom import running_out_of_memory
from autotune.measuring._sampling import DEFAULT, Sampling
from autotune.measuring._timing import Stopwatch, Timing, time_calls
from autotune.program import _compat
from autotune.program._call import Call
from autotune.program._config import Config
from autotune.program._jitargs import donates, dynamic_args, jit_option_set  # noqa: F401 (imported from here too)
from autotune.program._rewrite import with_config
from autotune.program._xla import XlaChoice, jit_options

FRESH_BYTES = 256 * 2**20
"""The most bytes of fresh input copies made at once for a donating program (they are made before a
sample's clock starts, one set per call of the sample)."""

BESIDE_CALLS_S = 30.0
"""The most seconds ``retime(beside=True)`` keeps the calls going for a stand-in compile to finish
beside them (a stand-in compiles in about 0.15 s on a 2-core CPU)."""


@dataclass
class Stages:
    """What :func:`time_stages` produced and how long each stage took; ``compiled`` is None when
    compiling was skipped (``compile=False``, or ``on_lowered`` returned ``reused``)."""

    jitted: Any
    traced: Any = None
    lowered: Any = None
    compiled: Any = None
    trace_s: float = 0.0
    lower_s: float = 0.0
    compile_s: float = 0.0
    program_hash: str | None = None
    reused: Any = None
    trace_cpu_s: float | None = None
    lower_cpu_s: float | None = None
    compile_cpu_s: float | None = None
    xla: XlaChoice | None = None  # the config's XLA options (jit_options), hashed with the program
    # closed-over constants jax.jit passes as arguments (jax >= 0.12); jax.export would embed them
    hoisted_constants: int = 0


def program_hash(text: str, xla_flags: dict[str, Any] | None = None) -> str:
    """sha256 of a lowered program's text (``lowered.as_text()``, without debug locations): equal
    for configs that emit the same program, whatever their site choices were. A config's XLA
    options (``xla_flags``) build another executable from the same text, so they are hashed with
    it; without any, the hash is the text's alone."""
    if xla_flags:
        text += "\n// xla options: " + repr(sorted(xla_flags.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def time_stages(
    jitted: Any,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    on_traced: Callable[[Stages], None] | None = None,
    on_lowered: Callable[[Stages], Any] | None = None,
    compile: bool = True,
    xla: XlaChoice | None = None,
    platforms: tuple[str, ...] | None = None,
) -> Stages:
    """Trace, lower and compile ``jitted`` on ``args``, timing each stage apart.

    Arguments:
        jitted: a ``jax.jit`` object.
        args, kwargs: its arguments.
        on_traced: called after tracing (may raise, e.g. to stop over a budget).
        on_lowered: called after lowering, with ``program_hash`` set and before compiling;
            if it returns anything but None, compiling is skipped and the value kept in
            ``Stages.reused``.
        compile: False stops after lowering.
        xla: the XLA options ``jitted`` was made with (a config's), hashed with the program.

    Hook time is not counted in any stage; each stage's process CPU seconds go to ``*_cpu_s``.
    """
    kwargs = kwargs or {}
    stages = Stages(jitted, xla=xla or None)
    t0, c0 = time.perf_counter(), time.process_time()
    stages.traced = jitted.trace(*args, **kwargs)
    stages.trace_s, stages.trace_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    if on_traced is not None:
        on_traced(stages)
    t0, c0 = time.perf_counter(), time.process_time()
    # platforms: lower for a device this process does not open (a trace-only parent, autotune.measuring._host)
    stages.lowered = stages.traced.lower(lowering_platforms=platforms) if platforms else stages.traced.lower()
    stages.lower_s, stages.lower_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    text = stages.lowered.as_text()
    stages.program_hash = program_hash(text, xla.flags() if xla else None)
    stages.hoisted_constants = _compat.hoisted_constants(text)
    if on_lowered is not None:
        stages.reused = on_lowered(stages)
        if stages.reused is not None:
            return stages
    if compile:
        t0, c0 = time.perf_counter(), time.process_time()
        stages.compiled = stages.lowered.compile()
        stages.compile_s, stages.compile_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    return stages


def compile_config(
    fn: Callable,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    config: Config | None = None,
    *,
    jit_kwargs: dict[str, Any] | None = None,
    clear_caches: bool = True,
    on_traced: Callable[[Stages], None] | None = None,
    on_lowered: Callable[[Stages], Any] | None = None,
    compile: bool = True,
    platforms: tuple[str, ...] | None = None,
) -> Stages:
    """:func:`time_stages` of ``jax.jit(with_config(fn, config), **jit_kwargs)`` with the config's
    XLA options merged into ``compiler_options`` (:func:`autotune.program._xla.jit_options`), cold: JAX's
    in-memory caches cleared first (unless ``clear_caches=False``) and the persistent
    compilation cache neither read nor written."""
    config = Config() if config is None else config
    jitted = jax.jit(with_config(fn, config), **jit_options(config.xla, jit_kwargs))
    with _compat.no_persistent_cache():
        if clear_caches:
            _compat.clear_jax_caches()
        return time_stages(
            jitted,
            tuple(args),
            dict(kwargs or {}),
            on_traced=on_traced,
            on_lowered=on_lowered,
            compile=compile,
            xla=config.xla,
            platforms=platforms,
        )


def compile_call(call: Call, config: Config | None = None, **options: Any) -> Stages:
    """:func:`compile_config` of ``call``'s function, arguments and ``jax.jit`` options (and ``options``)."""
    return compile_config(call.function, call.args, call.kwargs, config, jit_kwargs=call.jit_kwargs, **options)


LOWERED_FIGURES = ("trace_s", "lower_s", "trace_cpu_s", "lower_cpu_s", "program_hash")
"""What a config's trace and lower give, in the names :class:`Stages` and :class:`Measurement` share."""


def lowered_figures(stages: Any) -> dict[str, Any]:
    """The :data:`LOWERED_FIGURES` of ``stages`` (or of a measurement), by name."""
    return {name: getattr(stages, name) for name in LOWERED_FIGURES}


def _memory(compiled) -> dict[str, int]:
    try:
        stats = compiled.memory_analysis()
    except Exception:
        return {}
    return {k: int(v) for k in MEMORY_PARTS if (v := getattr(stats, f"{k}_size_in_bytes", None)) is not None}


def _flops(compiled) -> float | None:
    try:
        analysis = compiled.cost_analysis()
    except Exception:
        return None
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else None
    value = (analysis or {}).get("flops")
    return float(value) if value is not None and math.isfinite(value) and value >= 0 else None


def _copy(x):
    return x.copy() if isinstance(x, jax.Array) else x


def time_compiled(
    compiled: Any,
    args: tuple,
    kwargs: dict,
    sampling: Sampling = DEFAULT,
    *,
    donating: bool = False,
    stopwatch: Stopwatch | None = None,
) -> Timing:
    """The :class:`autotune.measuring._timing.Timing` (median s, IQR s, reps, p10 s, the mode charged, the last
    call's outputs) of calling ``compiled`` on the dynamic ``args``/``kwargs``, sampled as ``sampling``
    says (``stopwatch``: as :func:`time_calls` takes it). With ``donating`` every call gets its own
    fresh copies of the inputs, made before the clock starts (at most :data:`FRESH_BYTES` of them at once)."""
    if not donating:
        return time_calls(lambda: compiled(*args, **kwargs), sampling, stopwatch=stopwatch)
    leaves = [x for x in jax.tree_util.tree_leaves((args, kwargs)) if isinstance(x, jax.Array)]
    size = sum(int(x.nbytes) for x in leaves)
    return time_calls(
        lambda inputs: compiled(*inputs[0], **inputs[1]),
        sampling,
        fresh=lambda: jax.tree_util.tree_map(_copy, (args, kwargs)),
        stopwatch=stopwatch,
        max_batch=max(1, min(1000, FRESH_BYTES // max(size, 1))),
    )


def run_figures(t: Timing) -> dict[str, Any]:
    """A timing's runtime figures, by the names of :class:`Measurement`'s fields."""
    return {
        "run_s": t.run_s,
        "run_iqr_s": t.iqr_s,
        "reps": t.reps,
        "run_p10_s": t.p10_s,
        "timing": t.mode,
        "sampled_s": t.sampled_s,
        "stopped_early": t.stopped,
    }


def run_measurement(
    stages: Stages,
    args: tuple,
    kwargs: dict,
    sampling: Sampling = DEFAULT,
    *,
    config: Config | None = None,
    donating: bool = False,
    keep_outputs: bool = False,
) -> Measurement:
    """Time the runtime of compiled ``stages`` as ``sampling`` says and return the whole :class:`Measurement`."""
    with running_out_of_memory(lambda: _memory(stages.compiled)):  # raised as RanOutOfMemory, with its figures
        t = time_compiled(stages.compiled, args, kwargs, sampling, donating=donating)
    return Measurement(
        **lowered_figures(stages),
        compile_s=stages.compile_s,
        compile_cpu_s=stages.compile_cpu_s,
        **run_figures(t),
        config=Config() if config is None else config,
        memory=_memory(stages.compiled),
        flops=_flops(stages.compiled),
        outputs=t.outputs if keep_outputs else None,
    )


def reuse(earlier: Measurement, stages: Stages, config: Config) -> Measurement:
    """The measurement of a config that lowered to the same program as ``earlier``'s:
    its own trace and lower seconds, the earlier one's compile, runtime, memory, flops
    and outputs (no sampling or load of its own: ``sampled_s`` 0, ``loaded_s`` None)."""
    return earlier.replace(config=config, sampled_s=0.0, loaded_s=None, **lowered_figures(stages))


@dataclass
class Executable:
    """A compiled config kept for re-timing: the executable, its dynamic arguments and the
    measurement taken when it was compiled (see ``autotune.measuring._executables.ExecutableStore``)."""

    compiled: Any
    args: tuple
    kwargs: dict
    donating: bool
    measurement: Measurement

    def retime(self, sampling: Sampling = DEFAULT, *, beside: bool = False) -> Measurement:
        """Time the runtime again as ``sampling`` says (its mode included): the new runtime figures
        and the mode they were charged in, the kept compile figures. With ``beside``, while a thread
        compiles a stand-in program (`autotune.measuring._beside`); the calls go on, untimed, until a
        stand-in has compiled beside them all along (at most :data:`BESIDE_CALLS_S`), and
        ``compile_stretch`` says how much longer that took than alone."""
        with compiling() if beside else contextlib.nullcontext() as compiles:
            t = time_compiled(self.compiled, self.args, self.kwargs, sampling, donating=self.donating)
            end = time.monotonic() + BESIDE_CALLS_S
            while compiles is not None and not compiles.beside_s and time.monotonic() < end:
                time_compiled(self.compiled, self.args, self.kwargs, sampling, donating=self.donating)
        return self.measurement.replace(
            **run_figures(t), outputs=None, compile_stretch=None if compiles is None else compiles.stretch
        )


OnLowered = Callable[[str], Measurement | None]
"""The ``on_lowered`` hook of a measure: called with the program hash after lowering; a
:class:`Measurement` it returns (an earlier config with the same program) is reused instead of compiling."""


def measure_executable(
    call: Call,
    config: Config | None = None,
    *,
    sampling: Sampling = DEFAULT,
    clear_caches: bool = True,
    keep_outputs: bool = False,
    on_stage: Callable[[str, Stages], None] | None = None,
    on_lowered: OnLowered | None = None,
) -> tuple[Measurement, Executable | None]:
    """:func:`measure` of ``call``, its runtime sampled as ``sampling`` says, also returning the
    :class:`Executable` (None when ``on_lowered`` handed back an earlier measurement and nothing
    was compiled).

    ``on_stage(name, stages)`` is called after ``"trace"`` and after ``"lower"`` (before
    ``on_lowered``), e.g. to stop a config over its compile budget.
    """
    config = Config() if config is None else config

    def traced(st: Stages) -> None:
        if on_stage is not None:
            on_stage("trace", st)

    def lowered(st: Stages) -> Any:
        if on_stage is not None:
            on_stage("lower", st)
        return None if on_lowered is None else on_lowered(st.program_hash)

    stages = compile_call(call, config, clear_caches=clear_caches, on_traced=traced, on_lowered=lowered)
    if stages.reused is not None:
        return reuse(stages.reused, stages, config), None
    dyn_args, dyn_kwargs = call.dynamic()
    m = run_measurement(
        stages, dyn_args, dyn_kwargs, sampling, config=config, donating=call.donating, keep_outputs=keep_outputs
    )
    return m, Executable(stages.compiled, dyn_args, dyn_kwargs, call.donating, m.replace(outputs=None))


def measure(
    fn: Callable,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    config: Config | dict | None = None,
    *,
    jit_kwargs: dict[str, Any] | None = None,
    warmup: int = DEFAULT.warmup,
    min_reps: int = DEFAULT.min_reps,
    max_reps: int = DEFAULT.max_reps,
    target_s: float = DEFAULT.target_s,
    timing_mode: str = DEFAULT.mode,
    stop_above_s: float | None = DEFAULT.stop_above_s,
    clear_caches: bool = True,
    keep_outputs: bool = False,
    on_lowered: OnLowered | None = None,
) -> Measurement:
    """Compile ``fn`` under ``config`` and time every stage.

    Arguments:
        fn: the (undecorated) function.
        args, kwargs: example inputs; static ones as ``jit_kwargs`` declares.
        config: the config to measure; None measures the default.
        jit_kwargs: keyword arguments for ``jax.jit`` (``static_argnums``, ``donate_argnums``...).
        warmup, min_reps, max_reps, target_s, stop_above_s: runtime sampling
            (:class:`~autotune.measuring._sampling.Sampling`, whose defaults these are; :func:`time_calls`
            says what each means).
        timing_mode: how a call is timed: ``"steady"`` (calls dispatched back to back, the
            default), ``"blocking"`` (each call waited for on its own) or ``"device"`` (the
            device's own time from JAX's profiler; the steady state where the platform gives
            none); ``Measurement.timing`` says which was charged (:mod:`autotune.measuring._timing`).
        clear_caches: clear JAX's in-memory caches first, so trace/lower/compile are cold.
        keep_outputs: keep the outputs of one call in ``Measurement.outputs``.
        on_lowered: called with the program hash after lowering, before compiling; when it
            returns a :class:`Measurement` (an earlier config with the same program),
            nothing is compiled or run and the result is that measurement with this
            config's trace and lower seconds.

    Returns:
        A :class:`Measurement`.

    Example::

        >>> import jax.numpy as jnp, autotune as at
        >>> f = lambda x: at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=16, name="l")[0]
        >>> m = at.measure(f, (jnp.zeros(4),), config={"l": {"repr": "for"}})
        >>> m.compile_s > 0 and m.run_s > 0
        True
    """
    sampling = Sampling(timing_mode, warmup, min_reps, max_reps, target_s, stop_above_s)
    return measure_executable(
        Call(fn, args, kwargs, jit_kwargs),
        Config.from_dict(config),  # a user's dict is read once, here
        sampling=sampling,
        clear_caches=clear_caches,
        keep_outputs=keep_outputs,
        on_lowered=on_lowered,
    )[0]
