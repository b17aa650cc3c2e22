"""Measure one config honestly: trace, lower, compile and run time, separately.

This is the one timing implementation. :func:`measure` (``at.measure``), the in-process
runner, the worker process in every mode and the benchmark scripts all time through the
primitives here: :func:`time_stages` (trace, lower, hash, compile), :func:`compile_config`
(the same with JAX's caches cleared and the persistent cache off), :func:`time_calls`
(adaptive runtime sampling) and :func:`run_measurement` (a :class:`Measurement` from
compiled stages). Each stage is timed in wall seconds and in the process's CPU seconds (all
threads: XLA compiles on threads of its own); load stretches the first, not the second, which
the objective charges (:attr:`Measurement.compile_cost_s`; README, "Measuring honestly").
"""

from __future__ import annotations

import hashlib
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax

from . import _compat
from ._config import Config
from ._jitargs import donates, dynamic_args, jit_option_set  # noqa: F401 (imported from here too)
from ._measurement import Measurement as Measurement  # the value this module produces
from ._rewrite import with_config
from ._xla import XlaChoice, jit_options

TIMING_OPTIONS = ("warmup", "min_reps", "max_reps", "target_s")  # what runners pass on to time_calls


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


def program_hash(lowered: Any, xla_flags: dict[str, Any] | None = None) -> str:
    """sha256 of a lowered program's text (without debug locations): equal for configs that
    emit the same program, whatever their site choices were. A config's XLA options
    (``xla_flags``) build another executable from the same text, so they are hashed with it;
    without any, the hash is the text's alone."""
    text = lowered.as_text()
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
    stages.lowered = stages.traced.lower()
    stages.lower_s, stages.lower_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    stages.program_hash = program_hash(stages.lowered, xla.flags() if xla else None)
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
) -> Stages:
    """:func:`time_stages` of ``jax.jit(with_config(fn, config), **jit_kwargs)`` with the config's
    XLA options merged into ``compiler_options`` (:func:`autotune._xla.jit_options`), cold: JAX's
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
        )


def _memory(compiled) -> dict[str, int]:
    try:
        stats = compiled.memory_analysis()
    except Exception:
        return {}
    sizes = {k: getattr(stats, f"{k}_size_in_bytes", None) for k in ("temp", "generated_code", "argument", "output")}
    return {key: int(value) for key, value in sizes.items() if value is not None}


def _flops(compiled) -> float | None:
    try:
        analysis = compiled.cost_analysis()
    except Exception:
        return None
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else None
    value = (analysis or {}).get("flops")
    return float(value) if value is not None and math.isfinite(value) and value >= 0 else None


def _quartiles(samples: Sequence[float]) -> tuple[float, float, float]:
    """(median, IQR, 10th percentile). Inclusive quantiles: the default (exclusive) method
    extrapolates below the fastest sample, and a few samples with one slow outlier gave a
    negative 10th percentile."""
    if len(samples) < 4:
        return statistics.median(samples), 0.0, min(samples)
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return statistics.median(samples), q3 - q1, statistics.quantiles(samples, n=10, method="inclusive")[0]


def time_calls(
    call: Callable[[], Any],
    *,
    warmup: int = 2,
    min_reps: int = 5,
    max_reps: int = 2000,
    target_s: float = 0.5,
    min_sample_s: float = 2e-4,
    fresh_inputs: bool = False,
) -> tuple[float, float, int, float]:
    """Median, IQR, count and 10th percentile of seconds per call of ``call`` (which must block).

    The number of samples adapts to the function's speed: about ``target_s``
    of timing in all, at least ``min_reps`` samples, at most ``max_reps``. Calls
    faster than ``min_sample_s`` are timed in batches so that timer resolution
    does not dominate. With ``fresh_inputs`` (donated buffers) calls are never batched.
    """
    for _ in range(warmup):
        call()
    t0 = time.perf_counter()
    call()
    one = max(time.perf_counter() - t0, 1e-9)
    batch = 1 if fresh_inputs else max(1, min(1000, math.ceil(min_sample_s / one)))
    reps = int(max(min_reps, min(max_reps, target_s / (one * batch))))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(batch):
            call()
        samples.append((time.perf_counter() - t0) / batch)
    median, iqr, p10 = _quartiles(samples)
    return median, iqr, reps * batch, p10


def _copy(x):
    return x.copy() if isinstance(x, jax.Array) else x


def time_compiled(
    compiled: Any, args: tuple, kwargs: dict, *, donating: bool = False, **timing: Any
) -> tuple[float, float, int, float, Any]:
    """(median s, IQR s, reps, p10 s, outputs of the last call) of calling ``compiled`` on the
    dynamic ``args``/``kwargs``; donated inputs are copied fresh for every call."""
    outputs = None

    def call():
        nonlocal outputs
        a, k = jax.tree_util.tree_map(_copy, (args, kwargs)) if donating else (args, kwargs)
        outputs = jax.block_until_ready(compiled(*a, **k))

    return (*time_calls(call, fresh_inputs=donating, **timing), outputs)


def run_measurement(
    stages: Stages,
    args: tuple,
    kwargs: dict,
    *,
    config: Config | None = None,
    donating: bool = False,
    keep_outputs: bool = False,
    **timing: Any,
) -> Measurement:
    """Time the runtime of compiled ``stages`` and return the whole :class:`Measurement`."""
    run_s, iqr_s, reps, p10, outputs = time_compiled(stages.compiled, args, kwargs, donating=donating, **timing)
    return Measurement(
        trace_s=stages.trace_s,
        lower_s=stages.lower_s,
        compile_s=stages.compile_s,
        run_s=run_s,
        run_iqr_s=iqr_s,
        reps=reps,
        config=Config() if config is None else config,
        memory=_memory(stages.compiled),
        flops=_flops(stages.compiled),
        program_hash=stages.program_hash,
        outputs=outputs if keep_outputs else None,
        trace_cpu_s=stages.trace_cpu_s,
        lower_cpu_s=stages.lower_cpu_s,
        compile_cpu_s=stages.compile_cpu_s,
        run_p10_s=p10,
    )


def reuse(earlier: Measurement, stages: Stages, config: Config) -> Measurement:
    """The measurement of a config that lowered to the same program as ``earlier``'s:
    its own trace and lower seconds, the earlier one's compile, runtime, memory, flops
    and outputs."""
    return earlier.replace(
        trace_s=stages.trace_s,
        lower_s=stages.lower_s,
        config=config,
        program_hash=stages.program_hash,
        trace_cpu_s=stages.trace_cpu_s,
        lower_cpu_s=stages.lower_cpu_s,
    )


@dataclass
class Executable:
    """A compiled config kept for re-timing: the executable, its dynamic arguments and the
    measurement taken when it was compiled (see ``autotune._runner.ExecutableStore``)."""

    compiled: Any
    args: tuple
    kwargs: dict
    donating: bool
    measurement: Measurement

    def retime(self, **timing: Any) -> Measurement:
        """Time the runtime again: the new runtime figures, the kept compile figures."""
        run_s, iqr_s, reps, p10, _ = time_compiled(
            self.compiled, self.args, self.kwargs, donating=self.donating, **timing
        )
        return self.measurement.replace(run_s=run_s, run_iqr_s=iqr_s, reps=reps, run_p10_s=p10, outputs=None)


def measure_executable(
    fn: Callable,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    config: Config | None = None,
    *,
    jit_kwargs: dict[str, Any] | None = None,
    timing: dict[str, Any] | None = None,
    clear_caches: bool = True,
    keep_outputs: bool = False,
    on_stage: Callable[[str, Stages], None] | None = None,
    on_lowered: Callable[[str], Measurement | None] | None = None,
) -> tuple[Measurement, Executable | None]:
    """:func:`measure`, also returning the :class:`Executable` (None when ``on_lowered``
    handed back an earlier measurement and nothing was compiled).

    ``on_stage(name, stages)`` is called after ``"trace"`` and after ``"lower"`` (before
    ``on_lowered``), e.g. to stop a config over its compile budget.
    """
    kwargs, jit_kwargs, args = dict(kwargs or {}), dict(jit_kwargs or {}), tuple(args)
    config = Config() if config is None else config

    def traced(st: Stages) -> None:
        if on_stage is not None:
            on_stage("trace", st)

    def lowered(st: Stages) -> Any:
        if on_stage is not None:
            on_stage("lower", st)
        return None if on_lowered is None else on_lowered(st.program_hash)

    stages = compile_config(
        fn, args, kwargs, config, jit_kwargs=jit_kwargs, clear_caches=clear_caches, on_traced=traced, on_lowered=lowered
    )
    if stages.reused is not None:
        return reuse(stages.reused, stages, config), None
    dyn_args, dyn_kwargs = dynamic_args(fn, args, kwargs, jit_kwargs)
    m = run_measurement(
        stages,
        dyn_args,
        dyn_kwargs,
        config=config,
        donating=donates(jit_kwargs),
        keep_outputs=keep_outputs,
        **dict(timing or {}),
    )
    return m, Executable(stages.compiled, dyn_args, dyn_kwargs, donates(jit_kwargs), m.replace(outputs=None))


def measure(
    fn: Callable,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    config: Config | dict | None = None,
    *,
    jit_kwargs: dict[str, Any] | None = None,
    warmup: int = 2,
    min_reps: int = 5,
    max_reps: int = 2000,
    target_s: float = 0.5,
    clear_caches: bool = True,
    keep_outputs: bool = False,
    on_lowered: Callable[[str], Measurement | None] | None = None,
) -> Measurement:
    """Compile ``fn`` under ``config`` and time every stage.

    Arguments:
        fn: the (undecorated) function.
        args, kwargs: example inputs; static ones as ``jit_kwargs`` declares.
        config: the config to measure; None measures the default.
        jit_kwargs: keyword arguments for ``jax.jit`` (``static_argnums``, ``donate_argnums``...).
        warmup, min_reps, max_reps, target_s: runtime sampling, see :func:`time_calls`.
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
    timing = {"warmup": warmup, "min_reps": min_reps, "max_reps": max_reps, "target_s": target_s}
    return measure_executable(
        fn,
        args,
        kwargs,
        Config.from_dict(config),  # a user's dict is read once, here
        jit_kwargs=jit_kwargs,
        timing=timing,
        clear_caches=clear_caches,
        keep_outputs=keep_outputs,
        on_lowered=on_lowered,
    )[0]
