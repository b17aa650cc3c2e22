"""Builder processes: configs compiled in parallel processes and loaded by the worker, which only
measures. Real processes and real JAX on the CPU: the pool compiles, the worker loads and its
outputs equal jax.jit's; a grid study compiles nothing in the worker; a build past its deadline
is killed and the pool goes on (past its budget at once where another builder is idle); a
builder that stops responding (SIGSTOP) is replaced past the default deadline and the worker
compiles its config; a fresh worker loads instead of compiling; without builds the worker
compiles and says why once."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _presets import FAST, ONE_ROUND
from _procs import gone
from _repo import ROOT

import autotune as at
from autotune.measuring._runner import TrialFailed
from autotune.measuring.process import _builders
from autotune.measuring.process._builders import BuilderPool, auto_count
from autotune.measuring.process._channel import worker_env
from autotune.measuring.process._worker_runner import WorkerRunner

CPU = {"platform": "cpu", "device_kind": "cpu", "device_count": 1}
V5E = {"platform": "tpu", "device_kind": "TPU v5 lite", "device_count": 1}
FOR = {"l": {"repr": "for"}}


def smooth(x, bias):
    y = at.loop(lambda c, _: (jnp.sin(c) * 0.5 + bias, None), x, length=8, name="l")[0]
    return {"y": y, "total": y.sum()}


def _request(fn, *args) -> dict:
    """An export-mode trial request's program fields for ``fn`` on ``args``."""
    exported = jax.export.export(jax.jit(fn))(*args)
    return {"program": base64.b64encode(exported.serialize()).decode("ascii"), "donate": []}


def heavy(x):
    for i in range(400):  # a few seconds of XLA compile on the CPU, a moment of tracing
        x = jnp.sin(x @ x.T + i) * 0.5
    return x


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_builders_compile_and_the_worker_loads_with_the_outputs_of_jax_jit():
    x, bias = jnp.linspace(0.0, 1.0, 16), jnp.float32(1.0)
    expected = jax.jit(smooth)(x, bias)
    with WorkerRunner(at.Call(smooth, (x, bias)), FAST, trial_timeout=120, builders=1) as runner:
        runner.start()  # the builders start with the worker, before its device is known
        assert runner._pool is not None and runner._pool.target is None
        runner.prefetch([{}, FOR])
        assert runner._pool.target["platform"] == "cpu"
        assert runner.lookahead == 1 and len(runner._pool.pending()) == 2  # one builder, two queued
        first, unrolled = runner.measure({}), runner.measure(FOR)
        builder_pid = runner._pool._builders[0].proc.pid
        assert runner.compiled_in == {"builder": 2} and runner._worker.compiled == 0
        again = runner.retime({})  # the worker keeps a loaded executable as it keeps a compiled one
        assert again is not None and again.compile_s == first.compile_s
        assert runner.compile_summary() == "2 compiles in 1 builder process"
    assert gone(builder_pid)
    for m in (first, unrolled):
        assert m.compile_s > 0 and m.compile_cpu_s > 0 and m.trace_s > 0 and m.run_s > 0
        np.testing.assert_allclose(m.outputs["y"], expected["y"], rtol=1e-6)
        np.testing.assert_allclose(m.outputs["total"], expected["total"], rtol=1e-6)
    assert first.program_hash != unrolled.program_hash
    for m, config in ((first, {}), (unrolled, FOR)):  # the loaded executable's memory figures are jax.jit's
        stats = jax.jit(at.with_config(smooth, config)).lower(x, bias).compile().memory_analysis()
        assert m.memory["temp"] == stats.temp_size_in_bytes and m.memory["output"] == stats.output_size_in_bytes
        assert m.memory_bytes is not None and m.memory_bytes >= stats.argument_size_in_bytes


def test_configs_with_one_program_share_one_build():
    f = lambda v: jax.lax.scan(lambda c, _: (c * 2.0, None), v, None, length=8)[0]  # noqa: E731
    x = jnp.ones(4)
    site = at.sites(f, x)[0].id
    full, same = {site: {"repr": "for"}}, {site: {"unroll": 8}}
    with WorkerRunner(at.Call(f, (x,)), FAST, builders=1) as runner:
        runner.prefetch([full, same])
        a, b = runner.measure(full), runner.measure(same)
        assert runner._pool.built == 1 and runner.compiled_in == {"builder": 2}
    assert a.program_hash == b.program_hash and a.compile_s == b.compile_s
    np.testing.assert_array_equal(a.outputs, b.outputs)


def test_a_pool_held_to_one_build_at_a_time_starts_the_next_when_the_first_is_done():
    # Confirmation's compiled rounds hold the pool to one build (`at_once`): two compiles side by
    # side would each read slower than a user's process compiles alone.
    pool = BuilderPool(2, CPU, python=sys.executable, env=worker_env({}))
    try:
        pool.wait(pool.submit("warm", _request(smooth, jnp.ones(4), jnp.float32(1.0))))
        while not all(b.ready for b in pool._builders):  # both up and idle
            pool.poll(0.05)
        pool.at_once = 1
        a, b = (_request(smooth, jnp.ones(n), jnp.float32(1.0)) for n in (8, 16))
        stopped = [b.proc.pid for b in pool._builders]
        for pid in stopped:  # the first cannot finish before the second is submitted, however loaded the machine
            os.kill(pid, signal.SIGSTOP)
        try:
            first, second = pool.submit("a", a), pool.submit("b", b)
            running = [b.build for b in pool._builders if b.build is not None]
            assert running == [first] and list(pool._queue) == [second]  # a builder idle, yet the second waits
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
        pool.wait(first)
        assert second.started is not None  # started as the first was done
        assert pool.wait(second)["compile_s"] > 0
    finally:
        pool.close()


def test_a_fresh_prefetch_compiles_a_measured_program_again_while_the_one_before_is_timed():
    x, bias = jnp.linspace(0.0, 1.0, 16), jnp.float32(1.0)
    with WorkerRunner(at.Call(smooth, (x, bias)), FAST, builders=2) as runner:
        runner.measure({})
        runner.measure(FOR)
        built = runner._pool.built
        runner.prefetch([{}, FOR])  # measured programs are shared, not built again
        assert runner._pool.built == built and not runner._pool.pending()
        runner.prefetch([{}, FOR], fresh=True)
        assert runner._pool.at_once == 1 and len(runner._pool.pending()) == 2
        again = runner.measure({})
        nxt = runner._prepared[at.Config(FOR).to_json()].build
        assert nxt.started is not None  # built while {} was loaded and timed
        runner.measure(FOR)
        assert runner._pool.built == built + 2 and runner.compiled_in == {"builder": 4}
        runner.prefetch([])
        assert runner._pool.at_once is None and not runner._prepared
    assert again.compile_s > 0 and again.program_hash is not None


@pytest.mark.slow
def test_a_grid_study_with_builders_compiles_nothing_in_the_worker(tmp_path):
    x, bias = jnp.linspace(0.0, 1.0, 16), jnp.float32(1.0)
    runner = WorkerRunner(at.Call(smooth, (x, bias)), FAST, trial_timeout=120, builders=1)
    result = at.tune(
        smooth,
        x,
        bias,
        runner=runner,
        sampler="grid",
        xla=False,
        storage=str(tmp_path / "s.db"),
        progress=False,
        timing=FAST,
        **ONE_ROUND,
    )
    states = {t.state for t in result.trials}
    assert states <= {"complete", "shared", "pruned"} and len(result.trials) >= 4, states  # pruned: over budget
    assert runner.compiled_in["runner"] == 0 and runner.compiled_in["builder"] >= 3
    assert "compiles in 1 builder process" in result.compiled_in
    assert runner._pool is None  # closed with the runner


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_build_past_its_deadline_is_killed_and_the_pool_goes_on():
    pool = BuilderPool(1, CPU, python=sys.executable, env=worker_env({}), trial_timeout=1.0)
    try:
        slow = pool.submit("slow", _request(heavy, jnp.ones((8, 8))))
        pid = None
        with pytest.raises(TrialFailed) as info:
            while slow.pid is None:
                pool.poll(0.05)
            pid = slow.pid
            pool.wait(slow)
        assert info.value.state == "timeout" and "trial timeout of 1 s" in info.value.reason
        assert info.value.compile_s_at_least is not None and gone(pid)
        quick = pool.submit("quick", _request(smooth, jnp.ones(4), jnp.float32(1.0)))
        built = pool.wait(quick)
        assert built["n_out"] == 2 and built["compile_s"] > 0 and not built["deviceless"]
        pruned = pool.submit("slow again", _request(heavy, jnp.ones((8, 8))))
        with pytest.raises(TrialFailed) as info:  # past the compile budget: it cannot win
            pool.wait(pruned, budget=0.3, grace=0.0)
        assert info.value.state == "pruned" and info.value.compile_s_at_least >= 0.3
    finally:
        pool.close()


@pytest.mark.slow
def test_a_build_over_its_budget_is_killed_within_the_grace_when_another_builder_is_idle():
    # The grace keeps a compile that would end sooner than a replacement starts; with a second
    # builder up and idle the replacement costs the study nothing, so the budget alone decides.
    pool = BuilderPool(2, CPU, python=sys.executable, env=worker_env({}))
    try:
        pool.wait(pool.submit("quick", _request(smooth, jnp.ones(4), jnp.float32(1.0))))
        while not all(b.ready for b in pool._builders):  # both up: one of them is the spare
            pool.poll(0.05)
        build = pool.submit("heavy", _request(heavy, jnp.ones((8, 8))))
        with pytest.raises(TrialFailed) as info:
            pool.wait(build, budget=0.3, grace=600.0)
        assert info.value.state == "pruned" and info.value.compile_s_at_least >= 0.3
        assert gone(build.pid)
    finally:
        pool.close()
    alone = BuilderPool(1, CPU, python=sys.executable, env=worker_env({}))
    try:  # no spare: the grace holds and the compile ends
        built = alone.wait(alone.submit("heavy", _request(heavy, jnp.ones((8, 8)))), budget=0.3, grace=600.0)
        assert built["compile_s"] > 0.3
    finally:
        alone.close()


@pytest.mark.slow
@pytest.mark.timeout(300)  # without a deadline for a stuck builder, measuring waits for it forever
def test_a_builder_that_stops_responding_is_replaced_and_the_worker_compiles_its_config(monkeypatch):
    # A build without progress is stuck after 10x the slowest build seen, at least the floor (30 s
    # in the product): 3 s here, and the same replacement, warning and compile in the worker.
    floor_s = 3.0
    monkeypatch.setattr(_builders, "STUCK_FLOOR_S", floor_s)
    x, bias = jnp.linspace(0.0, 1.0, 16), jnp.float32(1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with WorkerRunner(at.Call(smooth, (x, bias)), FAST, builders=2) as runner:
            runner.measure({})  # through a builder: the slowest build seen is short
            stopped = [b.proc.pid for b in runner._pool._builders]
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                unrolled = runner.measure(FOR)  # no trial timeout: its builder is stuck past the default deadline
                waited = time.monotonic() - started
            finally:
                for pid in stopped:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
            assert runner.compiled_in == {"builder": 1, "runner": 1} and unrolled.run_s > 0
            fresh = [b.proc.pid for b in runner._pool._builders]
            assert len(fresh) == 2 and len(set(fresh) - set(stopped)) == 1  # the stuck one replaced
            stuck = (set(stopped) - set(fresh)).pop()
            assert gone(stuck)
    assert floor_s <= waited < floor_s + 120, waited
    said = [str(w.message) for w in caught if "no sign of progress" in str(w.message)]
    assert len(said) == 1 and "\n" not in said[0], said
    assert f"builder pid {stuck} " in said[0] and "--trial-timeout" in said[0], said[0]


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_fresh_worker_loads_what_the_builders_compiled():
    x, bias = jnp.linspace(0.0, 1.0, 16), jnp.float32(1.0)
    with WorkerRunner(at.Call(smooth, (x, bias)), FAST, builders=1) as runner:
        first = runner.measure(FOR)
        runner.retain([FOR])
        old = runner.pid
        assert runner.renew()
        timed = runner.retime(FOR)  # the fresh worker lacks it: the builder's executable is loaded
        assert runner.pid != old and timed is not None and timed.outputs is None
        assert timed.compile_s == first.compile_s and timed.program_hash == first.program_hash
        again = runner.measure(FOR)  # confirmation's second process: loaded, not compiled again
        assert again.compile_s == first.compile_s
        np.testing.assert_allclose(again.outputs["y"], first.outputs["y"])
        assert runner.compiled_in == {"builder": 1, "loaded": 2} and runner._worker.compiled == 0


def test_without_deviceless_builds_the_worker_compiles_and_says_why_once():
    x, bias = jnp.linspace(0.0, 1.0, 16), jnp.float32(1.0)
    nowhere = {"platform": "tpu", "device_kind": "TPU v99", "device_count": 1}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with WorkerRunner(at.Call(smooth, (x, bias)), FAST, builders=2, build_target=nowhere) as runner:
            runner.prefetch([{}, FOR])
            a, b = runner.measure({}), runner.measure(FOR)
            assert runner.compiled_in == {"runner": 2} and runner._pool is None
            assert "builders off" in runner.compile_summary()
    said = [str(w.message) for w in caught if "builder processes" in str(w.message)]
    assert len(said) == 1 and "TPU v99" in said[0] and "\n" not in said[0], said
    assert a.run_s > 0 and b.run_s > 0


@pytest.mark.slow
def test_nothing_is_left_running_when_the_parent_exits_without_closing():
    code = textwrap.dedent(
        """
        import jax.numpy as jnp
        import autotune as at
        from autotune.measuring.process import WorkerRunner
        f = lambda x: at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=8, name="l")[0]
        r = WorkerRunner(at.Call(f, (jnp.ones(4),)), {"target_s": 0.01}, builders=2)
        r.prefetch([{}, {"l": {"repr": "for"}}])
        r.measure({})
        print(r.pid, *(b.proc.pid for b in r._pool._builders), flush=True)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) == 3 and all(gone(p) for p in pids)


def test_auto_means_builders_only_beside_an_accelerator():
    assert auto_count("auto", pinned=True, device=V5E, cores=16) == 4
    assert auto_count("auto", pinned=True, device=V5E, cores=2) == 1
    assert auto_count("auto", pinned=True, device=CPU, cores=16) == 0  # they would share the timed cores
    assert auto_count("auto", pinned=False, device=V5E, cores=16) == 0
    for other in ({**V5E, "device_count": 4}, {**V5E, "device_kind": "TPU v99"}, {**V5E, "platform": "gpu"}):
        assert auto_count("auto", pinned=True, device=other, cores=16) == 0  # no deviceless compile known for it
    assert auto_count(3, pinned=False, device=CPU) == 3
    assert json.loads(json.dumps(at.TuneOptions(builders=2).builders)) == 2
    with pytest.raises(at.StudyError, match=r"^builders=-1 must be 'auto' or a number of processes >= 0"):
        at.TuneOptions(builders=-1)
