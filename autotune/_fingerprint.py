"""A fingerprint of the traced program itself, never of its printout.

The jaxpr is serialised canonically: equations in order, each with its primitive
name, its operands (variables numbered by first occurrence within their jaxpr,
literals by value), its results' abstract values and its parameters. Parameters
are canonicalised: sub-jaxprs recursively, arrays by dtype, shape and a hash of
their bytes, callables by module and qualified name, other objects by their type
and ``repr`` with memory addresses removed (a function by its qualified
name only, since a script's module is ``__main__`` run directly and its file's name
imported), and every ``unroll`` replaced by ``*``
so re-choosing unroll factors keeps the fingerprint. Names, source lines, file
paths, name stacks and debug info are left out, so neither colour, terminal,
pretty-print settings, the directory a project lives in nor moving non-loop code
changes it; a changed constant, shape, dtype, operation or loop structure does.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import re
import types
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import _compat

_ADDRESS_RE = re.compile(r" at 0x[0-9a-fA-F]+|0x[0-9a-fA-F]{6,}")
# Parameters that name or locate code without changing what it computes.
_SKIPPED_PARAMS = frozenset({"name", "debug_info", "source_info", "name_and_src_info"})
_SKIPPED_TYPES = frozenset({"DebugInfo", "SourceInfo", "NameStack", "Traceback"})
_NORMALISED_PARAMS = {"unroll": "*"}
# Bumped whenever the serialisation changes, so an old entry is a clean miss, never a mix.
_VERSION = "autotune-fingerprint-2"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _aval(aval: Any) -> str:
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return f"{type(aval).__name__}:{_ADDRESS_RE.sub('', str(aval))}"
    weak = "~" if getattr(aval, "weak_type", False) else ""
    dims = ",".join(str(d) for d in shape)
    return f"{type(aval).__name__}:{dtype}{weak}[{dims}]"


def _array(x: Any) -> str:
    data = _compat.key_data(x)
    head = f"{getattr(x, 'dtype', '?')}[{','.join(str(d) for d in np.shape(x))}]"
    try:
        raw = np.ascontiguousarray(np.asarray(x if data is None else data))
    except Exception:  # an array JAX cannot hand to the host (a tracer, a deleted buffer)
        return f"array:{head}:opaque"
    return f"array:{head}:{raw.dtype.str}:{hashlib.sha256(raw.tobytes()).hexdigest()}"


_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)


def _is_function(x: Any) -> bool:
    return isinstance(x, _FUNCTION_TYPES) or type(x).__name__ == "WrappedFun"


def _callable(fn: Any) -> str:
    if isinstance(fn, functools.partial):
        return f"partial({_callable(fn.func)})"
    if type(fn).__name__ == "WrappedFun":  # JAX's wrapper around a Python function
        return f"wrapped({_callable(getattr(fn, 'f', None))})"
    # The qualified name alone: the module of the same function is "__main__" when its
    # file runs as a script and the file's name when it is imported.
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__qualname__
    return f"fn:{name}"


class _Serialiser:
    """Serialises jaxprs, each distinct jaxpr object once (by identity) per fingerprint."""

    def __init__(self):
        self._memo: dict[int, tuple[Any, str]] = {}

    def jaxpr(self, jx: Any) -> str:
        hit = self._memo.get(id(jx))
        if hit is not None and hit[0] is jx:
            return hit[1]
        inner, consts = _compat.unpack(jx)
        names: dict[Any, int] = {}

        def var(v: Any) -> str:
            if _compat.is_literal(v):
                return f"lit({self.value(_compat.literal_value(v))}:{_aval(v.aval)})"
            if _compat.is_dropvar(v):
                return "_"
            if v not in names:
                names[v] = len(names)
            return f"%{names[v]}"

        def binders(vs) -> str:
            return ",".join(f"{var(v)}:{_aval(v.aval)}" for v in vs)

        lines = [
            f"consts {binders(inner.constvars)} = {','.join(self.value(c) for c in consts)}",
            f"in {binders(inner.invars)}",
        ]
        for eqn in inner.eqns:
            params = ",".join(f"{k}={self.param(k, v)}" for k, v in sorted(eqn.params.items())
                              if k not in _SKIPPED_PARAMS)
            lines.append(
                f"{binders(eqn.outvars)} = {eqn.primitive.name}[{params}]"
                f"({','.join(var(v) for v in eqn.invars)})"
                f" effects={_compat.eqn_effects(eqn)} ctx={self.value(_compat.eqn_context(eqn))}"
            )
        lines.append(f"out {','.join(var(v) for v in inner.outvars)}")
        digest = _digest("\n".join(lines))
        self._memo[id(jx)] = (jx, digest)
        return digest

    def param(self, key: str, value: Any) -> str:
        if key in _NORMALISED_PARAMS:
            return _NORMALISED_PARAMS[key]
        return self.value(value)

    def value(self, x: Any) -> str:
        if x is None or isinstance(x, (bool, int, float, complex, str, bytes)):
            return f"{type(x).__name__}:{x!r}"
        if _compat.is_jaxpr(x):
            return f"jaxpr:{self.jaxpr(x)}"
        if type(x).__name__ in _SKIPPED_TYPES:
            return "-"
        if isinstance(x, enum.Enum):
            return f"enum:{type(x).__qualname__}.{x.name}"
        if isinstance(x, np.dtype):
            return f"dtype:{x.str}:{x.name}"
        if _compat.is_tracer(x):
            return f"tracer:{_aval(_compat.aval_of(x))}"
        if isinstance(x, (np.ndarray, np.generic)) or (hasattr(x, "dtype") and hasattr(x, "shape")
                                                       and not _compat.is_aval(x)):
            return _array(x)
        if _compat.is_aval(x):
            return f"aval:{_aval(x)}"
        if isinstance(x, tuple) and type(x) is not tuple:  # named tuples: dimension numbers...
            return f"{type(x).__qualname__}({','.join(self.value(i) for i in x)})"
        if isinstance(x, (tuple, list)):
            return f"({','.join(self.value(i) for i in x)})"
        if isinstance(x, Mapping):
            return "{" + ",".join(f"{self.value(k)}:{self.value(v)}" for k, v in
                                  sorted(x.items(), key=lambda kv: repr(kv[0]))) + "}"
        if isinstance(x, (set, frozenset)):
            return "{" + ",".join(sorted(self.value(i) for i in x)) + "}"
        if _is_function(x):
            return _callable(x)
        if isinstance(x, type):
            return f"type:{x.__qualname__}"
        return f"obj:{type(x).__qualname__}:{_ADDRESS_RE.sub('', repr(x))}"


def canonical_hash(jaxpr: Any) -> str:
    """The hex sha256 of ``jaxpr``'s canonical serialisation (unroll normalised)."""
    return _Serialiser().jaxpr(jaxpr)


def fingerprint(jaxpr: Any, sites: list[Any]) -> str:
    """A hash of the program with every unroll normalised, and of its site ids.

    Arguments:
        jaxpr: the traced program (a closed jaxpr).
        sites: its :class:`LoopSite` list; their ids, kinds and lengths are hashed too,
            so moving a loop to another line (another id) changes the fingerprint.

    Returns:
        32 hex digits, identical in every process that traces the same computation.
    """
    ids = json.dumps([(s.id, s.kind, s.length) for s in sites])
    return _digest(f"{_VERSION}\n{canonical_hash(jaxpr)}\n{ids}")[:32]
