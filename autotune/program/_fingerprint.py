"""A fingerprint of the traced program itself, never of its printout.

The program is hashed as a dataflow graph (a Merkle hash): every value gets the hash of
what computes it, ``H(primitive, parameters, hashes of its operands)``, and the
fingerprint hashes the program's outputs (and its effectful equations). So the
*order* in which equations, a call's operands or a loop's carries happen to be
written does not count, only what is computed from what: a library that builds its
pytrees by iterating a ``set`` (numpyro orders a distribution's leaves so) traces one
program in many orders, with one fingerprint. A sub-program (a ``scan`` or
``while_loop`` body, ``cond`` branches, a ``jit``/``checkpoint``/``custom_jvp`` callee)
is hashed on its caller's operand hashes, its loop carries twice so the hash also
says which result feeds which carry.

Parameters are canonicalised: arrays by dtype, shape and a hash of their bytes,
callables by their qualified name (a script's module is ``__main__`` run directly
and its file's name imported), other objects by their type and ``repr`` with memory
addresses removed, and every ``unroll`` replaced by ``*`` so re-choosing unroll
factors keeps the fingerprint. Names, source lines, file paths, name stacks and
debug info are left out, so neither colour, terminal, pretty-print settings, the
directory a project lives in nor moving non-loop code changes it; a changed
constant, shape, dtype, operation or loop structure does.
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

from autotune.program import _compat

_ADDRESS_RE = re.compile(r" at 0x[0-9a-fA-F]+|0x[0-9a-fA-F]{6,}")
# Parameters that name or locate code without changing what it computes.
_SKIPPED_PARAMS = frozenset({"name", "debug_info", "source_info", "name_and_src_info"})
_SKIPPED_TYPES = frozenset({"DebugInfo", "SourceInfo", "NameStack", "Traceback"})
_NORMALISED_PARAMS = {"unroll": "*"}
# Bumped whenever the serialisation changes, so an old entry is a clean miss, never a mix.
_VERSION = "autotune-fingerprint-3"


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


# Call-like equations whose sub-program takes the equation's operands one for one and gives
# its results one for one: hashed on the operands' hashes (see _Hasher.call).
_LOOP_PRIMITIVES = frozenset({"scan", "while"})


class _Hasher:
    """Merkle hashes of jaxpr values; a sub-jaxpr is hashed once per (object, input hashes)."""

    def __init__(self):
        self._memo: dict[tuple[int, tuple[str, ...]], tuple[Any, list[str], list[str]]] = {}

    def run(self, jx: Any, seeds: tuple[str, ...]) -> tuple[list[str], list[str]]:
        """(hashes of ``jx``'s outputs, sorted hashes of its effectful equations), given the
        hashes of its inputs."""
        key = (id(jx), seeds)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is jx:
            return hit[1], hit[2]
        inner, consts = _compat.unpack(jx)
        env: dict[Any, str] = {}
        for i, v in enumerate(inner.constvars):
            # A bare Jaxpr in a primitive's params (lineax's linear_solve) has constvars but
            # no values in hand: its caller binds them, so they count by position and type.
            if i < len(consts):
                env[v] = _digest(f"const:{_aval(v.aval)}:{self.value(consts[i])}")
            else:
                env[v] = _digest(f"constvar:{i}:{_aval(v.aval)}")
        for v, s in zip(inner.invars, seeds):
            env[v] = _digest(f"in:{_aval(v.aval)}:{s}")

        def read(v: Any) -> str:
            if _compat.is_literal(v):
                return f"lit({self.value(_compat.literal_value(v))}:{_aval(v.aval)})"
            return env[v]

        effects: list[str] = []
        for eqn in inner.eqns:
            ins = [read(v) for v in eqn.invars]
            outs, inner_effects = self.equation(eqn, ins)
            for v, h in zip(eqn.outvars, outs):
                if not _compat.is_dropvar(v):
                    env[v] = _digest(f"{h}:{_aval(v.aval)}")
            effect_names = _compat.eqn_effects(eqn)
            if effect_names or inner_effects:
                effects.append(_digest(f"effect:{effect_names}:{ins}:{outs}:{inner_effects}"))
        result = [read(v) for v in inner.outvars], sorted(effects)
        self._memo[key] = (jx, *result)
        return result

    def equation(self, eqn: Any, ins: list[str]) -> tuple[list[str], list[str]]:
        """The hashes of an equation's results, and of the effects inside its sub-programs."""
        name, params = eqn.primitive.name, eqn.params
        n_in, n_out = len(eqn.invars), len(eqn.outvars)
        subs = {k: v for k, v in params.items() if _compat.is_jaxpr(v)}
        branches = params.get("branches") if name == "cond" else None
        plain = {
            k: v
            for k, v in params.items()
            if k not in _SKIPPED_PARAMS and k not in subs and not (branches and k == "branches")
        }
        ctx = self.value(_compat.eqn_context(eqn))
        if (
            name in _LOOP_PRIMITIVES
            or branches
            or (len(subs) == 1 and _arity(next(iter(subs.values()))) == (n_in, n_out))
        ):
            # A call: per-operand and per-result parameters (donation, shardings, `linear`)
            # travel with their operand or result, so reordering operands changes nothing.
            ins, aligned_out = list(ins), [""] * n_out
            for k in sorted(plain):
                v = plain[k]
                if isinstance(v, tuple) and len(v) in (n_in, n_out) and len(v) > 1:
                    del plain[k]
                    if len(v) == n_in:
                        ins = [_digest(f"{i}:{k}={self.value(p)}") for i, p in zip(ins, v)]
                    else:
                        aligned_out = [f"{a}{k}={self.value(p)};" for a, p in zip(aligned_out, v)]
            head = f"{name}[{self.params(plain)}] ctx={ctx}"
            outs, effects = self.call(name, params, subs, branches, ins, n_out)
            return [_digest(f"{head}:{a}:{o}") for a, o in zip(aligned_out, outs)], effects
        all_params = self.params({**plain, **subs})
        head = _digest(f"{name}[{all_params}]({','.join(ins)}) ctx={ctx}")
        return [f"{head}#{k}" for k in range(n_out)], []

    def call(self, name, params, subs, branches, ins, n_out) -> tuple[list[str], list[str]]:
        counts = _compat.scan_counts(params) if name == "scan" else None
        if counts is not None:
            nc, ncarry = counts
            body = params["jaxpr"]
            first, _ = self.run(body, tuple(ins))
            # The second pass says which result feeds which carry.
            seeds = (
                ins[:nc]
                + [_digest(f"carry:{i}:{o}") for i, o in zip(ins[nc : nc + ncarry], first)]
                + ins[nc + ncarry :]
            )
            return self.run(body, tuple(seeds))
        if name == "while":
            cn, bn = params["cond_nconsts"], params["body_nconsts"]
            cconsts, bconsts, carry = ins[:cn], ins[cn : cn + bn], ins[cn + bn :]
            first, _ = self.run(params["body_jaxpr"], tuple(bconsts + carry))
            carry = [_digest(f"carry:{i}:{o}") for i, o in zip(carry, first)]
            outs, effects = self.run(params["body_jaxpr"], tuple(bconsts + carry))
            (pred,), cond_effects = self.run(params["cond_jaxpr"], tuple(cconsts + carry))
            return [_digest(f"while:{pred}:{o}") for o in outs], sorted(effects + cond_effects)
        if branches:
            results = [self.run(b, tuple(ins[1:])) for b in branches]
            outs = [_digest(f"cond:{ins[0]}:{[r[0][k] for r in results]}") for k in range(n_out)]
            return outs, sorted(e for r in results for e in r[1])
        (sub,) = subs.values()
        return self.run(sub, tuple(ins))

    def params(self, params: Mapping[str, Any]) -> str:
        return ",".join(f"{k}={self.param(k, v)}" for k, v in sorted(params.items()) if k not in _SKIPPED_PARAMS)

    def standalone(self, jx: Any) -> str:
        """A sub-program held where its operands are not known: its inputs by position."""
        n = len(_compat.unpack(jx)[0].invars)
        outs, effects = self.run(jx, tuple(f"arg{i}" for i in range(n)))
        return _digest(f"out:{outs}:effects:{effects}")

    def param(self, key: str, value: Any) -> str:
        if key in _NORMALISED_PARAMS:
            return _NORMALISED_PARAMS[key]
        return self.value(value)

    def value(self, x: Any) -> str:
        if x is None or isinstance(x, (bool, int, float, complex, str, bytes)):
            return f"{type(x).__name__}:{x!r}"
        if _compat.is_jaxpr(x):
            return f"jaxpr:{self.standalone(x)}"
        if type(x).__name__ in _SKIPPED_TYPES:
            return "-"
        if isinstance(x, enum.Enum):
            return f"enum:{type(x).__qualname__}.{x.name}"
        if isinstance(x, np.dtype):
            return f"dtype:{x.str}:{x.name}"
        if _compat.is_tracer(x):
            return f"tracer:{_aval(_compat.aval_of(x))}"
        if isinstance(x, (np.ndarray, np.generic)) or (
            hasattr(x, "dtype") and hasattr(x, "shape") and not _compat.is_aval(x)
        ):
            return _array(x)
        if _compat.is_aval(x):
            return f"aval:{_aval(x)}"
        if isinstance(x, tuple) and type(x) is not tuple:  # named tuples: dimension numbers...
            return f"{type(x).__qualname__}({','.join(self.value(i) for i in x)})"
        if isinstance(x, (tuple, list)):
            return f"({','.join(self.value(i) for i in x)})"
        if isinstance(x, Mapping):
            return (
                "{"
                + ",".join(f"{self.value(k)}:{self.value(v)}" for k, v in sorted(x.items(), key=lambda kv: repr(kv[0])))
                + "}"
            )
        if isinstance(x, (set, frozenset)):
            return "{" + ",".join(sorted(self.value(i) for i in x)) + "}"
        if _is_function(x):
            return _callable(x)
        if isinstance(x, type):
            return f"type:{x.__qualname__}"
        return f"obj:{type(x).__qualname__}:{_ADDRESS_RE.sub('', repr(x))}"


def _arity(jx: Any) -> tuple[int, int]:
    inner, _ = _compat.unpack(jx)
    return len(inner.invars), len(inner.outvars)


def canonical_hash(jaxpr: Any) -> str:
    """The hex sha256 of ``jaxpr`` as a dataflow graph (unroll normalised, inputs by position)."""
    return _Hasher().standalone(jaxpr)


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
