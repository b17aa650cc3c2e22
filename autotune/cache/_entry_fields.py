"""A cache entry's fields, validated: the one gate every entry passes (`_entry.parse_entry`),
from `Cache.put`, a database row or an exported file alike.

Every field is checked by the primitives of `_validate` and against the entry's own sites (a
config names only its sites, with choices that fit them), so a hostile or damaged entry is one
`FieldError` naming the field, and anything stored can be exported and imported again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune import select as _select
from autotune._errors import ConfigError
from autotune.cache import _validate as v
from autotune.cache._validate import FieldError, utc_now
from autotune.program._config import Config, misfit
from autotune.select import Point
from autotune.select._point import LEGACY_KEYS

SITE_KINDS = ("scan", "loop", "while")
MAX_POINTS = 10_000
"""Most points accepted in an entry's ``pareto`` list."""
MAX_ROUNDS = 1_000
"""Most per-round samples accepted on one point."""

_REQUIRED = tuple("function_key fingerprint signature device config sites measurements objective cost".split())
_OPTIONAL = ("default_cost", "pareto", "study_name", "created_at", "default_config", "complete_range", "retune")
_POINT_KEYS = tuple(
    "config compile_cost_s run_cost_s rounds confirmed equivalent load_cost_s load_measured slowdown "
    "compile_slowdown memory_bytes".split()
)
"""What an entry keeps of a :class:`autotune.select.Point` (older entries spell the seconds
``compile_s`` and ``run_s``: read as these, see ``Point.LEGACY_KEYS``; ``load_cost_s``, what a later
process pays with the compilation cache on, re-picks ``best --processes``; ``slowdown``, the
default's calls beside a compile, and ``compile_slowdown``, a compile beside them, re-pick with tier-up;
``memory_bytes``, the config's device memory, re-picks under a memory budget)."""
_RANGE_KEYS = ("from_calls", "to_calls", "why")


def stored_point(point: Point) -> dict[str, Any]:
    """What an entry's ``pareto`` keeps of a confirmed point (its JSON, the keys of ``_POINT_KEYS``)."""
    return {k: v for k, v in point.to_json().items() if k in _POINT_KEYS}


def current_keys(item: Any) -> Any:
    """A stored point with the seconds of older entries (``compile_s``, ``run_s``) under their current names."""
    return {LEGACY_KEYS.get(k, k): x for k, x in item.items()} if isinstance(item, Mapping) else item


def entry_fields(d: Any) -> dict[str, Any]:
    """The fields of a `CacheEntry` from a dict, each validated; `FieldError` on the first bad one."""
    d = v.fields_of(d, _REQUIRED, _OPTIONAL, "cache entry")
    sites = _sites(d["sites"])
    pareto = d.get("pareto", [])
    if not isinstance(pareto, list):
        raise FieldError("pareto", f"must be a list, got {type(pareto).__name__}")
    if len(pareto) > MAX_POINTS:
        raise FieldError("pareto", f"holds {len(pareto)} points; the limit is {MAX_POINTS}")
    points = [_point(f"pareto[{i}]", it, sites) for i, it in enumerate(pareto)]
    study_name, default_cost = d.get("study_name"), d.get("default_cost")
    default = d.get("default_config")
    default = None if default is None else _config("default_config", default, sites)
    if default is not None and points and Config(default) not in (Config(p["config"]) for p in points):
        raise FieldError(
            "default_config",
            "is not the config of any point in 'pareto'; the default's measured point must be among them",
        )
    retune = d.get("retune")
    if retune is not None and "{calls}" not in v.text("retune", retune):
        raise FieldError("retune", "must contain the placeholder {calls} where the call count goes")
    return dict(
        function_key=v.text("function_key", d["function_key"]),
        fingerprint=v.text("fingerprint", d["fingerprint"]),
        signature=v.text("signature", d["signature"], allow_empty=True),
        device=v.device(d["device"]),
        config=_config("config", d["config"], sites),
        sites=sites,
        measurements=v.numbers("measurements", d["measurements"], allow_none=True),
        objective=v.objective(d["objective"]),
        cost=v.number("cost", d["cost"]),
        default_cost=None if default_cost is None else v.number("default_cost", default_cost),
        pareto=points,
        study_name=None if study_name is None else v.text("study_name", study_name),
        created_at=v.timestamp(d.get("created_at", utc_now())),
        default_config=default,
        complete_range=_range(d.get("complete_range")),
        retune=retune,
    )


def _sites(value: Any) -> dict[str, dict[str, Any]]:
    sites = {}
    for sid, site in v.obj("sites", value).items():
        where = f"sites.{sid}"
        site = dict(v.obj(where, site))
        for k in ("kind", "length", "has_ys"):
            if k not in site:
                raise FieldError(f"{where}.{k}", "is missing")
        kind = v.scalar(f"{where}.kind", site["kind"])
        if kind not in SITE_KINDS:
            raise FieldError(f"{where}.kind", f"must be one of {list(SITE_KINDS)}, got {kind!r}")
        length = site["length"]
        if not (length is None and kind == "while") and (
            isinstance(length, bool) or not isinstance(length, int) or length < 0
        ):
            what = "a non-negative integer (or null for a while site)" if kind == "while" else "a non-negative integer"
            raise FieldError(f"{where}.length", f"must be {what}, got {v.short(length)}")
        v.flag(f"{where}.has_ys", site["has_ys"])
        sites[sid] = {k: v.scalar(f"{where}.{k}", x) for k, x in site.items()}
    return sites


def _config(name: str, value: Any, sites: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    raw = v.obj(name, value)
    try:
        config = Config.from_dict(raw)
    except ConfigError as e:
        raise FieldError(name, f"is not a valid config: {e}") from None
    for sid, choice in config.items():
        site = sites.get(sid)
        if site is None:
            raise FieldError(f"{name}.{sid}", f"names a site that is not in the entry's sites {sorted(sites)[:20]}")
        wrong = misfit(
            choice, site["kind"], site["length"], site["has_ys"], checkpointed=site.get("policy") is not None
        )
        if wrong is not None:
            raise FieldError(f"{name}.{sid}.{wrong[0]}", wrong[1])
    return config.to_dict()


def _point(name: str, value: Any, sites: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    item = current_keys(v.obj(name, value))  # older entries: compile_s, run_s
    for k in ("config", "compile_cost_s", "run_cost_s"):
        if k not in item:
            raise FieldError(f"{name}.{k}", "is missing")
    out = {k: v.scalar(f"{name}.{k}", x) for k, x in item.items() if k not in _POINT_KEYS}
    out["config"] = _config(f"{name}.config", item["config"], sites)
    for k in ("compile_cost_s", "run_cost_s"):
        out[k] = v.number(f"{name}.{k}", item[k], minimum=0)
    if "confirmed" in item:
        out["confirmed"] = v.flag(f"{name}.confirmed", item["confirmed"])
    if "load_cost_s" in item:
        out["load_cost_s"] = v.number(f"{name}.load_cost_s", item["load_cost_s"], minimum=0)
    if "load_measured" in item:
        out["load_measured"] = v.flag(f"{name}.load_measured", item["load_measured"])
    for k in ("slowdown", "compile_slowdown"):
        if k in item:
            out[k] = v.number(f"{name}.{k}", item[k], minimum=1)
    if item.get("memory_bytes") is not None:
        out["memory_bytes"] = int(v.number(f"{name}.memory_bytes", item["memory_bytes"], minimum=0))
    if "rounds" in item:
        out["rounds"] = _rounds(f"{name}.rounds", item["rounds"])
    if "equivalent" in item:  # configs that lowered to this point's program (one contender)
        same = item["equivalent"]
        if not isinstance(same, list):
            raise FieldError(f"{name}.equivalent", f"must be a list of configs, not {type(same).__name__}")
        out["equivalent"] = [_config(f"{name}.equivalent[{i}]", c, sites) for i, c in enumerate(same)]
    return out


def _rounds(name: str, value: Any) -> list[list[float]]:
    if not isinstance(value, list):
        raise FieldError(name, f"must be a list of [compile_cost_s, run_cost_s] pairs, got {type(value).__name__}")
    if len(value) > MAX_ROUNDS:
        raise FieldError(name, f"holds {len(value)} rounds; the limit is {MAX_ROUNDS}")
    out = []
    for i, r in enumerate(value):
        if not isinstance(r, list) or len(r) != 2:
            raise FieldError(f"{name}[{i}]", f"must be a [compile_cost_s, run_cost_s] pair, got {v.short(r)}")
        out.append([v.number(f"{name}[{i}][{j}]", x, minimum=0) for j, x in enumerate(r)])
    return out


def _range(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    r = v.obj("complete_range", value)
    unknown = [k for k in r if k not in _RANGE_KEYS]
    if unknown:
        raise FieldError(
            f"complete_range.{unknown[0][:100]}", f"is not a range field; valid fields are {list(_RANGE_KEYS)}"
        )
    for k in _RANGE_KEYS:
        if k not in r:
            raise FieldError(f"complete_range.{k}", "is missing")
    lo = v.number("complete_range.from_calls", r["from_calls"], minimum=0)
    hi = _select.json_bound(r["to_calls"])  # math.inf as `_select.complete_range` returns it: null
    if hi is not None:
        hi = v.number("complete_range.to_calls", hi, minimum=lo)
    return {
        "from_calls": float(lo),
        "to_calls": None if hi is None else float(hi),
        "why": v.text("complete_range.why", r["why"], allow_empty=True),
    }
