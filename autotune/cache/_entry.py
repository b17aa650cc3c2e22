"""`CacheEntry`: one tuned result, its validation, and `best_for` over a Pareto front.

An entry is plain JSON data (never pickle). `CacheEntry.from_dict` is the single
gate every entry passes through, whether it comes from `Cache.put`, from a
database row or from an exported file, so anything stored can be exported and
imported again.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .._config import Config
from .._errors import CacheImportError, ConfigError

MAX_TEXT = 4096
"""Longest accepted key, site id or study name, in characters."""

DEVICE_FIELDS = ("platform", "device_kind", "device_count", "jax", "jaxlib")
OBJECTIVE_FIELDS = ("expected_calls", "compile_weight", "runtime_weight")
SITE_KINDS = ("scan", "loop")

_REQUIRED = ("function_key", "fingerprint", "signature", "device", "config", "sites",
             "measurements", "objective", "cost")
_OPTIONAL = ("default_cost", "pareto", "study_name", "created_at")


def utc_now() -> str:
    """Return the current time as ISO-8601 text in UTC, e.g. ``2025-01-31T12:00:00.000000+00:00``."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def config_text(config: Mapping[str, Any]) -> str:
    """Return the canonical JSON text of a config dict (sorted keys, no spaces)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


class EntryError(ValueError):
    """One field of an entry is invalid (internal; callers turn it into a `CacheError`).

    Arguments:
        field: dotted path of the bad field, e.g. ``"config.outer.unroll"``.
        problem: what is wrong, as a sentence fragment.
    """

    def __init__(self, field: str, problem: str):
        super().__init__(f"field {field!r} {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class CacheEntry:
    """The best config found for (function, program, input signature, device).

    Arguments:
        function_key: stable name of the function, e.g. ``"mymod:step"``.
        fingerprint: hex hash of the traced program with unrolls normalised.
        signature: canonical text of the abstract input signature.
        device: ``platform``, ``device_kind``, ``device_count``, ``jax``, ``jaxlib``.
        config: ``site_id -> {"repr": ..., "unroll": ...}``, the chosen config.
        sites: ``site_id -> {"kind": "scan"|"loop", "length": int, "has_ys": bool}``
            for every loop site of the program.
        measurements: timings of the chosen config (``trace_s``, ``run_s``, ...).
        objective: ``expected_calls``, ``compile_weight``, ``runtime_weight`` used.
        cost: objective cost of ``config``.
        default_cost: objective cost of the default config, if measured.
        pareto: ``[{"config": ..., "compile_s": ..., "run_s": ...}]``, the configs not
            dominated in (trace+lower+compile seconds, run seconds); may be empty.
        study_name: name of the Optuna study that produced the entry, if any.
        created_at: ISO-8601 UTC time the entry was made.
    """

    function_key: str
    fingerprint: str
    signature: str
    device: dict
    config: dict
    sites: dict
    measurements: dict
    objective: dict
    cost: float
    default_cost: float | None = None
    pareto: list = field(default_factory=list)
    study_name: str | None = None
    created_at: str = field(default_factory=utc_now)

    @property
    def device_key(self) -> str:
        """Deterministic, readable key of `device`, e.g. ``"cpu|cpu|1|jax=0.10.2|jaxlib=0.10.2"``."""
        return device_key(self.device)

    def to_dict(self) -> dict[str, Any]:
        """Return the entry as a JSON-able dict (the export format of one entry)."""
        return json.loads(json.dumps(dataclasses.asdict(self), allow_nan=False))

    @classmethod
    def from_dict(cls, d: Any) -> CacheEntry:
        """Build and validate an entry from `to_dict` output.

        Arguments:
            d: a dict as produced by `to_dict` (e.g. parsed from an export file).

        Returns:
            The entry, with its configs normalised (defaults filled in).

        Raises:
            CacheImportError: naming the entry's function key and the invalid field.
        """
        try:
            return parse_entry(d)
        except EntryError as e:
            name = d.get("function_key") if isinstance(d, Mapping) else None
            who = f" for function {name!r}" if isinstance(name, str) else ""
            raise CacheImportError(
                f"The cache entry{who} is invalid: {e}. Fix or remove this entry."
            ) from None

    def with_choice(self, config: Mapping[str, Any], cost: float,
                    objective: Mapping[str, Any] | None = None) -> CacheEntry:
        """Return a copy choosing `config` at `cost` (under `objective`, if given).

        Arguments:
            config: the config dict to choose (normally one of `pareto`).
            cost: its cost under the (new) objective.
            objective: the objective the cost was computed under; None keeps the current one.

        Returns:
            A new entry; `default_cost` becomes None when the objective changes, since
            it was computed under the old objective.
        """
        changes: dict[str, Any] = {"config": dict(config), "cost": float(cost)}
        if objective is not None and dict(objective) != self.objective:
            changes["objective"] = dict(objective)
            changes["default_cost"] = None
        return dataclasses.replace(self, **changes)

    def for_objective(self, expected_calls: float | None = None, compile_weight: float | None = None,
                      runtime_weight: float | None = None) -> CacheEntry:
        """Re-pick the config from the Pareto front for another objective, without measuring.

        Arguments:
            expected_calls, compile_weight, runtime_weight: the new objective; None keeps
                the entry's own value.

        Returns:
            This entry when the objective is unchanged or there is no front, else a copy
            (see `with_choice`) choosing the front's cheapest config.
        """
        objective = dict(self.objective)
        for name, value in (("expected_calls", expected_calls), ("compile_weight", compile_weight),
                            ("runtime_weight", runtime_weight)):
            if value is not None:
                objective[name] = value
        if objective == self.objective or not self.pareto:
            return self
        weights = (objective["expected_calls"], objective["compile_weight"], objective["runtime_weight"])
        item = best_for(self.pareto, *weights)
        return self.with_choice(item["config"], pareto_cost(item, *weights), objective)


def device_key(device: Mapping[str, Any]) -> str:
    """Return ``"platform|device_kind|device_count|jax=V|jaxlib=V"`` for a device dict.

    Arguments:
        device: a dict with the keys in `DEVICE_FIELDS`.

    Returns:
        The key text; only those five fields take part in it.
    """
    p, kind, count, jax_v, jaxlib_v = (device.get(k) for k in DEVICE_FIELDS)
    return f"{p}|{kind}|{count}|jax={jax_v}|jaxlib={jaxlib_v}"


def pareto_cost(item: Mapping[str, Any], expected_calls: float,
                compile_weight: float = 1.0, runtime_weight: float = 1.0) -> float:
    """Return ``compile_weight * compile_s + runtime_weight * expected_calls * run_s`` of a pareto item."""
    return compile_weight * item["compile_s"] + runtime_weight * expected_calls * item["run_s"]


def best_for(pareto: list[Mapping[str, Any]], expected_calls: float,
             compile_weight: float = 1.0, runtime_weight: float = 1.0) -> dict | None:
    """Pick the pareto item with the lowest cost for a given call count.

    Arguments:
        pareto: items ``{"config": {...}, "compile_s": float, "run_s": float}``.
        expected_calls: how many times the compiled function will run.
        compile_weight: weight of the compile seconds.
        runtime_weight: weight of the run seconds (times `expected_calls`).

    Returns:
        The cheapest item (ties broken by the config's canonical JSON text), or None
        when `pareto` is empty.
    """
    if not pareto:
        return None
    best = min(pareto, key=lambda it: (
        pareto_cost(it, expected_calls, compile_weight, runtime_weight), config_text(it["config"])))
    return dict(best)


# ---------------------------------------------------------------- validation

def parse_entry(d: Any) -> CacheEntry:
    """Validate a dict and build the `CacheEntry`; raise `EntryError` on the first bad field."""
    if not isinstance(d, Mapping):
        raise EntryError("<entry>", f"must be a JSON object, got {type(d).__name__}")
    unknown = sorted(set(d) - set(_REQUIRED) - set(_OPTIONAL), key=str)
    if unknown:
        raise EntryError(str(unknown[0]), f"is not a cache entry field; valid fields are "
                         f"{list(_REQUIRED + _OPTIONAL)}")
    for name in _REQUIRED:
        if name not in d:
            raise EntryError(name, "is missing")
    sites = _sites(d["sites"])
    pareto = d.get("pareto", [])
    if not isinstance(pareto, list):
        raise EntryError("pareto", f"must be a list, got {type(pareto).__name__}")
    study_name = d.get("study_name")
    default_cost = d.get("default_cost")
    entry = CacheEntry(
        function_key=_text("function_key", d["function_key"]),
        fingerprint=_text("fingerprint", d["fingerprint"]),
        signature=_text("signature", d["signature"], allow_empty=True),
        device=_device(d["device"]),
        config=_config("config", d["config"], sites),
        sites=sites,
        measurements=_numbers("measurements", d["measurements"], allow_none=True),
        objective=_objective(d["objective"]),
        cost=_number("cost", d["cost"]),
        default_cost=None if default_cost is None else _number("default_cost", default_cost),
        pareto=[_pareto_item(f"pareto[{i}]", it, sites) for i, it in enumerate(pareto)],
        study_name=None if study_name is None else _text("study_name", study_name),
        created_at=_timestamp(d.get("created_at", utc_now())),
    )
    if len(entry.device_key) > MAX_TEXT:
        raise EntryError("device", f"gives a device key longer than {MAX_TEXT} characters")
    return entry


def _text(name: str, value: Any, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise EntryError(name, f"must be a string, got {type(value).__name__}")
    if not value and not allow_empty:
        raise EntryError(name, "must not be empty")
    if len(value) > MAX_TEXT:
        raise EntryError(name, f"is {len(value)} characters long; the limit is {MAX_TEXT}")
    bad = next((c for c in value if ord(c) < 32 or 127 <= ord(c) < 160), None)
    if bad is not None:
        raise EntryError(name, f"contains the control character {bad!r}; use printable text")
    return value


def _number(name: str, value: Any, *, minimum: float | None = None) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EntryError(name, f"must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise EntryError(name, f"must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise EntryError(name, f"must be >= {minimum}, got {value!r}")
    return value


def _object(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise EntryError(name, f"must be a JSON object, got {type(value).__name__}")
    for k in value:
        _text(f"{name} key", k)
    return value


def _scalar(name: str, value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _text(name, value, allow_empty=True)
    return _number(name, value)


def _numbers(name: str, value: Any, *, allow_none: bool = False) -> dict[str, Any]:
    out = {}
    for k, v in _object(name, value).items():
        out[k] = None if (v is None and allow_none) else _number(f"{name}.{k}", v)
    return out


def _device(value: Any) -> dict[str, Any]:
    dev = {k: _scalar(f"device.{k}", v) for k, v in _object("device", value).items()}
    for k in DEVICE_FIELDS:
        if k not in dev:
            raise EntryError(f"device.{k}", "is missing")
    for k in ("platform", "device_kind", "jax", "jaxlib"):
        _text(f"device.{k}", dev[k])
    count = dev["device_count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise EntryError("device.device_count", f"must be a positive integer, got {count!r}")
    return dev


def _objective(value: Any) -> dict[str, Any]:
    obj = {k: _number(f"objective.{k}", v, minimum=0) for k, v in _object("objective", value).items()}
    for k in OBJECTIVE_FIELDS:
        if k not in obj:
            raise EntryError(f"objective.{k}", "is missing")
    return obj


def _sites(value: Any) -> dict[str, dict[str, Any]]:
    sites = {}
    for sid, site in _object("sites", value).items():
        where = f"sites.{sid}"
        site = dict(_object(where, site))
        for k in ("kind", "length", "has_ys"):
            if k not in site:
                raise EntryError(f"{where}.{k}", "is missing")
        if site["kind"] not in SITE_KINDS:
            raise EntryError(f"{where}.kind", f"must be one of {list(SITE_KINDS)}, got {site['kind']!r}")
        length = site["length"]
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise EntryError(f"{where}.length", f"must be a non-negative integer, got {length!r}")
        if not isinstance(site["has_ys"], bool):
            raise EntryError(f"{where}.has_ys", f"must be true or false, got {site['has_ys']!r}")
        sites[sid] = {k: _scalar(f"{where}.{k}", v) for k, v in site.items()}
    return sites


def _config(name: str, value: Any, sites: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    raw = _object(name, value)
    try:
        config = Config.from_dict(raw)
    except ConfigError as e:
        raise EntryError(name, f"is not a valid config: {e}") from None
    for sid, choice in config.items():
        site = sites.get(sid)
        if site is None:
            raise EntryError(f"{name}.{sid}", f"names a site that is not in the entry's sites "
                             f"{sorted(sites)}")
        limit = max(site["length"], 1)
        if choice.unroll > limit:
            raise EntryError(f"{name}.{sid}.unroll", f"is {choice.unroll}, more than the site's "
                             f"length {site['length']}")
        if choice.repr == "fori" and site["has_ys"]:
            raise EntryError(f"{name}.{sid}.repr", '"fori" is not valid for a site with stacked '
                             'outputs (has_ys); use "scan" or "for"')
    return config.to_dict()


def _pareto_item(name: str, value: Any, sites: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    item = _object(name, value)
    for k in ("config", "compile_s", "run_s"):
        if k not in item:
            raise EntryError(f"{name}.{k}", "is missing")
    out = {k: _scalar(f"{name}.{k}", v) for k, v in item.items() if k != "config"}
    out["config"] = _config(f"{name}.config", item["config"], sites)
    out["compile_s"] = _number(f"{name}.compile_s", item["compile_s"], minimum=0)
    out["run_s"] = _number(f"{name}.run_s", item["run_s"], minimum=0)
    return out


def _timestamp(value: Any) -> str:
    text = _text("created_at", value)
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise EntryError("created_at", f"must be ISO-8601 text like {utc_now()!r}, got {text!r}") from None
    return text
