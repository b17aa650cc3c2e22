"""`CacheEntry`: one tuned result, and its re-pick for another objective.

An entry is plain JSON data (never pickle). `parse_entry` is the single gate every entry
passes through (its fields validated by `_entry_fields`), whether it comes from `Cache.put`, from
a database row or from an exported file, so anything stored can be exported and imported again. Which config an
entry names for another call count is decided by `autotune.select` (the one winner
rule), never here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune import select as _select
from autotune.cache import _validate as v
from autotune.cache._entry_fields import current_keys, entry_fields, stored_point
from autotune.cache._validate import MAX_TEXT, FieldError, utc_now
from autotune.program._config import Config
from autotune.select import Point
from autotune.select._objective import Objective

UNRANGED_WHY = (
    "the entry records no complete range (it was tuned before ranges were recorded), so its "
    "measurements decide only the call count it was tuned for"
)


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
class CacheEntry(v.Record):
    """The best config found for (function, program, input signature, device).

    Arguments:
        function_key: stable name of the function, e.g. ``"mymod:step"``.
        fingerprint: hex hash of the traced program with unrolls normalised.
        signature: canonical text of the abstract input signature.
        device: ``platform``, ``device_kind``, ``device_count``, ``jax``, ``jaxlib``.
        config: ``site_id -> choice`` (``{"repr": ..., "unroll": ...}``), the chosen config.
        sites: ``site_id -> {"kind": "scan"|"loop"|"while", "length": int (None for a
            while site), "has_ys": bool}`` for every loop site of the program, with ``"policy"``
            (its own rematerialisation policy) for a site whose body is checkpointed.
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
    NOUN = "cache entry"

    def __post_init__(self):
        if isinstance(self.complete_range, Mapping):  # `_select.complete_range` output as it is
            object.__setattr__(self, "complete_range", _select.range_json(self.complete_range))
        if isinstance(self.pareto, list):  # Points, or dicts in an older spelling: kept as current JSON
            object.__setattr__(
                self, "pareto", [stored_point(p) if isinstance(p, Point) else current_keys(p) for p in self.pareto]
            )

    @classmethod
    def parse(cls, d: Any) -> CacheEntry:
        return parse_entry(d)

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


def parse_entry(d: Any) -> CacheEntry:
    """Validate a dict and build the `CacheEntry`; raise `FieldError` on the first bad field
    (`_entry_fields.entry_fields`, the one gate)."""
    entry = CacheEntry(**entry_fields(d))
    if len(entry.device_key) > MAX_TEXT:
        raise FieldError("device", f"gives a device key longer than {MAX_TEXT} characters")
    return entry
