"""Recording: the first call per abstract signature writes a pending row, to be tuned later.

With ``AUTOTUNE_RECORD=1`` in the environment (or ``@at.autotuned(record=True)``) the
decorator's traced path, which runs once per abstract signature, calls `record_call`: it
describes the call as JSON (`describe`: the argument tree, shapes, dtypes, weak types, and
static arguments as tagged JSON values), says where the function imports from
(`location_of`), and writes a `PendingRecord` with `Cache.record`. ``AUTOTUNE_RECORD=values``
also keeps the argument values as ``.npy`` files (never pickle) in `Cache.values_dir`, up to
``AUTOTUNE_RECORD_MAX_MB`` (64) per signature. `autotune.record._replay` rebuilds the call.

Recording never breaks or slows the user's program beyond its first call per signature:
every error is swallowed with one warning, and a locked cache skips the row.
The call's JSON form is `autotune.program._abstract`'s.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from autotune._errors import ConfigError, warn_user_once
from autotune.jit._lookup import Lookup
from autotune.jit._target import Target
from autotune.program import _compat, _keys
from autotune.program._abstract import describe, dtype_named
from autotune.select._objective import Objective

ENV_RECORD = "AUTOTUNE_RECORD"
ENV_MAX_MB = "AUTOTUNE_RECORD_MAX_MB"
DEFAULT_MAX_MB = 64.0
_ON, _OFF = ("1", "true", "yes", "on", "shapes"), ("", "0", "false", "no", "off")

_seen: set[tuple] = set()
_lock = threading.Lock()


def mode(record: bool | str | None = False) -> str | None:
    """The recording mode of a decorator: ``"values"``, ``"shapes"`` or None (off).

    ``record=True`` (or ``"shapes"``) records shapes, ``record="values"`` values too; the
    environment (``AUTOTUNE_RECORD=1`` or ``values``), read when the decorator is applied,
    turns recording on for every function. The more complete of the two modes wins.

    Raises:
        ConfigError: ``record`` is not False, True, ``"shapes"`` or ``"values"``.
    """
    if record not in (False, True, None, "shapes", "values"):
        raise ConfigError(f"at.autotuned(record={record!r}): choose False, True (shapes) or 'values'.")
    raw = os.environ.get(ENV_RECORD, "")
    env = raw.strip().lower()
    env_mode = "values" if env == "values" else ("shapes" if env in _ON else None)
    if env not in _ON + _OFF + ("values",):
        warn_user_once(
            ("env", raw),
            f"autotune: {ENV_RECORD}={raw!r} is not 1, values or 0; recording stays off. "
            f"Set {ENV_RECORD}=1 to record the shapes of calls, or {ENV_RECORD}=values to keep their "
            "values too.",
        )
    arg_mode = "values" if record == "values" else ("shapes" if record in (True, "shapes") else None)
    modes = {arg_mode, env_mode}
    return "values" if "values" in modes else ("shapes" if "shapes" in modes else None)


def max_bytes() -> int:
    """The per-signature cap on recorded values: ``AUTOTUNE_RECORD_MAX_MB`` MiB (default 64)."""
    raw = os.environ.get(ENV_MAX_MB)
    if raw is None or not raw.strip():
        return int(DEFAULT_MAX_MB * 2**20)
    try:
        mb = float(raw)
        if not math.isfinite(mb) or mb < 0:
            raise ValueError
    except ValueError:
        warn_user_once(
            ("max", raw),
            f"autotune: {ENV_MAX_MB}={raw!r} is not a number of MiB >= 0; recording "
            f"keeps at most the default {DEFAULT_MAX_MB:g} MiB of values per signature.",
        )
        mb = DEFAULT_MAX_MB
    return int(mb * 2**20)


def location_of(fun: Any) -> tuple[dict[str, Any], str | None]:
    """Where another process imports ``fun`` from: ``{"module", "qualname", "file"}`` (for
    a script's function also ``"main": true``, the module being the script's module name),
    and why it cannot be imported (or None)."""
    module, qualname = getattr(fun, "__module__", None) or "?", getattr(fun, "__qualname__", None) or "?"
    loc: dict[str, Any] = {"module": module, "qualname": qualname}
    file = getattr(sys.modules.get(module), "__file__", None)
    if file:
        loc["file"] = os.path.abspath(file)
    if module == "__main__":
        loc.update(module=_keys.main_module_name(), main=True)
    why = None
    if "<lambda>" in qualname or "<locals>" in qualname:
        why = (
            f"{qualname} is {'a lambda' if '<lambda>' in qualname else 'defined inside another function'}, so "
            "another process cannot import it; define it at module level"
        )
    elif loc["module"] == "__main__" or not file:
        why = "it is defined in an interactive session, not in a file, so another process cannot import it"
    return loc, why


def jit_options(jit_kwargs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in jit_kwargs.items():
        try:
            out[k] = json.loads(json.dumps(list(v) if isinstance(v, tuple) else v, allow_nan=False))
        except (TypeError, ValueError):
            out.setdefault("not_recorded", []).append(k)
    return out


# ------------------------------------------------------------------ values


def npy_bytes(a: np.ndarray) -> bytes:
    """``a`` as ``.npy`` bytes, no pickle; a dtype ``.npy`` cannot name (``bfloat16``...) is
    stored as unsigned integers of its width (the record's dtype views it back)."""
    try:
        native = np.dtype(a.dtype.str) == a.dtype
    except TypeError:
        native = False
    buf = io.BytesIO()
    np.save(buf, a if native else a.view(f"u{a.dtype.itemsize}"), allow_pickle=False)
    return buf.getvalue()


def size_text(n: int) -> str:
    """``512 B``, ``8.0 KiB``, ``64.0 MiB``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _nbytes(leaf: dict[str, Any]) -> int:
    if "key" in leaf:
        return 8 * math.prod(leaf["shape"])  # two uint32 words per threefry key
    return dtype_named(leaf["dtype"]).itemsize * math.prod(leaf["shape"])


def _at(call: tuple, path: tuple) -> Any:
    args, kwargs = call
    obj = args[path[0]] if isinstance(path[0], int) else kwargs[path[0]]
    for step in path[1:]:
        obj = obj[step]
    return obj


def host_copies(leaves: list[tuple], call: tuple | None, cap: int) -> tuple[list[np.ndarray], str | None]:
    """Copies (on the host, in the recorded dtypes) of the call's array leaves, or no copies
    and a note saying why the values are not kept."""
    if call is None:
        return [], "recorded while lowering or tracing, not at a call, so no values were at hand: shapes only"
    total = sum(_nbytes(leaf) for _, leaf in leaves)
    if total > cap:
        return [], f"the arguments hold {size_text(total)}, over the {size_text(cap)} cap ({ENV_MAX_MB}): shapes only"
    arrays = []
    for path, leaf in leaves:
        x = _at(call, path)
        if _compat.is_tracer(x):
            return (
                [],
                "the call ran under a transformation (vmap, grad...), so its values were not concrete: shapes only",
            )
        a = np.array(jax.random.key_data(x) if "key" in leaf else x)  # a copy: the call may donate x
        if "key" not in leaf and a.dtype != dtype_named(leaf["dtype"]):
            a = a.astype(dtype_named(leaf["dtype"]))  # a Python or NumPy float64 that jit made float32
        if list(a.shape) != leaf["shape"]:
            return [], (
                "the call's values do not have the traced shapes (another thread's call interleaved), so "
                "they were not kept: shapes only"
            )
        arrays.append(a)
    return arrays, None


def write_values(cache: Any, arrays: list[np.ndarray], note: str | None, stem: str) -> dict[str, Any]:
    """Write ``arrays`` as ``stem-<i>.npy`` in ``cache.values_dir``; the record's ``values``."""
    from autotune._paths import write_private

    files, size = [], 0
    for i, a in enumerate(arrays):
        blob = npy_bytes(a)
        write_private(os.path.join(cache.values_dir, f"{stem}-{i}.npy"), blob)
        files.append(f"{stem}-{i}.npy")
        size += len(blob)
    return {"files": files, "bytes": size, "note": note}


# ------------------------------------------------------------------ the decorator's hook


@dataclass(frozen=True, eq=False)
class Recording:
    """What one traced call brings to be recorded: the call as traced, its concrete values where
    the decorator had them (``values`` mode, at a call; None inside ``.lower()`` or a
    transformation), the config's lookup, and the objective the program runs under."""

    call: tuple[tuple, dict]
    values: tuple[tuple, dict] | None
    lookup: Lookup
    objective: Objective


def record_call(target: Target, mode: str, cache: Callable[[], Any], rec: Recording) -> bool:
    """Record a call of ``target`` for tuning later, in ``cache()`` (the `Cache` it opens), in
    ``mode`` (`mode`'s ``"shapes"`` or ``"values"``); the decorator's traced path calls this once
    per signature. The call is described here; the row (and value files) are written by a
    background thread, so the first call pays microseconds, not a database commit. Never
    raises: any error is one warning; a locked cache skips the row.

    Returns:
        Whether a write was queued (`flush` waits for it).
    """
    lookup = rec.lookup
    if lookup.error is not None:  # the cache could not be read: its one warning is enough
        return False
    token = (target.key, lookup.fingerprint, lookup.signature, lookup.device_key)
    with _lock:
        if token in _seen:
            return False
        _seen.add(token)
    try:
        job = _prepare(target, mode == "values", cache(), rec, token)
    except Exception as exc:
        _failed(target.key, exc)
        return False
    if job is not None:
        _submit(job)
    return job is not None


def _failed(key: str, exc: BaseException) -> None:
    warn_user_once(
        ("record-error", key, type(exc).__name__),
        f"autotune: could not record {key} for tuning later ({type(exc).__name__}: {exc}); the program "
        "runs on unchanged, but `autotune tune --recorded` will not see this signature.",
    )


def _prepare(target: Target, values_mode: bool, cache: Any, rec: Recording, token: tuple):
    """Describe the call now (values copied now: the call may donate them); return the write."""
    from autotune.cache import PendingRecord

    abstract, why_not, leaves = describe(target.fun, *rec.call)
    location, loc_why = location_of(target.fun)
    arrays, note = [], None
    if values_mode:
        if any(r.key == token for r in cache.pending(target.key)):
            return None  # recorded before: do not copy or write its values again
        arrays, note = host_copies(leaves, rec.values, max_bytes())
    info = _keys.device_info()  # keyed as the entry it becomes: under the objective's memory budget
    fields = dict(
        function_key=target.key,
        fingerprint=rec.lookup.fingerprint,
        signature=rec.lookup.signature,
        device=_keys.under_budget(info, rec.objective.on_device(info.get("bytes_limit")).budget_bytes),
        location=location,
        abstract=abstract,
        # Where the program runs is where its processes and compilation cache are known.
        objective=rec.objective.to_dict(),
        options=jit_options(target.jit_options()),
        replayable=(loc_why or why_not) is None,
        why_not=loc_why or why_not,
    )

    def write() -> None:
        values = None
        if values_mode:
            values = write_values(cache, arrays, note, _keys.short_hash(repr(token) + os.urandom(8).hex(), 16))
        rec = PendingRecord(**fields, values=values)
        try:
            stored = cache.record(rec)
        except BaseException:
            _unlink_values(cache, rec)
            raise
        if not stored:  # recorded before, or the cache was locked: no orphan files
            _unlink_values(cache, rec)

    write.key = target.key
    return write


def _unlink_values(cache: Any, rec: Any) -> None:
    for name in rec.value_files:
        try:
            os.unlink(os.path.join(cache.values_dir, name))
        except OSError:
            pass


# ------------------------------------------------------------------ the background writer

_queue: list = []
_writer: threading.Thread | None = None
_idle = threading.Condition(_lock)


def _submit(job) -> None:
    global _writer
    with _lock:
        _queue.append(job)
        if _writer is None:
            # Not a daemon: the interpreter waits for the last rows before it exits.
            _writer = threading.Thread(target=_drain, name="autotune-record", daemon=False)
            _writer.start()


def _drain() -> None:
    global _writer
    while True:
        with _lock:
            if not _queue:
                _writer = None
                _idle.notify_all()
                return
            job = _queue.pop(0)
        try:
            job()
        except Exception as exc:
            _failed(job.key, exc)


def flush(timeout: float | None = 30.0) -> bool:
    """Wait until every queued recording is written; False if ``timeout`` seconds passed first."""
    with _lock:
        return _idle.wait_for(lambda: _writer is None, timeout)


def _after_fork() -> None:  # a forked child has the queue but not the thread
    global _writer, _lock, _idle
    _lock = threading.Lock()
    _idle = threading.Condition(_lock)
    _queue.clear()
    _writer = None


os.register_at_fork(after_in_child=_after_fork)
