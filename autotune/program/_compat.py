"""The small surface of JAX internals autotune relies on, in one place.

Jaxpr objects changed shape between JAX versions (0.10 has ``ClosedJaxpr``
wrapping an open ``Jaxpr``; 0.12 attaches consts to ``Jaxpr`` itself), and scan
parameters were renamed. Everything here works on both by duck typing. The equation
parameters autotune writes are a scan's ``unroll`` and, while a function is traced again, a
checkpointed call's ``policy``; while loops are re-emitted through the public
``lax.while_loop``, reading only their const counts. No other module imports ``jax._src``,
``jax.extend`` or ``jax.core``, but this layer's three parts re-exported here:
``_compat_axes.py`` (the axis names ``shard_map`` and ``pmap`` bind), ``_compat_source.py``
(where an equation came from: scopes, frames, installed files) and ``_compat_remat.py``
(checkpointed calls: their policies, and the trace-time policy override).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Any

import jax
import jax.extend.core as jex_core
import jax.extend.source_info_util as jex_siu

from autotune._errors import TraceError
from autotune.program._compat_axes import axis_context, with_manual_axes  # noqa: F401 (axis_context: for _rewrite)
from autotune.program._compat_remat import (  # noqa: F401 (re-exported for _sites and _rewrite)
    CUSTOM,
    checkpoint_key,
    eqn_policy,
    is_checkpoint,
    is_jit,
    policy_override,
)
from autotune.program._compat_source import (  # noqa: F401 (re-exported for _sites)
    Frame,
    frames,
    installed_path,
    library_frame,
    name_scopes,
    outermost_frame,
    user_frame,
)

_JAXPR_TYPES = tuple({jex_core.Jaxpr, jex_core.ClosedJaxpr})
# JAX <= 0.11 wraps open jaxprs in ClosedJaxpr; later versions merged the two.
_CLOSED_TYPE = jex_core.ClosedJaxpr if jex_core.ClosedJaxpr is not jex_core.Jaxpr else None

# --- jaxprs -----------------------------------------------------------------------------


def is_jaxpr(value: Any) -> bool:
    return isinstance(value, _JAXPR_TYPES)


def unpack(jx: Any) -> tuple[Any, list[Any]]:
    """(open jaxpr with .constvars/.invars/.eqns/.outvars, const values)."""
    return getattr(jx, "jaxpr", jx), list(getattr(jx, "consts", ()))


def sub_jaxprs(params: dict[str, Any]) -> Iterator[tuple[tuple, Any]]:
    """Yield (address, jaxpr) for every jaxpr held in an equation's params.

    The address is ``(param_name,)`` or ``(param_name, index)`` for tuples
    (``cond`` branches); it is used to address nested sites, never to read the
    param's meaning.
    """
    for name in sorted(params):
        value = params[name]
        if is_jaxpr(value):
            yield (name,), value
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                if is_jaxpr(item):
                    yield (name, i), item


def replace_sub_jaxprs(params: dict[str, Any], new: dict[tuple, Any]) -> dict[str, Any]:
    out = dict(params)
    for addr, jx in new.items():
        if len(addr) == 1:
            out[addr[0]] = jx
        else:
            name, i = addr
            seq = list(out[name])
            seq[i] = jx
            out[name] = type(params[name])(seq)
    return out


def while_jaxprs(eqn: Any) -> tuple[tuple[tuple, Any], tuple[tuple, Any]]:
    """((address, cond jaxpr), (address, body jaxpr)) of a ``while`` equation."""
    return (("cond_jaxpr",), eqn.params["cond_jaxpr"]), (("body_jaxpr",), eqn.params["body_jaxpr"])


def while_const_counts(eqn: Any) -> tuple[int, int]:
    """How many leading operands of a ``while`` equation are cond consts, then body consts."""
    return int(eqn.params["cond_nconsts"]), int(eqn.params["body_nconsts"])


def has_effects(jx: Any) -> bool:
    """Whether a jaxpr has side effects (callbacks, prints, ...) that must not run twice.

    A collective over a named axis (``psum`` in a ``shard_map`` or ``pmap`` body) marks its
    jaxpr with the axis name as an effect; running it on a discarded step is harmless."""
    effs = getattr(unpack(jx)[0], "effects", ()) or ()
    return any(type(e).__name__ != "NamedAxisEffect" for e in effs)


def traced_for(jx: Any) -> str:
    """What JAX traced this jaxpr for: ``"scan"``, ``"fori_loop"``, ``"while_loop"``..."""
    return str(getattr(getattr(unpack(jx)[0], "debug_info", None), "traced_for", "") or "")


_FUNC_SRC_RE = re.compile(r"^(?P<name>.*?)(?: at (?P<file>.+):(?P<line>\d+))?$")


def traced_function(jx: Any) -> tuple[str, str | None, int | None]:
    """(name, file, line) of the Python function a jaxpr was traced from, as far as known."""
    text = getattr(getattr(unpack(jx)[0], "debug_info", None), "func_src_info", "") or ""
    m = _FUNC_SRC_RE.match(text)
    if m is None or not m["name"]:
        return "", None, None
    return m["name"], m["file"], int(m["line"]) if m["line"] else None


# --- values and variables -------------------------------------------------------------------


def is_tracer(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


def is_literal(v: Any) -> bool:
    return isinstance(v, jex_core.Literal)


def is_dropvar(v: Any) -> bool:
    return isinstance(v, jex_core.DropVar)


def is_aval(x: Any) -> bool:
    return isinstance(x, jax.core.AbstractValue)


def literal_value(v: Any) -> Any:
    return v.val


def scan_counts(params: dict[str, Any]) -> tuple[int, int] | None:
    """(number of consts, number of carries) of a scan equation, None where unknown.

    jax <= 0.11 names them ``num_consts``/``num_carry``; jax 0.12 keeps the operand groups
    (consts, carry, xs) as the flat tree ``ft_in``.
    """
    if "num_consts" in params and "num_carry" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    try:
        consts, carry, _ = params["ft_in"].unpack()
        return len(list(consts)), len(list(carry))
    except Exception:  # another layout: the caller hashes the loop as a plain call
        return None


def eqn_effects(eqn: Any) -> list[str]:
    return sorted(type(e).__name__ for e in (getattr(eqn, "effects", None) or ()))


def eqn_context(eqn: Any) -> tuple[Any, ...]:
    """The parts of an equation's context that change what it computes."""
    ctx = getattr(eqn, "ctx", None)
    return tuple(getattr(ctx, k, None) for k in ("compute_type", "threefry_partitionable", "xla_metadata"))


def key_data(x: Any) -> Any | None:
    """The raw data of a PRNG key array, or None for any other value."""
    try:
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.key_data(x)
    except (AttributeError, TypeError):
        pass
    return None


def to_struct(aval: Any) -> jax.ShapeDtypeStruct:
    try:
        return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=getattr(aval, "weak_type", False))
    except AttributeError:
        raise TraceError(
            f"autotune cannot re-trace a value of abstract type {aval}; only arrays are "
            "supported inside rewritten loop bodies. Leave this loop at its default config."
        ) from None


def aval_of(x: Any) -> Any:
    typeof = getattr(jax, "typeof", None)
    return typeof(x) if typeof is not None else jax.core.get_aval(x)


def retrace_like(original: Any, fn, in_avals: list[Any]) -> Any:
    """Trace ``fn`` on ``in_avals`` into a jaxpr that can take ``original``'s place.

    A closed jaxpr may come back with consts; an open, const-free one (a scan
    body on JAX 0.12, a remat body on 0.10) must come back without them. Run it
    under :func:`axis_context` of the equation that holds ``original`` when that
    equation binds axis names. Inputs keep the manual axes they vary over.
    """
    traced = jax.make_jaxpr(fn)(*[with_manual_axes(to_struct(a), a) for a in in_avals])
    inner, consts = unpack(traced)
    if _CLOSED_TYPE is not None and isinstance(original, _CLOSED_TYPE):
        return traced
    if consts and not unpack(original)[1]:
        raise TraceError(
            "autotune re-emitted a loop body that captured array constants where JAX "
            "expects a constant-free jaxpr. Pass those arrays as function arguments, or "
            "leave this loop at its default config."
        )
    return traced if _CLOSED_TYPE is None else inner


# --- re-binding equations ---------------------------------------------------------------------


@contextlib.contextmanager
def source_context(eqn: Any):
    """Inside, new equations get ``eqn``'s traceback, name stack and equation context."""
    name_stack = jex_siu.current_name_stack() + eqn.source_info.name_stack
    ctx = getattr(getattr(eqn, "ctx", None), "manager", None) or contextlib.nullcontext()
    with jex_siu.user_context(eqn.source_info.traceback, name_stack=name_stack), ctx:
        yield


def bind_like(eqn: Any, params: dict[str, Any], invals: list[Any]) -> list[Any]:
    """Bind ``eqn``'s primitive with ``params`` on ``invals``, in ``eqn``'s source context."""
    with source_context(eqn):
        out = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(params))
    return out if eqn.primitive.multiple_results else [out]


# --- shardings --------------------------------------------------------------------------------


def is_single_device_sharding(sharding: Any) -> bool:
    """Whether ``sharding`` places an array on one device. jax 0.12.1 deprecated the class
    ``SingleDeviceSharding`` for this predicate; 0.10 has only the class."""
    test = getattr(jax.sharding, "is_single_device_sharding", None)
    if test is not None:
        return bool(test(sharding))
    return isinstance(sharding, jax.sharding.SingleDeviceSharding)


def single_device_sharding(device: Any, memory_kind: str | None = None) -> Any:
    """A sharding that places an array on ``device`` (both JAX lines have this maker)."""
    return jax.sharding.make_single_device_sharding(device, memory_kind=memory_kind)


def hoisted_constants(lowered_text: str) -> int:
    """How many closed-over constants a program lowered by ``jax.jit`` takes as arguments.

    From jax 0.12 (``jax_use_simplified_jaxpr_constants``), ``jax.jit`` passes every constant
    larger than ``jax_embedded_constants_max_bytes`` (1 KB) to the executable as an argument,
    marked ``jax.const`` in the lowered text, so XLA cannot fold it; ``jax.export`` embeds it in
    the module, where XLA can. jax 0.10 embeds every constant: always 0 there.
    """
    return lowered_text.count("jax.const = true")


# --- caches ------------------------------------------------------------------------------------


def backends_started() -> bool:
    """Whether JAX opened its backends (devices) in this process; once it has, the platforms
    it may use are fixed."""
    from jax._src import xla_bridge

    started = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(started()) if started is not None else bool(getattr(xla_bridge, "_backends", None))


def clear_jax_caches() -> None:
    jax.clear_caches()


class no_persistent_cache:
    """Context manager: the persistent compilation cache is neither read nor written inside.

    JAX decides once per process whether the cache is in use and remembers it, so
    flipping ``jax_enable_compilation_cache`` alone is not enough: the remembered
    decision is overridden inside and restored on exit, with the flag.
    """

    _flag = "jax_enable_compilation_cache"

    def __enter__(self):
        self._old_flag = getattr(jax.config, self._flag, True)
        jax.config.update(self._flag, False)
        self._module = None
        try:
            from jax._src import compilation_cache as cc

            with cc._cache_initialized_mutex:
                self._saved = (cc._cache_checked, cc._cache_used)
                cc._cache_checked, cc._cache_used = True, False
            self._module = cc
        except Exception:  # private API moved: the flag above is the best we can do
            pass
        return self

    def __exit__(self, *exc):
        if self._module is not None:
            with self._module._cache_initialized_mutex:
                self._module._cache_checked, self._module._cache_used = self._saved
        jax.config.update(self._flag, self._old_flag)
        return False


CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
CACHE_MISS_EVENT = "/jax/compilation_cache/cache_misses"
"""The ``jax.monitoring`` events a compile records when the persistent cache served it, or did not
(the same names in jax 0.10 and 0.12)."""


def compilation_cache_dir() -> str | None:
    """Where JAX's persistent compilation cache lives when it is on in this process
    (``jax_compilation_cache_dir``, or the ``JAX_COMPILATION_CACHE_DIR`` environment variable JAX reads),
    else None (no directory, or ``jax_enable_compilation_cache`` off)."""
    if not getattr(jax.config, "jax_enable_compilation_cache", True):
        return None
    return getattr(jax.config, "jax_compilation_cache_dir", None) or os.environ.get("JAX_COMPILATION_CACHE_DIR") or None


def cache_everything_in(directory: str) -> None:
    """Turn the persistent compilation cache on in this (fresh) process, in ``directory``, for
    every executable: no minimum compile time, no minimum entry size (a tiny program is cached too)."""
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def count_cache_events() -> dict[str, int]:
    """A dict that counts, from now on in this process, the compiles the persistent cache served
    (``"hits"``) and missed (``"misses"``), through ``jax.monitoring``'s event listeners."""
    counts = {"hits": 0, "misses": 0}

    def listen(event: str, **_: Any) -> None:
        if event == CACHE_HIT_EVENT:
            counts["hits"] += 1
        elif event == CACHE_MISS_EVENT:
            counts["misses"] += 1

    jax.monitoring.register_event_listener(listen)
    return counts


def jaxpr_function(closed: Any):
    """(a function of a closed jaxpr's flat inputs that evaluates it, the inputs' avals)."""
    inner, _ = unpack(closed)
    return jex_core.jaxpr_as_fun(closed), [v.aval for v in inner.invars]


def device_bytes_limit(device: Any) -> int | None:
    """The memory a device reports it can give (``memory_stats()["bytes_limit"]``), or None where it
    reports none (the CPU)."""
    try:
        stats = device.memory_stats()
    except Exception:  # a backend without memory statistics
        return None
    limit = (stats or {}).get("bytes_limit")
    return int(limit) if limit else None
