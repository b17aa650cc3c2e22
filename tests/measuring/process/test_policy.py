"""GPU honesty: the compile policy comes from the platform and reaches the worker's environment."""

import jax.numpy as jnp
import pytest

import autotune as at
from autotune.measuring.process._policy import CARRY_OVER_FLAGS, CompilePolicy, compile_policy, jax_env, platform
from autotune.measuring.process._worker_runner import WorkerRunner


def test_cpu_needs_nothing():
    p = compile_policy("cpu", {"XLA_FLAGS": "--xla_gpu_per_fusion_autotune_cache_dir=/tmp/x"})
    assert p == CompilePolicy("cpu") and not p.fresh_worker_per_trial and p.env == {} and p.reason is None
    assert compile_policy(platform()).platform == "cpu"  # the suite runs on CPU


def test_gpu_gets_a_fresh_worker_per_trial_and_no_carried_over_autotuning():
    flags = (
        "--xla_gpu_autotune_level=4 --xla_gpu_per_fusion_autotune_cache_dir=/tmp/at "
        "--xla_gpu_load_autotune_results_from /tmp/r.pb --xla_dump_to=/tmp/d"
    )
    for name in ("gpu", "cuda", "rocm"):
        p = compile_policy(name, {"XLA_FLAGS": flags})
        assert p.fresh_worker_per_trial and "process memory" in p.reason
        # the autotune level stays (changing it changes the kernels, so the runtime); carried-over results go
        assert p.env["XLA_FLAGS"] == "--xla_gpu_autotune_level=4 --xla_dump_to=/tmp/d"
        assert p.removed_flags == (
            "--xla_gpu_per_fusion_autotune_cache_dir=/tmp/at",
            "--xla_gpu_load_autotune_results_from /tmp/r.pb",
        )
    assert compile_policy("gpu", {}).env == {"XLA_FLAGS": ""}
    assert "--xla_gpu_per_fusion_autotune_cache_dir" in CARRY_OVER_FLAGS


def test_the_jax_settings_the_worker_inherits():
    env = jax_env()
    assert env["JAX_ENABLE_X64"] in ("0", "1") and env.get("JAX_PLATFORMS") == "cpu"


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_fresh_worker_policy_replaces_the_worker_before_every_compile_and_carries_its_flags():
    """What GPU does, forced on CPU: each trial that compiles gets a new process, whose XLA_FLAGS
    are the policy's (the worker reports its own environment)."""
    f = lambda x: at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="l")[0]  # noqa: E731
    policy = CompilePolicy("cpu", fresh_worker_per_trial=True, env={"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"})
    with WorkerRunner(at.Call(f, (jnp.ones(3),)), {"target_s": 0.01, "warmup": 1}, policy=policy) as runner:
        runner.measure({})
        first = runner.pid
        assert runner.worker_info["xla_flags"] == "--xla_cpu_enable_fast_math=false"
        assert runner.retime({}) is not None  # the worker that compiled it is still there to re-time
        runner.measure({"l": {"repr": "for"}})
        assert runner.pid != first and runner.restarts == 1
        assert runner.retime({}) is None  # that executable went with the replaced worker
        assert runner.retime({"l": {"repr": "for"}}) is not None
