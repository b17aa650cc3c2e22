"""Measure one config honestly: trace, lower, compile and run time, separately."""

from __future__ import annotations

import inspect
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax

from . import _compat
from ._config import Config
from ._rewrite import with_config


@dataclass(frozen=True)
class Measurement:
    """What one config costs.

    Attributes:
        trace_s, lower_s, compile_s: seconds spent in ``jit(...).trace``, ``.lower``
            and ``.compile`` (JAX's in-memory caches cleared and the persistent
            compilation cache off, so each is a real, cold number).
        run_s: median seconds per call after warm-up, each call synchronised with
            ``block_until_ready``; ``run_iqr_s`` is the interquartile range of the samples.
        reps: how many calls the runtime figures are based on.
        memory: bytes XLA reports (``temp``, ``generated_code``, ``argument``, ``output``).
        flops: flops XLA's cost analysis reports, or None.
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
    outputs: Any = field(default=None, compare=False, repr=False)

    @property
    def compile_total_s(self) -> float:
        """Everything paid once per signature: trace + lower + compile."""
        return self.trace_s + self.lower_s + self.compile_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace_s": self.trace_s, "lower_s": self.lower_s, "compile_s": self.compile_s,
            "run_s": self.run_s, "run_iqr_s": self.run_iqr_s, "reps": self.reps,
            "config": self.config.to_dict(), "memory": dict(self.memory), "flops": self.flops,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        return cls(
            trace_s=float(d["trace_s"]), lower_s=float(d["lower_s"]), compile_s=float(d["compile_s"]),
            run_s=float(d["run_s"]), run_iqr_s=float(d.get("run_iqr_s", 0.0)), reps=int(d.get("reps", 0)),
            config=Config.from_dict(d.get("config") or {}), memory=dict(d.get("memory") or {}),
            flops=d.get("flops"),
        )


def _dynamic_args(fn: Callable, args: tuple, kwargs: dict, jit_kwargs: dict) -> tuple[tuple, dict]:
    """The arguments a compiled executable takes: the static ones removed.

    Like ``jax.jit``, a static argument declared by number may be passed by
    keyword and one declared by name may be passed by position.
    """
    nums = jit_kwargs.get("static_argnums", ()) or ()
    nums = {nums} if isinstance(nums, int) else set(nums)
    names = jit_kwargs.get("static_argnames", ()) or ()
    names = {names} if isinstance(names, str) else set(names)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nums = {n % len(positional) if positional and n < 0 else n for n in nums}
    for i, name in enumerate(positional):
        if name in names:
            nums.add(i)
        if i in nums:
            names.add(name)
    if args and not positional:
        nums = {n % len(args) for n in nums}
    return (
        tuple(a for i, a in enumerate(args) if i not in nums),
        {k: v for k, v in kwargs.items() if k not in names},
    )


def _memory(compiled) -> dict[str, int]:
    try:
        stats = compiled.memory_analysis()
    except Exception:
        return {}
    out = {}
    for key in ("temp", "generated_code", "argument", "output"):
        value = getattr(stats, f"{key}_size_in_bytes", None)
        if value is not None:
            out[key] = int(value)
    return out


def _flops(compiled) -> float | None:
    try:
        analysis = compiled.cost_analysis()
    except Exception:
        return None
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else None
    value = (analysis or {}).get("flops")
    return float(value) if value is not None and math.isfinite(value) and value >= 0 else None


def _quartiles(samples: Sequence[float]) -> tuple[float, float]:
    if len(samples) < 4:
        return statistics.median(samples), 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4)
    return statistics.median(samples), q3 - q1


def time_calls(
    call: Callable[[], Any],
    *,
    warmup: int = 2,
    min_reps: int = 5,
    max_reps: int = 2000,
    target_s: float = 0.5,
    min_sample_s: float = 2e-4,
    fresh_inputs: bool = False,
) -> tuple[float, float, int]:
    """Median and IQR of seconds per call of ``call`` (which must block).

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
    median, iqr = _quartiles(samples)
    return median, iqr, reps * batch


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

    Returns:
        A :class:`Measurement`.

    Example::

        >>> import jax.numpy as jnp, autotune as at
        >>> f = lambda x: at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=16, name="l")[0]
        >>> m = at.measure(f, (jnp.zeros(4),), config={"l": {"repr": "for"}})
        >>> m.compile_s > 0 and m.run_s > 0
        True
    """
    kwargs = dict(kwargs or {})
    jit_kwargs = dict(jit_kwargs or {})
    args = tuple(args)
    config = Config.from_dict(config)
    with _compat.no_persistent_cache():
        if clear_caches:
            _compat.clear_jax_caches()
        jitted = jax.jit(with_config(fn, config), **jit_kwargs)
        t0 = time.perf_counter()
        traced = jitted.trace(*args, **kwargs)
        t1 = time.perf_counter()
        lowered = traced.lower()
        t2 = time.perf_counter()
        compiled = lowered.compile()
        t3 = time.perf_counter()
    dyn_args, dyn_kwargs = _dynamic_args(fn, args, kwargs, jit_kwargs)
    donating = bool(jit_kwargs.get("donate_argnums") or jit_kwargs.get("donate_argnames"))
    outputs = None

    def call():
        nonlocal outputs
        a, k = (jax.tree_util.tree_map(_copy, (dyn_args, dyn_kwargs)) if donating else (dyn_args, dyn_kwargs))
        outputs = jax.block_until_ready(compiled(*a, **k))

    run_s, iqr_s, reps = time_calls(
        call, warmup=warmup, min_reps=min_reps, max_reps=max_reps, target_s=target_s,
        fresh_inputs=donating,
    )
    return Measurement(
        trace_s=t1 - t0, lower_s=t2 - t1, compile_s=t3 - t2, run_s=run_s, run_iqr_s=iqr_s,
        reps=reps, config=config, memory=_memory(compiled), flops=_flops(compiled),
        outputs=outputs if keep_outputs else None,
    )


def _copy(x):
    return x.copy() if isinstance(x, jax.Array) else x
