"""What the worker process must do so that compile times stay comparable across trials.

On CPU, XLA keeps nothing between compiles that a later trial could reuse once JAX's
caches are cleared and the persistent compilation cache is off: a warm worker is honest.

On GPU, XLA's GEMM/fusion autotuner keeps its results in a process-global in-memory cache
(``AutotunerUtil``'s cache, keyed by device and the fusion's HLO). Configs of one program
share their loop bodies' fusions, so in a warm worker every trial after the first skips
autotuning and under-reports its compile time. jaxlib 0.10-0.12 offers no way to clear
that cache from Python (``AutotunerUtil::ClearAutotuneResults`` is not bound), and
``--xla_gpu_autotune_level=0`` would change the kernels and so the runtime. The honest
option is a fresh worker process for every trial that compiles; the flags that would load
earlier autotuning results from disk are removed from the worker's ``XLA_FLAGS`` as well.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

# XLA flags that read autotuning (or kernel) results saved by an earlier process.
CARRY_OVER_FLAGS = (
    "--xla_gpu_per_fusion_autotune_cache_dir",
    "--xla_gpu_load_autotune_results_from",
    "--xla_gpu_experimental_autotuner_cache_dir",
    "--xla_gpu_kernel_cache_file",
)

_GPU_PLATFORMS = ("gpu", "cuda", "rocm")


@dataclass(frozen=True)
class CompilePolicy:
    """How the worker keeps compile timings honest on one platform.

    Attributes:
        platform: ``jax.devices()[0].platform`` of the tuning process.
        fresh_worker_per_trial: start a new worker for every trial that compiles (GPU).
        env: environment variables the worker gets (``XLA_FLAGS`` without the carry-over flags).
        removed_flags: the flags removed from ``XLA_FLAGS``.
        reason: why, in one sentence, or None when nothing is needed.
    """

    platform: str
    fresh_worker_per_trial: bool = False
    env: dict[str, str] = field(default_factory=dict)
    removed_flags: tuple[str, ...] = ()
    reason: str | None = None


def _strip(flags: str) -> tuple[str, tuple[str, ...]]:
    kept, removed = [], []
    words = shlex.split(flags)
    skip_next = False
    for i, word in enumerate(words):
        if skip_next:
            skip_next = False
            continue
        name = word.split("=", 1)[0]
        if name in CARRY_OVER_FLAGS:
            removed.append(word if "=" in word or i + 1 >= len(words) else f"{word} {words[i + 1]}")
            skip_next = "=" not in word and i + 1 < len(words) and not words[i + 1].startswith("--")
            continue
        kept.append(word)
    return " ".join(shlex.quote(w) for w in kept), tuple(removed)


def compile_policy(platform: str, environ: dict[str, str] | None = None) -> CompilePolicy:
    """The policy for ``platform`` given the tuning process's environment.

    Example::

        >>> compile_policy("cpu").fresh_worker_per_trial
        False
        >>> p = compile_policy("gpu", {"XLA_FLAGS": "--xla_gpu_per_fusion_autotune_cache_dir=/tmp/c"})
        >>> p.fresh_worker_per_trial, p.env["XLA_FLAGS"], p.removed_flags
        (True, '', ('--xla_gpu_per_fusion_autotune_cache_dir=/tmp/c',))
    """
    environ = dict(os.environ if environ is None else environ)
    if platform not in _GPU_PLATFORMS:
        return CompilePolicy(platform)
    flags, removed = _strip(environ.get("XLA_FLAGS", ""))
    return CompilePolicy(
        platform,
        fresh_worker_per_trial=True,
        env={"XLA_FLAGS": flags},
        removed_flags=removed,
        reason=(
            "XLA's GPU autotuner keeps its results in process memory, so every trial compiles in a fresh "
            "worker process" + (f" (and without {', '.join(removed)})" if removed else "")
        ),
    )


def jax_env() -> dict[str, str]:
    """The tuning process's JAX settings that decide what the worker computes: x64, the
    platforms and the host device count set with ``jax.config`` (``XLA_FLAGS``, e.g.
    ``--xla_force_host_platform_device_count``, is inherited with the environment), so the
    worker sees the devices a sharded call runs on."""
    import jax

    from autotune.measuring import _host

    env = {"JAX_ENABLE_X64": "1" if jax.config.jax_enable_x64 else "0"}
    platforms = getattr(jax.config, "jax_platforms", None)
    if _host.pinned():  # this process traces on the CPU; the worker gets what the user asked for
        platforms = _host.worker_platforms()
    if platforms:
        env["JAX_PLATFORMS"] = str(platforms)
    cpu_devices = getattr(jax.config, "jax_num_cpu_devices", -1)
    if isinstance(cpu_devices, int) and cpu_devices >= 0:
        env["JAX_NUM_CPU_DEVICES"] = str(cpu_devices)
    return env


def platform() -> str | None:
    """The platform trials run on (``"cpu"``, ``"gpu"``, ``"tpu"``): this process's default, or,
    in a process pinned to trace only (``autotune.measuring._host``), the one its worker reported (None
    before any worker did: asking JAX here would open the devices the worker needs)."""
    from autotune.measuring import _host

    if _host.pinned():
        device = _host.learned()
        return device["platform"] if device else None
    import jax

    return jax.devices()[0].platform
