"""Who owns the accelerator: a tuning parent that traces and lowers, and one worker that runs.

libtpu lets one process at a time open a TPU chip; a second one fails ("The TPU is already in
use", "multi-process lockfile") instead of falling back to the CPU. A tuning command therefore
pins itself to JAX's CPU backend (:func:`pin`) before anything opens a device: it traces and
lowers there, for the platform its worker reports (``jax.export`` and ``lower`` take a target
platform), and the worker process, started with the platforms the user asked for, owns the
chip for the whole study. The parent learns the device from the worker's first message
(:func:`learn`); a command that needs it before any worker runs asks a short-lived probe
process (:func:`target_device`).

A process whose JAX already opened its devices (a notebook that ran a computation) cannot pin;
:func:`holds_devices` says so, and the runner then measures in that process.

The pin is process state on purpose: it must hold for every trace the process does, and it is
only ever set by a command's entry point, never by a library call.

Example::

    >>> from autotune.measuring import _host
    >>> _host.pinned()
    False
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

# Set by pin(): the JAX_PLATFORMS value a worker gets ("" for unset), i.e. what the user asked for.
_worker_platforms: str | None = None
_learned: dict[str, Any] | None = None  # the target device, as a worker reported it
# How a second process is refused a device that one process owns, as libtpu words it.
BUSY_WORDS = ("already in use", "multi-process lockfile", "device or resource busy")


def pin() -> bool:
    """Make this process trace and lower only: JAX here sees the CPU, workers get the devices.

    Returns False (and changes nothing) when JAX already opened its backends in this process,
    or when ``JAX_PLATFORMS`` names the CPU alone (there is nothing to leave to a worker).
    """
    global _worker_platforms
    if _worker_platforms is not None:
        return True
    from autotune.program import _compat

    if _compat.backends_started():
        return False
    import jax

    asked = os.environ.get("JAX_PLATFORMS") or str(getattr(jax.config, "jax_platforms", None) or "")
    if asked.strip().lower() == "cpu":
        return False
    jax.config.update("jax_platforms", "cpu")
    _worker_platforms = asked
    return True


def pinned() -> bool:
    """Whether :func:`pin` made this process a trace-only parent."""
    return _worker_platforms is not None


def worker_platforms() -> str | None:
    """The ``JAX_PLATFORMS`` a worker process gets when this process is pinned ("" for unset),
    None when it is not pinned (the worker then inherits this process's setting)."""
    return _worker_platforms


def learn(device: dict[str, Any]) -> None:
    """Record the target device as a worker reported it (platform, kind, count, versions)."""
    global _learned
    if pinned() and device.get("platform"):
        _learned = dict(device)


def learned() -> dict[str, Any] | None:
    """The target device a worker reported, or None before any did (or when not pinned)."""
    return dict(_learned) if _learned is not None else None


def busy(text: str) -> bool:
    """Whether an error text says the device is held by another process."""
    low = text.lower()
    return any(w in low for w in BUSY_WORDS)


def holds_devices() -> bool:
    """Whether this process opened JAX's devices with more than the CPU allowed (then a worker
    cannot have a device that admits one process, such as a TPU chip)."""
    from autotune.program import _compat

    if pinned() or not _compat.backends_started():
        return False
    import jax

    return str(getattr(jax.config, "jax_platforms", None) or "").strip().lower() != "cpu"


def target_device(timeout_s: float = 300.0) -> dict[str, Any]:
    """The device trials run on: this process's own, or, when pinned, the one a worker reported
    (a probe process asks when no worker has yet; it exits before the caller starts its own)."""
    from autotune.program import _keys

    if not pinned():
        return _keys.device_info()
    if _learned is None:
        learn(_probe(timeout_s))
    return dict(_learned)


def _probe(timeout_s: float) -> dict[str, Any]:
    from autotune._errors import StudyError

    root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    )  # above autotune/: the worker imports it
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]),
    )
    if _worker_platforms:
        env["JAX_PLATFORMS"] = _worker_platforms
    else:
        env.pop("JAX_PLATFORMS", None)
    done = subprocess.run(
        [sys.executable, "-m", "autotune.worker", "--device"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode != 0:
        tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise StudyError(f"Could not ask a worker process which device it runs on: {tail[0][:300]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
