"""measuring/_oom: which errors mean out of memory and the one line a failed trial says, on
messages produced for real (XLA on the CPU under ``RLIMIT_DATA``, in a subprocess) and on the
text a TPU v5e gives for a compile over its HBM (no TPU here: the text as XLA writes it)."""

from __future__ import annotations

import textwrap

from _repo import python

from autotune.measuring._oom import default_out_of_memory, device_bytes, oom_reason, out_of_memory

TPU = (
    "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. "
    "Used 17.52G of 15.75G hbm. Exceeded hbm capacity by 1.77G."
)
# The same chip's words in jax 0.10.2 for a compile whose temporaries alone are over its HBM (seen on a
# v5e: scripts/tpu_oom.py --remat, a checkpointed training step saving everything).
TPU_TEMPORARIES = (
    "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries (33.28G) "
    "exceeds available HBM (15.75G)."
)
# The worker's last words when its threads cannot get their stacks under RLIMIT_DATA (seen at 0.3 GiB).
NO_STACK = "LLVM ERROR: pthread_create failed: Resource temporarily unavailable"

# 512 MiB asked of a process capped at 384 MiB of data: XLA's CPU client refuses the buffer.
CAPPED = textwrap.dedent("""
    import resource
    import jax, jax.numpy as jnp
    jnp.ones(4).block_until_ready()
    resource.setrlimit(resource.RLIMIT_DATA, (384 * 2**20, 384 * 2**20))
    try:
        jax.jit(lambda x: jnp.broadcast_to(x, (2**13, 2**14)) + 1.0)(jnp.ones(2**14)).block_until_ready()
    except Exception as exc:
        print(str(exc).splitlines()[0])
""")


def test_the_tpu_compile_over_hbm_names_what_was_asked_and_what_there_is():
    found = out_of_memory(TPU)
    assert (found.asked_bytes, found.capacity_bytes, found.space) == (int(17.52 * 2**30), int(15.75 * 2**30), "hbm")
    line = oom_reason("compile", found)
    assert line.startswith(
        "ran out of memory while compiling: the config asks for 17.52 GiB of device memory (hbm), "
        "the device has 15.75 GiB; the error: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error."
    ), line


def test_the_tpu_compile_whose_temporaries_are_over_hbm_names_both_sizes():
    found = out_of_memory(TPU_TEMPORARIES)
    assert (found.asked_bytes, found.capacity_bytes, found.space) == (int(33.28 * 2**30), int(15.75 * 2**30), "hbm")
    assert oom_reason("compile", found).startswith(
        "ran out of memory while compiling: the config asks for 33.28 GiB of device memory (hbm), the device has "
        "15.75 GiB; the error: RESOURCE_EXHAUSTED: Ran out of memory on HBM"
    )


def test_a_real_cpu_allocation_over_the_cap_is_read_with_its_bytes():
    r = python("-c", CAPPED)
    said = r.stdout.strip()
    assert r.returncode == 0 and "RESOURCE_EXHAUSTED" in said, (r.stdout, r.stderr[-2000:])
    found = out_of_memory(said)
    assert found is not None and found.asked_bytes == 2**13 * 2**14 * 4, said
    line = oom_reason("run", found, 0.375, in_use_bytes=2**28)
    assert line.startswith(
        "ran out of memory while running: the config asks for 0.50 GiB of device memory, the worker's limit "
        "is 0.38 GiB (trial_memory_gb; 0.25 GiB of it in use by the worker itself); the error: RESOURCE_EXHAUSTED"
    ), line


def test_the_executables_own_figure_wins_over_the_messages():
    found = out_of_memory("RESOURCE_EXHAUSTED: Out of memory allocating 1024 bytes.")
    asked = device_bytes({"argument": 2**30, "output": 2**29, "temp": 2**29, "generated_code": 7})
    assert asked == 2**31 and device_bytes({"temp": 1}) is None
    assert "asks for 2.00 GiB" in oom_reason("run", found, 1.0, asked_bytes=asked)


def test_other_words_for_running_out_and_other_errors():
    assert out_of_memory(NO_STACK) is not None
    assert out_of_memory("terminate called after throwing an instance of 'std::bad_alloc'") is not None
    assert out_of_memory("anything at all", memory_error=True) is not None
    for text in ("INVALID_ARGUMENT: shapes (3,) and (4,) differ", "ValueError: the loop could not be re-traced"):
        assert out_of_memory(text) is None
    assert oom_reason("compile", None) == "ran out of memory while compiling: no size was reported"


def test_the_line_is_one_line_however_xla_breaks_its_message():
    line = oom_reason("compile", out_of_memory(TPU.replace(". ", ".\n  ") + "\n" + "x" * 5000), 2.0)
    assert "\n" not in line and len(line) < 600


def test_a_default_out_of_memory_names_trial_memory_gb_or_the_device():
    capped = default_out_of_memory("ran out of memory while running: ...", 0.75)
    assert "trial_memory_gb above 0.75" in capped and "--trial-memory" in capped and "\n" not in capped
    assert "does not fit the device" in default_out_of_memory("ran out of memory while compiling: ...", None)
