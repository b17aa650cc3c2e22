"""The load time of a cached executable, measured for real: what a later process pays for a
config when JAX's persistent compilation cache is on (:class:`autotune.Objective`'s ``R``).

:func:`measure_load` traces and lowers the config here and exports the program (``jax.export``,
as export mode does), then compiles it in a fresh process with the persistent cache on in a
temporary directory (the entry is written), and again in a second fresh process on the same
directory: that compile is the load, timed in CPU seconds. ``jax.monitoring``'s cache events say
whether the second process really hit the cache; if it missed, the load is not a load and the
result says so (the caller then charges the compile). Only the parent imports this module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune._errors import error_text
from autotune.measuring._runner import InProcessRunner, TrialFailed
from autotune.measuring._sampling import Sampling
from autotune.measuring.process._channel import worker_env
from autotune.measuring.process._export import CannotExport, export, trace_and_lower
from autotune.measuring.process._policy import jax_env
from autotune.measuring.process._worker_runner import WorkerRunner
from autotune.program._call import Call
from autotune.program._config import Config

LOAD_TIMEOUT_S = 600.0
"""Seconds one of the two processes may take (it imports JAX and compiles the program once)."""


@dataclass(frozen=True)
class Load:
    """A load measurement of one config.

    Attributes:
        load_s: CPU seconds of the compile call that loaded the executable from the cache in a
            fresh process (key, read, deserialise; trace and lower not included), or None.
        compile_cpu_s: CPU seconds of the compile in the first process, which wrote the entry (a real
            compile of the same program, for comparison), or None.
        note: why ``load_s`` is None (not measured, or the cache missed), else None.
    """

    load_s: float | None
    compile_cpu_s: float | None = None
    note: str | None = None


def _run(python: str, request: str, cache: str, timeout_s: float) -> dict[str, Any]:
    done = subprocess.run(
        [python, "-m", "autotune.worker._load_child", request, cache],
        env=worker_env(jax_env()),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the load process exited with {done.returncode}: {tail[:300]}")
    return json.loads(lines[-1])


def measure_load(
    call: Call,
    config: Config,
    *,
    python: str | None = None,
    timeout_s: float = LOAD_TIMEOUT_S,
) -> Load:
    """Compile ``call``'s program under ``config`` into a temporary persistent cache in one fresh process and
    load it in a second; never raises for a program it cannot measure (the :class:`Load` says why).

    Example::

        >>> import jax.numpy as jnp, autotune as at
        >>> f = lambda x: at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=8, name="l")[0]
        >>> measure_load(at.Call(f, (jnp.ones(3),)), Config({"l": {"repr": "for"}})).load_s > 0  # doctest: +SKIP
        True
    """
    from autotune.measuring import _host

    target = _host.target_device()["platform"] if _host.pinned() else None
    platform = None if target in (None, "cpu") else target  # a trace-only parent lowers for its device
    try:
        stages = trace_and_lower(call, config, lambda *_: None, platform=platform)
        ex = export(stages, call, Sampling(), platform=platform)  # the load alone is timed: no runtime
    except (CannotExport, TrialFailed) as exc:
        return Load(None, note=f"load not measured: {exc}")
    if getattr(ex.exported, "nr_devices", 1) != 1:
        return Load(None, note="load not measured: the program spans several devices")
    request = {
        "program": ex.request["program"],
        "avals": [[list(a.shape), str(a.dtype), bool(getattr(a, "weak_type", False))] for a in ex.exported.in_avals],
        "donate": ex.request["donate"],
        "compiler_options": ex.request["compiler_options"],
    }
    python = python or sys.executable
    with tempfile.TemporaryDirectory(prefix="autotune-load-") as tmp:
        path, cache = os.path.join(tmp, "request.json"), os.path.join(tmp, "cache")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(request, f)
        try:
            first = _run(python, path, cache, timeout_s)
            second = _run(python, path, cache, timeout_s)
        except (OSError, RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
            return Load(None, note=f"load not measured: {error_text(exc)}")
    if second["hits"] < 1 or second["misses"]:
        return Load(
            None,
            first["compile_cpu_s"],
            note="the second process missed the persistent cache (the executable was not cached or not "
            "loadable), so a later process compiles again",
        )
    return Load(second["compile_cpu_s"], first["compile_cpu_s"])


def loader(runner: Any, call: Call) -> Callable[[Config], Load] | None:
    """How a study measures loads with ``runner``: the runner's own ``measure_load(config)`` when
    it has one (e.g. a remote runner), else for a runner that measures on this machine (a worker
    or in-process) :func:`measure_load` on the function; None for a runner of another kind."""
    own = getattr(runner, "measure_load", None)
    if own is not None:
        return own
    if isinstance(runner, (WorkerRunner, InProcessRunner)):
        return lambda config: measure_load(call, config)
    return None
