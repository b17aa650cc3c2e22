"""The Runner contract, trial outcomes, and the in-process runner (which keeps its executables)."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _presets import FAST
from _repo import ROOT, python

import autotune as at
from autotune._interrupt import Interrupted, InterruptLatch
from autotune.measuring._runner import (
    FAILURES,
    InProcessRunner,
    Outcome,
    Runner,
    TrialFailed,
    stage_guard,
)
from autotune.measuring._sampling import Sampling
from autotune.measuring._stages import measure_executable
from autotune.measuring.process._worker_runner import WorkerRunner

FOR = {"l": {"repr": "for"}}


def loop8(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=8, name="l")[0]


def slow_to_trace(x):
    def body(c, _):
        for _ in range(10):
            c = jnp.sin(c) * 1.01 + jnp.cos(c * 0.5)
        return c, None

    return at.loop(body, x, length=200, name="l")[0]


def test_trial_failed_takes_only_failure_outcomes_and_carries_the_compile_lower_bound():
    e = TrialFailed(Outcome.PRUNED, "over budget", compile_s_at_least=1.5)
    assert e.state == "pruned" and e.outcome is Outcome.PRUNED and e.compile_s_at_least == 1.5
    assert str(e) == "pruned: over budget" and TrialFailed("timeout", "x").compile_s_at_least is None
    with pytest.raises(ValueError, match="not one of"):
        TrialFailed("complete", "fine")
    assert {o.value for o in FAILURES} == {"timeout", "crashed", "oom", "pruned", "error"}
    assert Outcome.SHARED.counts and Outcome.PRUNED.stopped and Outcome.INTERRUPTED.releases


def test_both_runners_follow_the_contract():
    assert isinstance(InProcessRunner(at.Call(loop8)), Runner)
    assert isinstance(WorkerRunner(at.Call(loop8, (jnp.ones(2),))), Runner)


def test_in_process_runner_retimes_kept_executables_and_drops_what_is_not_retained():
    x = jnp.ones(16)
    with InProcessRunner(at.Call(loop8, (x,)), FAST, recent=2) as runner:
        first = runner.measure({})
        again = runner.retime({})
        assert again is not None and again.outputs is None and again.config == first.config
        # the compile figures are the measured ones; the runtime figures are new samples
        assert (again.trace_s, again.lower_s, again.compile_s, again.program_hash) == (
            first.trace_s,
            first.lower_s,
            first.compile_s,
            first.program_hash,
        )
        assert again.reps >= 3 and again.run_s > 0
        runner.measure(FOR)
        runner.measure({"l": {"repr": "scan", "unroll": 2}})
        assert runner.retime({}) is None  # evicted: only the last `recent` configs are kept
        runner.retain([FOR])
        assert runner.retime({"l": {"repr": "scan", "unroll": 2}}) is None and runner.retime(FOR) is not None
        assert runner.retime(at.Config(FOR)).run_s > 0


def test_in_process_runner_shares_a_program_through_on_lowered():
    x = jnp.ones(4)
    fn = lambda v: jax.lax.scan(lambda c, _: (c * 2.0, None), v, None, length=8)[0]  # noqa: E731
    site = at.sites(fn, x)[0].id
    with InProcessRunner(at.Call(fn, (x,)), FAST) as runner:
        seen: dict[str, at.Measurement] = {}

        def on_lowered(h):
            return seen.get(h)

        full = runner.measure({site: {"repr": "for"}}, on_lowered=on_lowered)
        seen[full.program_hash] = full
        same = runner.measure({site: {"unroll": 8}}, on_lowered=on_lowered)
        assert same.program_hash == full.program_hash and same.compile_s == full.compile_s
        assert same.config == at.Config({site: {"unroll": 8}})
        assert runner.retime({site: {"unroll": 8}}).compile_s == full.compile_s  # it re-times the shared executable


def test_in_process_pruning_happens_between_stages_with_the_seconds_spent():
    x = jnp.ones(8)
    with InProcessRunner(at.Call(slow_to_trace, (x,)), FAST) as runner:
        with pytest.raises(TrialFailed) as info:
            runner.measure(FOR, compile_budget_s=1e-4)
        assert info.value.state == "pruned" and "after tracing" in info.value.reason
        assert info.value.compile_s_at_least > 1e-4
        with pytest.raises(TrialFailed) as info:  # a config that does not trace is an error, not a crash
            runner.measure({"nope": {"repr": "scan"}})
        assert info.value.state == "error" and "'nope'" in info.value.reason
        assert runner.measure({}, compile_budget_s=60.0).run_s > 0


def test_stage_guard_checks_the_timeout_and_a_caught_interrupt():
    from autotune.measuring._stages import Stages

    st = Stages(None, trace_s=0.2)
    guard = stage_guard(None, trial_timeout=0.5, started=time.monotonic() - 1.0, where=" in the parent")
    with pytest.raises(TrialFailed, match="tracing in the parent took .* over the trial timeout of 0.5 s") as info:
        guard("trace", st)
    assert info.value.state == "timeout" and info.value.compile_s_at_least == pytest.approx(0.2)
    stage_guard(1.0)("lower", Stages(None, trace_s=0.2, lower_s=0.3))  # under budget: nothing
    import os
    import signal

    with InterruptLatch():
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(Interrupted) as info:
            stage_guard(None)("trace", st)
        assert info.value.signum == signal.SIGTERM


def test_stage_guard_prunes_on_the_cpu_seconds_the_budget_is_in_not_the_wall_load_stretches():
    from autotune.measuring._stages import Stages

    # Lowered on a loaded machine: 0.4 s of wall, 0.05 s of CPU, against a budget of 0.2 s.
    loaded = Stages(None, trace_s=0.3, lower_s=0.1, trace_cpu_s=0.03, lower_cpu_s=0.02)
    stage_guard(0.2)("lower", loaded)  # compiled, measured and checked: it may still win
    slow = Stages(None, trace_s=0.3, lower_s=0.1, trace_cpu_s=0.15, lower_cpu_s=0.1)
    with pytest.raises(TrialFailed, match=r"trace\+lower already took 0.25 s of CPU, over the compile budget") as info:
        stage_guard(0.2)("lower", slow)
    assert info.value.state == "pruned" and info.value.compile_s_at_least == pytest.approx(0.25)
    # After tracing only the trace counts; without CPU figures, the wall seconds do.
    stage_guard(0.2)("trace", Stages(None, trace_s=0.3, lower_s=9.0, trace_cpu_s=0.1, lower_cpu_s=9.0))
    with pytest.raises(TrialFailed, match="pruned after lowering"):
        stage_guard(0.2)("lower", Stages(None, trace_s=0.15, lower_s=0.1))


def test_measure_executable_keeps_donated_inputs_fresh_for_retiming():
    x = jnp.arange(4.0)
    call = at.Call(lambda v: v * 2.0, (x,), jit_kwargs={"donate_argnums": 0})
    m, exe = measure_executable(call, sampling=Sampling.of(FAST), keep_outputs=True)
    assert exe.donating and not x.is_deleted()
    again = exe.retime(Sampling.of(FAST))
    assert again.reps >= 3 and not x.is_deleted() and again.compile_s == m.compile_s
    np.testing.assert_allclose(m.outputs, np.arange(4.0) * 2)


# In a process of its own, capped at 0.75 GiB of data: the in-process runner measures `for`,
# which asks for 1 GiB (scripts/tpu_oom.py at its CPU sizes), then scan×1 in the same process.
IN_PROCESS_OOM = """
import resource, sys
sys.path.insert(0, "scripts")
import tpu_oom
import autotune as at
from autotune.measuring._runner import InProcessRunner, TrialFailed
args = tpu_oom.inputs("cpu")
resource.setrlimit(resource.RLIMIT_DATA, (3 * 2**28, 3 * 2**28))
runner = InProcessRunner(at.Call(tpu_oom.unrolls_grow, args), {"target_s": 0.01, "min_reps": 1, "warmup": 0})
try:
    runner.measure(at.Config({"steps": {"repr": "for"}}))
except TrialFailed as exc:
    print(exc.state, "|", exc.reason)
print("scan", runner.measure(at.Config()).run_s > 0)
"""


@pytest.mark.slow
def test_the_in_process_runner_fails_a_run_out_of_memory_with_the_executables_figure():
    r = python("-c", IN_PROCESS_OOM, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    state, reason = r.stdout.splitlines()[0].split(" | ")
    assert state == "oom" and reason.startswith(
        "ran out of memory while running: the config asks for 1.00 GiB of device memory; the error: RESOURCE_EXHAUSTED"
    ), reason
    assert r.stdout.splitlines()[1] == "scan True"
