"""`CacheEntry`: one tuned result, its validation, and its re-pick for another objective.

An entry is plain JSON data (never pickle). `parse_entry` is the single gate every entry
passes through, whether it comes from `Cache.put`, from a database row or from an
exported file, so anything stored can be exported and imported again. Which config an
entry names for another call count is decided by `autotune.select` (the one winner
rule), never here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune import select as _select
from autotune._errors import ConfigError
from autotune.cache import _validate as v
from autotune.cache._validate import MAX_TEXT, FieldError, utc_now
from autotune.program._config import Config, misfit
from autotune.select import Point
from autotune.select._objective import Objective
from autotune.select._point import LEGACY_KEYS

SITE_KINDS = ("scan", "loop", "while")
MAX_POINTS = 10_000
"""Most points accepted in an entry's ``pareto`` list."""
MAX_ROUNDS = 1_000
"""Most per-round samples accepted on one point."""
UNRANGED_WHY = (
    "the entry records no complete range (it was tuned before ranges were recorded), so its "
    "measurements decide only the call count it was tuned for"
)

_REQUIRED = tuple("function_key fingerprint signature device config sites measurements objective cost".split())
_OPTIONAL = ("default_cost", "pareto", "study_name", "created_at", "default_config", "complete_range", "retune")
_POINT_KEYS = tuple(
    "config compile_cost_s run_cost_s rounds confirmed equivalent load_cost_s load_measured slowdown "
    "compile_slowdown".split()
)
"""What an entry keeps of a :class:`autotune.select.Point` (older entries spell the seconds
``compile_s`` and ``run_s``: read as these, see ``Point.LEGACY_KEYS``; ``load_cost_s``, what a later
process pays with the compilation cache on, re-picks ``best --processes``; ``slowdown``, the
default's calls beside a compile, and ``compile_slowdown``, a compile beside them, re-pick with tier-up)."""
_RANGE_KEYS = ("from_calls", "to_calls", "why")


def fill_retune(template: str | None, calls: float) -> str | None:
    """A re-tune command for ``calls`` calls: ``template`` with its ``{calls}`` filled in
    (a whole number without a decimal point), or None without a template.

    Example::

        >>> fill_retune("autotune tune x.py --expected-calls {calls}", 5000.0)
        'autotune tune x.py --expected-calls 5000'
    """
    if template is None:
        return None
    c = float(calls)
    return template.replace("{calls}", str(int(c)) if c.is_integer() and abs(c) < 1e15 else repr(c))


@dataclass(frozen=True)
class CacheEntry:
    """The best config found for (function, program, input signature, device).

    Arguments:
        function_key: stable name of the function, e.g. ``"mymod:step"``.
        fingerprint: hex hash of the traced program with unrolls normalised.
        signature: canonical text of the abstract input signature.
        device: ``platform``, ``device_kind``, ``device_count``, ``jax``, ``jaxlib``.
        config: ``site_id -> choice`` (``{"repr": ..., "unroll": ...}``), the chosen config.
        sites: ``site_id -> {"kind": "scan"|"loop"|"while", "length": int (None for a
            while site), "has_ys": bool}`` for every loop site of the program.
        measurements: timings of the chosen config (``trace_s``, ``run_s``, ...).
        objective: ``expected_calls``, ``compile_weight``, ``runtime_weight`` used, and ``processes``,
            ``compilation_cache`` and ``tier_up`` where not the defaults (`Objective.to_dict`).
        cost: objective cost of ``config``.
        default_cost: objective cost of the default config, if measured.
        pareto: the confirmed points as JSON (:func:`stored_point`: ``[{"config", "compile_cost_s",
            "run_cost_s"[, "rounds": [[compile_cost_s, run_cost_s], ...]][, "confirmed": bool]}]``),
            the default's among them when ``default_config`` is set; rounds pair by index with
            the default's. :attr:`points` reads them as :class:`autotune.select.Point` values.
        study_name: name of the Optuna study that produced the entry, if any.
        created_at: ISO-8601 UTC time the entry was made.
        default_config: the explicit default config (every tunable site at its default
            choice), or None when unknown (entries of schema version 1).
        complete_range: ``{"from_calls", "to_calls" (None: unbounded), "why"}``, the call
            counts over which ``pareto`` is complete (`autotune.select.complete_range`);
            None when not recorded: then only ``objective["expected_calls"]`` counts as covered.
        retune: the command that re-tunes this entry, with a ``{calls}`` placeholder.
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
    default_config: dict | None = None
    complete_range: dict | None = None
    retune: str | None = None

    def __post_init__(self):
        if isinstance(self.complete_range, Mapping):  # `_select.complete_range` output as it is
            object.__setattr__(self, "complete_range", _select.range_json(self.complete_range))
        if isinstance(self.pareto, list):  # Points, or dicts in an older spelling: kept as current JSON
            object.__setattr__(
                self, "pareto", [stored_point(p) if isinstance(p, Point) else _renamed(p) for p in self.pareto]
            )

    @property
    def device_key(self) -> str:
        """Deterministic, readable key of `device`, e.g. ``"cpu|cpu|1|jax=0.10.2|jaxlib=0.10.2"``."""
        from autotune.program._keys import device_key  # deferred: _keys imports JAX

        return device_key(self.device)

    def to_dict(self) -> dict[str, Any]:
        """Return the entry as a JSON-able dict (the export format of one entry)."""
        return json.loads(json.dumps(dataclasses.asdict(self), allow_nan=False))

    @classmethod
    def from_dict(cls, d: Any) -> CacheEntry:
        """Build and validate an entry from `to_dict` output.

        Raises:
            CacheImportError: naming the entry's function key and the invalid field.
        """
        return v.checked(parse_entry, d, "cache entry")

    # ---------------------------------------------------------------- call counts

    @property
    def covered_range(self) -> dict[str, Any]:
        """`complete_range`, or for an entry without one the range holding only its own call count."""
        if self.complete_range is not None:
            return dict(self.complete_range)
        n = float(self.objective["expected_calls"])
        return {"from_calls": n, "to_calls": n, "why": UNRANGED_WHY}

    def covers(self, calls: float) -> bool:
        """Whether the measurements are complete for ``calls`` calls (`_select.in_range` on `covered_range`)."""
        return _select.in_range(self.covered_range, float(calls))

    def retune_command(self, calls: float) -> str | None:
        """The command that re-tunes this entry for ``calls`` calls, or None when none was recorded."""
        return fill_retune(self.retune, calls)

    @property
    def points(self) -> list[Point]:
        """``pareto`` as :class:`autotune.select.Point` values (what `_select` decides on)."""
        return [Point.from_json(p) for p in self.pareto]

    @property
    def default_point(self) -> Point | None:
        """The point of ``pareto`` measuring `default_config`, or None."""
        if self.default_config is None:
            return None
        want = Config.from_dict(self.default_config)
        return next((p for p in self.points if p.config == want), None)

    def with_choice(
        self, config: Mapping[str, Any], cost: float, objective: Mapping[str, Any] | None = None
    ) -> CacheEntry:
        """Return a copy choosing `config` at `cost` (under `objective`, if given).

        When the objective changes, `default_cost` is re-computed from the default's point
        (None when the entry has none), and an entry without `complete_range` keeps the
        range of its own call count, so the copy does not claim the new one.
        """
        changes: dict[str, Any] = {"config": dict(config), "cost": float(cost)}
        if objective is not None and dict(objective) != self.objective:
            point = self.default_point
            changes.update(
                objective=dict(objective),
                complete_range=self.covered_range,
                default_cost=None if point is None else _select.cost(point, Objective.from_dict(objective)),
            )
        return dataclasses.replace(self, **changes)

    @property
    def goal(self) -> Objective:
        """``objective`` as an `Objective` value (what `_select` and `Objective.overridden` take)."""
        return Objective.from_dict(self.objective)

    def for_objective(self, goal: Objective) -> CacheEntry:
        """Re-pick the config for another objective, without measuring, by `_select.choose`.

        Example::

            wider = entry.for_objective(entry.goal.overridden(expected_calls=1e6))
            wider.covers(1e6)  # False when the study did not measure that far

        Arguments:
            goal: the new objective; ``entry.goal.overridden(...)`` changes some figures and keeps
                the entry's others.

        Returns:
            This entry when the objective is unchanged or there are no points, else a copy
            (see `with_choice`) naming the winner of `pareto` (against `default_config`).
            Whether the new call count is covered: ``copy.covers(expected_calls)``.
        """
        objective = goal.to_dict()
        if objective == self.objective or not self.pareto:
            return self
        default = None if self.default_config is None else Config.from_dict(self.default_config)
        choice = _select.choose(self.points, goal, default=default, complete=self.covered_range)
        return self.with_choice(choice.config.to_dict(), choice.cost, objective)


def repicked(entry: CacheEntry | None, objective: Objective | None = None) -> CacheEntry | None:
    """THE re-pick of a looked-up entry, for both readers (`Cache.lookup` and the decorator's
    `_fastread.Reader.lookup`): ``entry`` re-picked for ``objective`` (`CacheEntry.for_objective`),
    as it is without one, None for no entry.

    Example::

        >>> repicked(None, Objective(expected_calls=10)) is None
        True
    """
    if entry is None or objective is None:
        return entry
    return entry.for_objective(objective)


def best_for(
    pareto: list[Mapping[str, Any]], expected_calls: float, compile_weight: float = 1.0, runtime_weight: float = 1.0
) -> dict | None:
    """The cheapest point for a call count, with no default to beat (the lower envelope).

    `autotune.select.winner` without a default (ties: cheaper just above ``expected_calls``,
    then the smaller canonical config JSON). Returns the item of ``pareto`` (an entry's JSON
    points, or `Point` values), None for an empty list.
    """
    points = _select.as_points(pareto)
    objective = Objective(expected_calls, compile_weight, runtime_weight)
    best = _select.winner(points, objective)
    return None if best is None else pareto[points.index(best)]


def _renamed(item: Any) -> Any:
    return {LEGACY_KEYS.get(k, k): x for k, x in item.items()} if isinstance(item, Mapping) else item


def stored_point(point: Point) -> dict[str, Any]:
    """What an entry's ``pareto`` keeps of a confirmed point (its JSON, the keys of ``_POINT_KEYS``)."""
    return {k: v for k, v in point.to_json().items() if k in _POINT_KEYS}


# ---------------------------------------------------------------- validation


def parse_entry(d: Any) -> CacheEntry:
    """Validate a dict and build the `CacheEntry`; raise `FieldError` on the first bad field."""
    if not isinstance(d, Mapping):
        raise FieldError("<entry>", f"must be a JSON object, got {type(d).__name__}")
    unknown = sorted((k for k in d if k not in _REQUIRED + _OPTIONAL), key=str)
    if unknown:
        raise FieldError(
            str(unknown[0])[:100], f"is not a cache entry field; valid fields are {list(_REQUIRED + _OPTIONAL)}"
        )
    for name in _REQUIRED:
        if name not in d:
            raise FieldError(name, "is missing")
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
    entry = CacheEntry(
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
    if len(entry.device_key) > MAX_TEXT:
        raise FieldError("device", f"gives a device key longer than {MAX_TEXT} characters")
    return entry


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
        wrong = misfit(choice, site["kind"], site["length"], site["has_ys"])
        if wrong is not None:
            raise FieldError(f"{name}.{sid}.{wrong[0]}", wrong[1])
    return config.to_dict()


def _point(name: str, value: Any, sites: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    item = _renamed(v.obj(name, value))  # older entries: compile_s, run_s
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
