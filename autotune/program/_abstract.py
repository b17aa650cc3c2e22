"""The JSON form of a call's abstract signature, written by `_record`, read by `_replay`.

The abstract JSON, ``{"version": 1, "args": [node, ...], "kwargs": {name: node}}``, where a
node is one of ``{"shape": [...], "dtype": "float32"}`` (``"weak": true`` for a weakly typed
leaf, ``"key": impl`` for a PRNG key array, ``"mesh": "@mesh(data=8)"`` for a leaf on a mesh,
which makes the call unreplayable), ``{"static": value}``, ``{"tuple": [node...]}``,
``{"list": [node...]}``, ``{"dict": [[key, node], ...]}``, ``{"namedtuple": "mod:Name",
"items": [node...]}``, or ``{"unrecordable": "type name"}``. Static values use the tagged
JSON of `encode_value`.
"""

from __future__ import annotations

import enum
import inspect
import json
import math
import sys
from typing import Any

import jax
import numpy as np

from autotune.program import _compat, _keys

ABSTRACT_VERSION = 1


class Unrecordable(ValueError):
    """Why a call cannot be rebuilt in another process (the record's ``why_not``)."""


# ------------------------------------------------------------------ static values as JSON


def ref_of(obj: Any) -> str | None:
    """``"module:qualname"`` when importing that gives back ``obj`` itself (a class, a
    function, ``jnp.float32``...), else None. A script's ``__main__`` counts as its module name."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    found = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if found is not obj:
        return None
    return f"{_keys.main_module_name() if module == '__main__' else module}:{qualname}"


def resolve_ref(ref: str) -> Any:
    """The object a `ref_of` text names (importing its module)."""
    import importlib

    module, _, qualname = ref.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def type_name(t: type) -> str:
    """``module.Qualname`` of a type, a script's ``__main__`` shown as its module name."""
    module = t.__module__
    return f"{_keys.main_module_name() if module == '__main__' else module}.{t.__qualname__}"


def encode_value(v: Any, where: str) -> Any:
    """A static value as tagged JSON: None, bools, ints, strings and finite floats as
    themselves; ``{"float": "nan"}``, ``{"complex": [re, im]}``, ``{"tuple": [...]}``,
    ``{"list": [...]}``, ``{"dict": [[k, v], ...]}``, ``{"dtype": "float32"}``,
    ``{"enum": "mod:Cls", "name": ...}``, ``{"ref": "mod:qualname"}`` (an importable class or
    function). Raises `Unrecordable` for anything else, naming ``where``."""
    t = type(v)
    if v is None or t in (bool, int, str):
        return v
    if t is float:
        return v if math.isfinite(v) else {"float": repr(v)}
    if t is complex:
        return {"complex": [encode_value(v.real, where), encode_value(v.imag, where)]}
    if t in (tuple, list):
        return {t.__name__: [encode_value(x, f"{where}[{i}]") for i, x in enumerate(v)]}
    if t is dict:
        return {"dict": [[encode_value(k, f"{where} key"), encode_value(x, f"{where}[{k!r}]")] for k, x in v.items()]}
    if isinstance(v, np.dtype):
        return {"dtype": v.name}
    if isinstance(v, enum.Enum) and ref_of(t) is not None:
        return {"enum": ref_of(t), "name": v.name}
    ref = ref_of(v)
    if ref is not None:
        return {"ref": ref}
    raise Unrecordable(
        f"{where} is a {type_name(t)}, which cannot be stored as JSON (numbers, "
        "strings, None, tuples, lists, dicts, dtypes, enums and importable classes or functions can)"
    )


def decode_value(j: Any, resolve: Any = None) -> Any:
    """The value `encode_value` wrote; ``resolve`` (default `resolve_ref`, which imports)
    turns a ``"module:qualname"`` text into its object."""
    resolve = resolve or resolve_ref
    if not isinstance(j, dict):
        return j
    if "enum" in j:
        return resolve(j["enum"])[j["name"]]
    ((tag, body),) = j.items()
    if tag == "float":
        return float(body)
    if tag == "complex":
        return complex(*body)
    if tag == "tuple":
        return tuple(decode_value(x, resolve) for x in body)
    if tag == "list":
        return [decode_value(x, resolve) for x in body]
    if tag == "dict":
        return {decode_value(k, resolve): decode_value(x, resolve) for k, x in body}
    if tag == "dtype":
        return dtype_named(body)
    if tag == "ref":
        return resolve(body)
    raise ValueError(f"unknown tag {tag!r} in a recorded static value")


def _loaded_ref(ref: str) -> Any:
    """`resolve_ref` without importing: the recording process has the module loaded already
    (a script under ``__main__``)."""
    module, _, qualname = ref.partition(":")
    obj = sys.modules.get(module)
    if obj is None and module == _keys.main_module_name():
        obj = sys.modules.get("__main__")
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def dtype_named(name: str) -> np.dtype:
    """The NumPy dtype of a name, ``ml_dtypes``' (``bfloat16``, ``float8_*``...) included."""
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


# ------------------------------------------------------------------ the argument tree


def _param_names(fun: Any) -> list[str]:
    try:
        return [
            p.name
            for p in inspect.signature(fun).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return []


def _leaf(x: Any) -> dict[str, Any]:
    aval = _compat.aval_of(x)
    node: dict[str, Any] = {"shape": [int(d) for d in aval.shape]}
    if jax.dtypes.issubdtype(aval.dtype, jax.dtypes.prng_key):
        node.update(dtype=str(aval.dtype), key=str(jax.random.key_impl(x)))
    else:
        node["dtype"] = np.dtype(aval.dtype).name
    if getattr(aval, "weak_type", False):
        node["weak"] = True
    return node


def _node(x: Any, where: str, path: tuple, leaves: list, problems: list[str]) -> dict[str, Any]:
    if _compat.is_tracer(x):
        leaves.append((path, _leaf(x)))
        mesh = _keys.mesh_text(x)
        if mesh:  # the spec and devices are not in the traced value: a replay would tune another program
            leaves[-1][1]["mesh"] = mesh
            problems.append(
                f"{where} is on a mesh ({mesh[1:]}), which a replay cannot rebuild (it would tune a "
                "one-device program); tune it where it runs, with fn.tune(*args)"
            )
        return leaves[-1][1]
    t = type(x)
    if t in (tuple, list):
        return {t.__name__: [_node(c, f"{where}[{i}]", path + (i,), leaves, problems) for i, c in enumerate(x)]}
    if t is dict:
        try:
            keys = sorted(x)  # jax flattens a dict in sorted key order
            return {
                "dict": [
                    [encode_value(k, f"{where} key"), _node(x[k], f"{where}[{k!r}]", path + (k,), leaves, problems)]
                    for k in keys
                ]
            }
        except (TypeError, Unrecordable) as e:
            problems.append(f"{where} is a dict whose keys cannot be stored ({e})")
            return {"unrecordable": "dict"}
    if isinstance(x, tuple) and hasattr(t, "_fields") and ref_of(t) is not None:
        return {
            "namedtuple": ref_of(t),
            "items": [
                _node(c, f"{where}.{f}", path + (i,), leaves, problems) for i, (f, c) in enumerate(zip(t._fields, x))
            ],
        }
    if any(_compat.is_tracer(leaf) for leaf in jax.tree_util.tree_leaves(x)):
        problems.append(
            f"{where} is a pytree of type {type_name(t)}, which cannot be rebuilt "
            "from JSON (tuples, lists, dicts and importable namedtuples of arrays can)"
        )
        return {"unrecordable": f"{type_name(t)}"}
    try:
        value = encode_value(x, where)
        if repr(decode_value(value, _loaded_ref)) != repr(x):
            raise Unrecordable(f"{where} ({x!r:.60}) does not come back the same from JSON")
    except Unrecordable as e:
        problems.append(str(e))
        return {"unrecordable": f"{type_name(t)}"}
    except Exception as e:  # a ref that would not import back
        problems.append(f"{where} cannot be stored as JSON ({type(e).__name__}: {e})")
        return {"unrecordable": f"{type_name(t)}"}
    return {"static": value}


def describe(fun: Any, args: tuple, kwargs: dict) -> tuple[dict[str, Any], str | None, list[tuple]]:
    """The call's abstract JSON (see the module docstring), why it cannot be rebuilt (or
    None), and its array leaves as ``(path, leaf node)`` in order; a path starts with the
    argument's index or keyword name."""
    names, leaves, problems = _param_names(fun), [], []
    nodes = []
    for i, a in enumerate(args):
        where = f"argument {i}" + (f" ({names[i]})" if i < len(names) else "")
        nodes.append(_node(a, where, (i,), leaves, problems))
    kw = {k: _node(kwargs[k], f"keyword argument {k!r}", (k,), leaves, problems) for k in sorted(kwargs)}
    abstract = {"version": ABSTRACT_VERSION, "args": nodes, "kwargs": kw}
    if len(json.dumps(abstract)) > 512 * 1024 or _depth(abstract) > 30:
        problems.insert(0, "the argument tree is too large or too deep to record")
        abstract = {"version": ABSTRACT_VERSION, "args": [], "kwargs": {}, "omitted": True}
    return abstract, (problems[0] if problems else None), leaves


def _depth(j: Any) -> int:
    if isinstance(j, dict):
        return 1 + max((_depth(v) for v in j.values()), default=0)
    if isinstance(j, list):
        return 1 + max((_depth(v) for v in j), default=0)
    return 0


# ------------------------------------------------------------------ a short readable form

_SHORT = {"float": "f", "int": "i", "uint": "u", "complex": "c", "bfloat": "bf"}


def _dtype_text(name: str) -> str:
    for long, short in _SHORT.items():
        if name.startswith(long) and name[len(long) :].isdigit():
            return short + name[len(long) :]
    return name


def _node_text(node: Any) -> str:
    if "shape" in node:
        if "key" in node:
            return f"key[{','.join(map(str, node['shape']))}]"
        return (
            f"{_dtype_text(node['dtype'])}{'~' if node.get('weak') else ''}[{','.join(map(str, node['shape']))}]"
            f"{node.get('mesh', '')}"
        )
    if "static" in node:
        return _static_text(node["static"])
    if "tuple" in node:
        items = [_node_text(c) for c in node["tuple"]]
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
    if "list" in node:
        return f"[{', '.join(_node_text(c) for c in node['list'])}]"
    if "dict" in node:
        return "{" + ", ".join(f"{_static_text(k)}: {_node_text(c)}" for k, c in node["dict"]) + "}"
    if "namedtuple" in node:
        return f"{node['namedtuple'].rpartition(':')[2]}({', '.join(_node_text(c) for c in node['items'])})"
    return f"<{node.get('unrecordable', '?')}>"


def _static_text(j: Any) -> str:
    if not isinstance(j, dict):
        return repr(j)
    if "ref" in j:
        return j["ref"].rpartition(":")[2]
    if "dtype" in j:
        return j["dtype"]
    if "enum" in j:
        return f"{j['enum'].rpartition(':')[2]}.{j['name']}"
    try:
        return repr(decode_value(j, resolve=lambda ref: ref))
    except Exception:
        return "?"


def short_signature(abstract: dict[str, Any]) -> str:
    """The call's arguments in brief: ``(f32[16], P(f32[], i32[2,3]), 8, scale=f32~[])``."""
    if abstract.get("omitted"):
        return "(...)"
    parts = [_node_text(n) for n in abstract.get("args", [])]
    parts += [f"{k}={_node_text(n)}" for k, n in sorted(abstract.get("kwargs", {}).items())]
    return f"({', '.join(parts)})"
