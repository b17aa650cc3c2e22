"""How a call's runtime is sampled: the three timing modes, one implementation for every runner.

Calling a compiled program dispatches it and returns at once; the device runs it later, and
waiting for its outputs costs a round trip between host and device. What one call is charged
depends on the mode (:attr:`Sampling.mode`; ``TuneOptions(timing=...)``, ``autotune tune --timing``):

``"steady"`` (the default)
    After warm-up, K calls are dispatched back to back and the clock stops once the last one's
    outputs are ready: a sample is the batch's seconds / K. This is what a program that keeps
    its device busy pays per call (a training loop, a solver's steps, a server with a queue):
    the host dispatches the next call while the device runs this one, and the round trip is
    paid once per batch. K grows until a batch lasts ``min_sample_s``, and the number of
    batches makes about ``target_s`` in all.
``"blocking"``
    Every call waited for on its own: the round trip is charged to each call. For a program
    that serves one request at a time and waits for each answer.
``"device"``
    The device's own seconds per call, read from JAX's profiler over calls dispatched back to
    back (:func:`profiled_seconds`), at most :data:`DEVICE_CALLS` of them. Writing the profile
    out costs about a second per timing for a program of a few hundred ops. Where the profile
    holds no device time (the CPU), the steady state is charged instead and the result says
    ``"steady"``.

On an accelerator the round trip can be several times a small program's device time; timed
blocking, a loop's unroll win mostly disappears into it. ``min_reps`` and ``max_reps`` (of the
:class:`~autotune.measuring._sampling.Sampling`) bound the samples (a batch in steady mode, a call
or a batch of blocked calls in blocking mode, a call in device mode); the ``reps`` reported counts
the calls timed.
"""

from __future__ import annotations

import glob
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from autotune._errors import warn_once
from autotune.measuring._sampling import DEFAULT, Sampling

STEADY_BATCH_S = 0.02
"""How long a steady batch lasts at least (by default): the one round trip it pays (a fraction of a
millisecond on an accelerator) stays a few percent of it."""

BLOCKING_BATCH_S = 2e-4
"""Blocked calls faster than this are timed several to a sample, so timer resolution does not dominate."""

DEVICE_CALLS = 100
"""The most calls profiled for one device timing (``min_reps`` wins if larger): a device runs a
program in nearly the same time every call, and writing the profile out costs about as much as
the program has ops, times the calls."""


class Timing(NamedTuple):
    """What :func:`time_calls` found: seconds per call (median, interquartile range, 10th
    percentile), the calls timed, the mode charged, the last call's outputs and the wall seconds it took."""

    run_s: float
    iqr_s: float
    reps: int
    p10_s: float
    mode: str
    outputs: Any = None
    sampled_s: float = 0.0  # the wall the sampling took, warm-up included
    stopped: bool = False  # stopped early: every sample was over the sampling's stop_above_s


def quartiles(samples: Sequence[float]) -> tuple[float, float, float]:
    """(median, IQR, 10th percentile). Inclusive quantiles: the default (exclusive) method
    extrapolates below the fastest sample, and a few samples with one slow outlier gave a
    negative 10th percentile."""
    if len(samples) < 4:
        return statistics.median(samples), 0.0, min(samples)
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return statistics.median(samples), q3 - q1, statistics.quantiles(samples, n=10, method="inclusive")[0]


@dataclass(frozen=True)
class Stopwatch:
    """How a timing sees the device: ``block`` waits until its argument (outputs, or a call's
    inputs) is ready, None for ``jax.block_until_ready``; ``clock`` reads the seconds. A test's
    simulated device replaces both; a measurement keeps the default."""

    block: Callable[[Any], Any] | None = None
    clock: Callable[[], float] = time.perf_counter


def time_calls(
    call: Callable[..., Any],
    sampling: Sampling = DEFAULT,
    *,
    fresh: Callable[[], Any] | None = None,
    stopwatch: Stopwatch | None = None,
    min_sample_s: float | None = None,
    max_batch: int = 1000,
) -> Timing:
    """Seconds per call of ``call``, sampled as ``sampling`` says (its mode: see the module's docstring).

    Arguments:
        call: dispatches one call and returns its outputs without waiting for them; it takes
            one argument, a set of inputs from ``fresh``, when ``fresh`` is given.
        sampling: the mode, the warm-up calls (each waited for, before anything is timed), the
            bounds on the number of samples and about how long they take in all (:class:`Sampling`).
        fresh: makes a fresh set of inputs for one call (donated buffers are used up by a
            call). The inputs of a sample are made, and waited for, before its clock starts.
        stopwatch: how outputs are waited for and seconds read (:class:`Stopwatch`; None: the default).
        min_sample_s: how long a sample lasts at least; None: :data:`STEADY_BATCH_S` for a steady
            batch (shortened to ``target_s / min_reps`` when the whole sampling is meant to be
            shorter), :data:`BLOCKING_BATCH_S` for blocked calls.
        max_batch: the most calls in one sample (also how many fresh input sets exist at once).
    """
    mode, target_s, max_reps = sampling.mode, sampling.target_s, sampling.max_reps
    stopwatch = stopwatch or Stopwatch()
    block = stopwatch.block
    if block is None:
        import jax

        block = jax.block_until_ready
    started = time.perf_counter()
    run = _Calls(call, block, fresh, stopwatch.clock)
    for _ in range(sampling.warmup):
        run.batch(1)
    max_batch, min_reps = max(1, int(max_batch)), max(1, int(sampling.min_reps))
    if mode == "blocking":
        min_sample_s = BLOCKING_BATCH_S if min_sample_s is None else min_sample_s
        return run.blocking(sampling, min_sample_s, max_batch, started)
    if min_sample_s is None:
        min_sample_s = max(BLOCKING_BATCH_S, min(STEADY_BATCH_S, target_s / min_reps))
    k, elapsed = run.calibrate(min_sample_s, max_batch)
    if mode == "device":
        n = int(max(min_reps, min(max_reps, DEVICE_CALLS, round(target_s * k / max(elapsed, 1e-9)))))
        durations = run.device(n, max_batch)
        if durations is not None:
            return _summary(durations, len(durations), "device", run.outputs, started)
    reps = int(max(min_reps, min(max_reps, round(target_s / max(elapsed, 1e-9)))))
    samples: list[float] = []
    while len(samples) < reps and not _over(samples, min_reps, sampling.stop_above_s):
        samples.append(run.batch(k) / k)
    return _summary(samples, len(samples) * k, "steady", run.outputs, started, len(samples) < reps)


def _over(samples: list[float], min_reps: int, above: float | None) -> bool:
    """Whether a sampling may stop now: ``min_reps`` samples taken and every one over ``above``."""
    return above is not None and len(samples) >= min_reps and min(samples) > above


def _summary(
    samples: Sequence[float], calls: int, mode: str, outputs: Any, started: float, stopped: bool = False
) -> Timing:
    median, iqr, p10 = quartiles(samples)
    return Timing(median, iqr, calls, p10, mode, outputs, time.perf_counter() - started, stopped)


class _Calls:
    """One timing's calls: batches dispatched back to back, blocked calls, profiled calls."""

    def __init__(self, call, block, fresh, clock):
        self.call, self.block, self.fresh, self.clock = call, block, fresh, clock
        self.outputs: Any = None

    def prepare(self, k: int) -> list[Any] | None:
        """``k`` fresh input sets, ready (before a clock starts), or None without ``fresh``."""
        if self.fresh is None:
            return None
        inputs = [self.fresh() for _ in range(k)]
        self.block(inputs)
        return inputs

    def dispatch(self, k: int, inputs: list[Any] | None) -> Any:
        """``k`` calls back to back, none waited for; the last one's outputs."""
        out = None
        if inputs is None:
            for _ in range(k):
                out = self.call()
        else:
            for x in inputs:
                out = self.call(x)
        return out

    def batch(self, k: int) -> float:
        """Seconds of ``k`` calls dispatched back to back, until the last one's outputs are ready."""
        inputs = self.prepare(k)
        t0 = self.clock()
        out = self.dispatch(k, inputs)
        self.block(out)
        elapsed = self.clock() - t0
        self.outputs = out
        return elapsed

    def calibrate(self, min_s: float, max_batch: int) -> tuple[int, float]:
        """(K, seconds of a batch of K): K grown from 1 until a batch lasts ``min_s`` (or K is ``max_batch``)."""
        k = 1
        while True:
            elapsed = self.batch(k)
            if elapsed >= min_s or k >= max_batch:
                return k, elapsed
            k = min(max_batch, max(k + 1, math.ceil(k * min_s / max(elapsed, 1e-9))))

    def blocked(self, k: int) -> float:
        """Seconds per call of ``k`` calls, each waited for before the next is dispatched."""
        inputs = self.prepare(k)
        t0 = self.clock()
        for i in range(k):
            self.outputs = self.dispatch(1, None if inputs is None else inputs[i : i + 1])
            self.block(self.outputs)
        return (self.clock() - t0) / k

    def blocking(self, sampling: Sampling, min_sample_s: float, max_batch: int, started: float) -> Timing:
        min_reps = max(1, int(sampling.min_reps))
        one = max(self.blocked(1), 1e-9)
        batch = 1 if self.fresh is not None else max(1, min(max_batch, math.ceil(min_sample_s / one)))
        reps = int(max(min_reps, min(sampling.max_reps, sampling.target_s / (one * batch))))
        samples: list[float] = []
        while len(samples) < reps and not _over(samples, min_reps, sampling.stop_above_s):
            samples.append(self.blocked(batch))
        return _summary(samples, len(samples) * batch, "blocking", self.outputs, started, len(samples) < reps)

    def device(self, n: int, max_batch: int) -> list[float] | None:
        """The device seconds of ``n`` calls dispatched back to back (in profiles of at most
        ``max_batch`` calls, whose fresh inputs are made before each profile starts); None
        where the profile holds no device time for them."""
        durations: list[float] = []
        while len(durations) < n:
            k = min(max_batch, n - len(durations))
            inputs = self.prepare(k)

            def calls(k=k, inputs=inputs) -> None:
                self.outputs = self.dispatch(k, inputs)
                self.block(self.outputs)

            got = profiled_seconds(calls, k)
            if got is None:
                return None
            durations += got
        return durations


def profiled_seconds(run: Callable[[], None], calls: int) -> list[float] | None:
    """The device seconds of each of the ``calls`` program executions ``run()`` makes, read from
    a JAX profile around it: the events of the ``XLA Modules`` line of each device plane
    (``/device:TPU:0``, ...), the slowest device's per call. None where the profile has no
    such line (the CPU's), or another number of executions than ``calls`` (then with a note
    once per process), or a profile is already running; the caller then charges the steady state.
    JAX's profiler is imported here, on use."""
    import jax.profiler

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = options.host_tracer_level = 0  # the device's events are what is read
    with tempfile.TemporaryDirectory(prefix="autotune-profile-") as where:
        try:
            jax.profiler.start_trace(where, profiler_options=options)
        except RuntimeError as exc:  # a profile of the user's is running
            warn_once(("timing-device", "busy"), f"device timing: {exc}; the steady state is charged instead.")
            return None
        try:
            run()
        finally:
            jax.profiler.stop_trace()
        files = glob.glob(os.path.join(where, "**", "*.xplane.pb"), recursive=True)
        if not files:
            return None
        profile = jax.profiler.ProfileData.from_file(files[0])
        per_device = []
        for plane in profile.planes:
            if not plane.name.startswith("/device:"):
                continue
            for line in plane.lines:
                if line.name == "XLA Modules":
                    events = [e.duration_ns * 1e-9 for e in line.events]
                    if events:
                        per_device.append(events)
    if not per_device:
        return None
    if any(len(events) != calls for events in per_device):
        counts = sorted({len(events) for events in per_device})
        warn_once(
            ("timing-device", "count"),
            f"device timing: the profile holds {counts} program runs per device for {calls} calls, so they "
            "cannot be told apart; the steady state is charged instead.",
        )
        return None
    return [max(seconds) for seconds in zip(*per_device)]
