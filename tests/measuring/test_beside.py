"""autotune.measuring._beside and ``retime(config, beside=True)``: calls timed while a compile runs
beside them (tier-up's slowdown), in this process and in a worker."""

from __future__ import annotations

import statistics
import threading

import jax.numpy as jnp
import pytest
from _presets import STEADY
from _wait import wait_until

import autotune as at
from autotune.measuring import _beside
from autotune.measuring._runner import InProcessRunner
from autotune.measuring.process._worker_runner import WorkerRunner


def loop8(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=8, name="l")[0]


def beside_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "autotune-compile-beside"]


def test_compiling_compiles_again_and_again_until_the_block_ends_and_leaves_no_thread():
    with _beside.compiling() as done:
        assert wait_until(lambda: done() >= 2, timeout=60)  # a fresh program each time: JAX keeps none
        assert len(beside_threads()) == 1
        assert done.alone_s is None and done.stretch is None  # the baseline comes after the block
    assert beside_threads() == []
    # compiles that ran within the block, each timed, and one alone after it: their ratio
    assert len(done.beside_s) >= 1 and all(t > 0 for t in done.beside_s) and done.alone_s > 0
    assert done.stretch == max(1.0, statistics.median(done.beside_s) / done.alone_s)


@pytest.mark.timing
def test_a_compile_beside_calls_that_keep_the_cores_busy_reads_a_stretch_above_one():
    """The stretch is what the block's calls cost the compile: calls that keep every core busy
    (a NumPy matmul per thread, outside the GIL) make a stand-in compile longer than alone."""
    import os

    import numpy as np

    stop = threading.Event()

    def burn():
        a = np.ones((256, 256))
        while not stop.is_set():
            a @ a

    burners = [threading.Thread(target=burn) for _ in range(2 * (os.cpu_count() or 1))]
    with _beside.compiling() as done:
        for b in burners:
            b.start()
        assert wait_until(lambda: len(done.beside_s) >= 2, timeout=120)
        stop.set()
        for b in burners:
            b.join()
    assert done.stretch > 1.0, (done.beside_s, done.alone_s)


def test_the_in_process_runner_times_a_kept_executable_beside_a_compile():
    x = jnp.ones(16)
    with InProcessRunner(at.Call(loop8, (x,)), STEADY) as runner:
        first = runner.measure({})
        before = _beside.compiled_beside()
        beside = runner.retime({}, beside=True)
        assert _beside.compiled_beside() > before  # the calls were timed while it compiled
        assert beside is not None and beside.run_s > 0 and beside.compile_s == first.compile_s
        assert beside.compile_stretch is not None and beside.compile_stretch >= 1.0  # a compile beside them ended
        alone = _beside.compiled_beside()
        again = runner.retime({})
        assert again is not None and _beside.compiled_beside() == alone  # not without beside
        assert again.compile_stretch is None
        assert runner.retime({"l": {"repr": "for"}}, beside=True) is None  # never measured: not kept


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_the_worker_times_its_kept_executable_beside_a_compile():
    x = jnp.ones(16)
    with WorkerRunner(at.Call(loop8, (x,)), STEADY, trial_timeout=60) as runner:
        first = runner.measure({})
        pid = runner.pid
        beside = runner.retime({}, beside=True)
        assert beside is not None and beside.run_s > 0 and beside.compile_s == first.compile_s
        assert beside.compile_stretch is not None and beside.compile_stretch >= 1.0  # crossed the protocol
        assert runner.pid == pid  # the same warm worker answered
    assert beside_threads() == []  # this process compiled nothing beside


def test_a_stand_in_that_cannot_compile_fails_the_block_instead_of_timing_the_calls_alone(monkeypatch):
    def broken(k):
        raise ValueError("no compiler here")

    monkeypatch.setattr(_beside, "_stand_in", broken)
    with pytest.raises(_beside.BesideFailed, match="no compiler here"):
        with _beside.compiling():
            pass
    assert beside_threads() == []
