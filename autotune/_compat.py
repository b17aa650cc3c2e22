"""The small surface of JAX internals autotune relies on, in one place.

Jaxpr objects changed shape between JAX versions (0.10 has ``ClosedJaxpr``
wrapping an open ``Jaxpr``; 0.12 attaches consts to ``Jaxpr`` itself), and scan
parameters were renamed. Everything here works on both by duck typing, and the
only equation parameter autotune ever writes is ``unroll``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import jax
import jax.extend.core as jex_core
import jax.extend.source_info_util as jex_siu

from ._errors import TraceError

_JAXPR_TYPES = tuple({jex_core.Jaxpr, jex_core.ClosedJaxpr})
# JAX <= 0.11 wraps open jaxprs in ClosedJaxpr; later versions merged the two.
_CLOSED_TYPE = jex_core.ClosedJaxpr if jex_core.ClosedJaxpr is not jex_core.Jaxpr else None

# Frames inside this package are not "user" frames: a site's source is the
# user's line that called at.loop / lax.scan, not ours.
jex_siu.register_exclusion(os.path.dirname(os.path.abspath(__file__)))


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
    body on JAX 0.12, a remat body on 0.10) must come back without them.
    """
    traced = jax.make_jaxpr(fn)(*[to_struct(a) for a in in_avals])
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


def debug_name(jx: Any) -> str:
    """The traced function's name and what it was traced for, e.g. 'scan:body at f.py:3'."""
    info = getattr(unpack(jx)[0], "debug_info", None)
    if info is None:
        return ""
    return f"{getattr(info, 'traced_for', '')}:{getattr(info, 'func_src_info', '') or ''}"


def user_frame(eqn: Any) -> tuple[str, int] | None:
    """(file, line) of the user code that emitted ``eqn``, or None."""
    src = getattr(eqn, "source_info", None)
    if src is None:
        return None
    try:
        from jax._src import source_info_util

        frame = source_info_util.user_frame(src.traceback)
        if frame is not None:
            return frame.file_name, frame.start_line
    except Exception:  # private API moved: fall back to the public summary
        pass
    try:
        text = jex_siu.summarize(src)
        file, line = text.split(" ")[0].rsplit(":", 2)[:2]
        return file, int(line)
    except Exception:
        return None


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
