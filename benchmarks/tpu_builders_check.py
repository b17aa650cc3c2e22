"""On a TPU host: can a builder process compile deviceless while this process holds the chip?

    python -m benchmarks.tpu_builders_check            # (source scripts/tpu_env.sh first where wheels live there)
    python -m benchmarks.tpu_builders_check --cpu      # the same steps on a CPU-only machine

This process opens the TPU and keeps it (as the tuning worker does); a builder process
(``python -m autotune.worker._build_child``, ``JAX_PLATFORMS=cpu``, ``ALLOW_MULTIPLE_LIBTPU_LOAD=1``)
compiles a small scan against the compile-only topology of this chip and hands back the
serialised executable, which this process loads and runs. It prints the timings and checks the
outputs are bit-identical to ``jax.jit``'s; any failure is one line on stderr and exit status 1.
It takes well under a minute (two JAX imports, one libtpu load, two small compiles).
"""

from __future__ import annotations

import base64
import sys
import time


def fail(why: str) -> int:
    print(f"tpu_builders_check: FAILED: {why}", file=sys.stderr)
    return 1


def program(x):
    import jax
    import jax.numpy as jnp

    def body(c, t):
        return jnp.tanh(c @ c.T * 0.01 + t) * 0.5 + c, None

    return jax.lax.scan(body, x, jnp.arange(16, dtype=x.dtype))[0]


def run_time(call, args, n: int = 50) -> float:
    """Median seconds per call over ``n`` blocked calls, after two warm-up calls."""
    import statistics

    import jax

    for _ in range(2):
        jax.block_until_ready(call(*args))
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        jax.block_until_ready(call(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    t_start = time.perf_counter()
    import jax
    import jax.numpy as jnp
    import numpy as np

    from autotune.measuring.process._builders import BuilderPool
    from autotune.measuring.process._channel import worker_env
    from autotune.program._keys import device_info
    from autotune.worker._child import load_executable

    device = device_info()
    print(f"holder: this process holds {device['device_count']} x {device['device_kind']!r}, jax {jax.__version__}")
    cpu = "--cpu" in sys.argv  # the same steps on the CPU (a builder compiling for it), to try the script anywhere
    if device["platform"] != "tpu" and not cpu:
        return fail(f"this process sees {device['platform']!r}, not a TPU; run it on the TPU host")
    x = jax.device_put(jnp.linspace(0.0, 1.0, 128 * 128, dtype=jnp.float32).reshape(128, 128), jax.devices()[0])
    expected = jax.jit(program)(x)  # the chip is now held by this process
    exported = jax.export.export(jax.jit(program), platforms=(device["platform"],))(x)
    request = {"program": base64.b64encode(exported.serialize()).decode("ascii"), "donate": []}
    pool = BuilderPool(1, device, python=sys.executable, env=worker_env({}), startup_timeout=90, trial_timeout=90)
    try:
        t0 = time.perf_counter()
        build = pool.submit("check", request)
        try:
            built = pool.wait(build)
        except Exception as exc:  # noqa: BLE001 - reported as the check's one line
            return fail(f"the build failed: {exc}")
        waited = time.perf_counter() - t0
        if built is None:
            return fail(f"no build: {pool.unavailable or build.error}")
        print(
            f"builder: ready in {pool.startup_s:.2f} s, deviceless={pool.deviceless}; "
            f"compile {built['compile_s']:.3f} s wall, {built['compile_cpu_s']:.3f} s CPU; "
            f"{waited:.2f} s from submit (probe and start-up included); "
            f"{len(built['payload']) * 3 // 4 / 1e6:.2f} MB"
        )
        if not built.get("deviceless") and not cpu:
            return fail("the builder did not compile deviceless for the TPU")
    finally:
        pool.close()
    t0 = time.perf_counter()
    try:
        loaded = load_executable(built["payload"], built["n_in"], built["n_out"], [x])
    except Exception as exc:  # noqa: BLE001
        return fail(f"this process could not load the builder's executable: {type(exc).__name__}: {exc}")
    load_s = time.perf_counter() - t0
    got = loaded(x)[0]
    same = np.array_equal(np.asarray(got), np.asarray(expected))
    jitted = jax.jit(program).lower(x).compile()
    t_loaded, t_jit = run_time(lambda v: loaded(v)[0], (x,)), run_time(jitted, (x,))
    print(f"holder: loaded in {load_s * 1e3:.1f} ms; outputs bit-identical to jax.jit: {same}")
    print(f"runtime: loaded {t_loaded * 1e6:.1f} us, jax.jit {t_jit * 1e6:.1f} us per call (median, blocked)")
    if not same:
        diff = float(np.max(np.abs(np.asarray(got) - np.asarray(expected))))
        return fail(f"the loaded executable's outputs differ from jax.jit's (max abs diff {diff:.3g})")
    print(f"tpu_builders_check: OK in {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
