"""Cache entries of schema version 2 (autotune/cache/_entry.py): the default config, per-round
points, the complete range, the re-tune command, while sites, and the one winner rule."""

from __future__ import annotations

import math
import re

import pytest
from _entries import OBJECTIVE, SITES, make_entry

from autotune import select as _select
from autotune._errors import CacheImportError
from autotune.cache import Cache, CacheEntry, best_for
from autotune.program import _config
from autotune.select import Point
from autotune.select._objective import Objective

DEFAULT = {"outer": {"repr": "scan", "unroll": 1}}
LUCKY = {"outer": {"repr": "scan", "unroll": 2}}
# Compile-only seconds (run_s 0): LUCKY has the lower median (2.0 < 2.5) but loses two of the
# three rounds measured side by side with the default, so the winner rule keeps the default
# while the bare lower envelope (best_for) names LUCKY.
D_ROUNDS = [[1.0, 0.0], [3.0, 0.0], [2.5, 0.0]]
L_ROUNDS = [[1.1, 0.0], [3.1, 0.0], [2.0, 0.0]]
POINTS = [
    {"config": DEFAULT, "compile_cost_s": 2.5, "run_cost_s": 0.0, "rounds": D_ROUNDS, "confirmed": True},
    {"config": LUCKY, "compile_cost_s": 2.0, "run_cost_s": 0.0, "rounds": L_ROUNDS, "confirmed": True},
]
RANGE = {"from_calls": 0.0, "to_calls": 5000.0, "why": "2 config(s) were stopped before their run time was known"}
RETUNE = "autotune tune /abs/studies/x.py --expected-calls {calls}"


def v2_entry(**changes) -> CacheEntry:
    fields = dict(
        config=DEFAULT,
        pareto=POINTS,
        default_config=DEFAULT,
        complete_range=RANGE,
        retune=RETUNE,
        cost=2.5,
        default_cost=2.5,
    )
    fields.update(changes)
    return make_entry(**fields)


def test_v2_fields_round_trip_through_dicts_and_the_database(tmp_path):
    e = v2_entry()
    assert CacheEntry.from_dict(e.to_dict()) == e
    with Cache(tmp_path / "c.db") as cache:
        cache.put(e)
        (got,) = cache.entries()
        assert got == e and got.pareto[1]["rounds"] == L_ROUNDS and got.pareto[0]["confirmed"] is True


def test_the_repick_follows_the_winner_rule_not_the_lower_envelope(tmp_path):
    e = v2_entry()
    other = e.for_objective(e.goal.overridden(expected_calls=10))
    assert other.config == DEFAULT  # LUCKY's median is lower, but it loses most paired rounds
    assert best_for(e.pareto, 10)["config"] == LUCKY  # the public envelope, without a default
    goal = Objective.from_dict(other.objective)
    choice = _select.choose(e.points, goal, default=_config.Config(DEFAULT), complete=RANGE)
    assert (other.config, other.cost) == (choice.config.to_dict(), choice.cost)
    assert other.default_cost == _select.cost(Point.from_json(POINTS[0]), goal)  # re-computed, not dropped
    assert e.for_objective(e.goal.overridden(expected_calls=OBJECTIVE["expected_calls"])) is e
    cache = Cache(tmp_path / "c.db")
    cache.put(e)
    goal = e.goal.overridden(expected_calls=10)
    assert cache.lookup(e.function_key, e.fingerprint, e.signature, e.device_key, objective=goal) == other
    without_default = v2_entry(default_config=None)
    assert without_default.for_objective(without_default.goal.overridden(expected_calls=10)).config == LUCKY


def test_covers_and_retune_command_follow_the_complete_range():
    e = v2_entry()
    assert e.covers(0) and e.covers(5000) and not e.covers(5001)
    assert e.for_objective(e.goal.overridden(expected_calls=1e6)).covers(1e6) is False
    assert e.retune_command(20000) == "autotune tune /abs/studies/x.py --expected-calls 20000"
    assert e.retune_command(2.5) == "autotune tune /abs/studies/x.py --expected-calls 2.5"
    unbounded = v2_entry(complete_range={"from_calls": 0.0, "to_calls": math.inf, "why": "all measured"})
    assert unbounded.complete_range["to_calls"] is None and unbounded.covers(1e30)
    assert v2_entry(retune=None).retune_command(10) is None


def test_an_entry_without_a_range_covers_only_its_own_call_count():
    e = make_entry(pareto=[{"config": DEFAULT, "compile_s": 1.0, "run_s": 1e-3}], config=DEFAULT)
    assert e.complete_range is None and e.covers(1000) and not e.covers(999) and not e.covers(1001)
    moved = e.for_objective(e.goal.overridden(expected_calls=50))
    # the copy keeps the range of the call count that was tuned, not the one asked for
    assert moved.complete_range["from_calls"] == moved.complete_range["to_calls"] == 1000
    assert not moved.covers(50) and "no complete range" in e.covered_range["why"]


def test_while_sites_take_a_null_length_and_only_while_choices():
    sites = {**SITES, "w": {"kind": "while", "length": None, "has_ys": False}}
    e = make_entry(sites=sites)
    assert CacheEntry.from_dict(e.to_dict()).sites["w"]["length"] is None
    bad = {**e.to_dict(), "sites": {**SITES, "s": {"kind": "scan", "length": None, "has_ys": False}}}
    with pytest.raises(CacheImportError, match=r"'sites.s.length' must be a non-negative integer"):
        CacheEntry.from_dict(bad)
    wrong_kind = {**e.to_dict(), "config": {"w": {"repr": "scan", "unroll": 2}}}
    with pytest.raises(CacheImportError, match=r"'config.w.repr' \"scan\" does not fit a site of kind \"while\""):
        CacheEntry.from_dict(wrong_kind)


@pytest.mark.skipif(
    "while" not in getattr(_config, "REPRS", ()),
    reason="Config.from_dict does not know while choices yet (they come with while_loop sites)",
)
def test_a_while_choice_is_validated_by_config_and_the_site():
    sites = {**SITES, "w": {"kind": "while", "length": None, "has_ys": False}}
    choice = {"w": {"repr": "while", "unroll": 4, "guard": "cond"}}
    e = make_entry(sites=sites, config=choice)
    assert CacheEntry.from_dict(e.to_dict()).config == choice  # no length: any unroll
    with pytest.raises(CacheImportError, match=r"'config.outer.repr' \"while\" does not fit"):
        CacheEntry.from_dict({**e.to_dict(), "config": {"outer": {"repr": "while", "unroll": 2, "guard": "select"}}})


BAD = {
    "default not a point": (
        {"default_config": {"outer": {"repr": "for", "unroll": 1}}},
        "'default_config' is not the config of any point",
    ),
    "default bad site": ({"default_config": {"ghost": {"repr": "scan", "unroll": 1}}}, "'default_config.ghost'"),
    "round not a pair": ({"pareto": [{**POINTS[0], "rounds": [[1.0]]}, POINTS[1]]}, r"'pareto\[0\].rounds\[0\]'"),
    "round negative": (
        {"pareto": [{**POINTS[0], "rounds": [[1.0, -1.0]]}, POINTS[1]]},
        r"'pareto\[0\].rounds\[0\]\[1\]' must be >= 0",
    ),
    "rounds not a list": ({"pareto": [{**POINTS[0], "rounds": "many"}, POINTS[1]]}, "must be a list of"),
    "too many rounds": ({"pareto": [{**POINTS[0], "rounds": [[1.0, 0.0]] * 1001}, POINTS[1]]}, "the limit is 1000"),
    "confirmed not bool": ({"pareto": [{**POINTS[0], "confirmed": "yes"}, POINTS[1]]}, "must be true or false"),
    "range inverted": (
        {"complete_range": {**RANGE, "from_calls": 10.0, "to_calls": 5.0}},
        "'complete_range.to_calls' must be >= 10",
    ),
    "range missing why": ({"complete_range": {"from_calls": 0.0, "to_calls": None}}, "'complete_range.why' is missing"),
    "range extra": ({"complete_range": {**RANGE, "colour": 1}}, "'complete_range.colour' is not a range field"),
    "range nan": ({"complete_range": {**RANGE, "from_calls": math.nan}}, "must be a finite number"),
    "retune without placeholder": ({"retune": "autotune tune x.py"}, "placeholder {calls}"),
    "retune control char": ({"retune": "autotune tune x.py {calls}\n"}, "control character"),
    "huge int cost": ({"cost": 10**400}, "'cost' is a number too large"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_invalid_v2_fields_are_refused_by_name(case):
    changes, words = BAD[case]
    with pytest.raises(CacheImportError) as info:
        CacheEntry.from_dict({**v2_entry().to_dict(), **changes})
    assert re.search(words, str(info.value)), str(info.value)


def test_a_point_keeps_the_configs_that_lowered_to_its_program(tmp_path):
    fori2 = {"outer": {"repr": "scan", "unroll": 2}, "inner": {"repr": "fori", "unroll": 2}}
    points = [dict(POINTS[0]), {**POINTS[1], "equivalent": [fori2]}]
    e = v2_entry(pareto=points)
    assert CacheEntry.from_dict(e.to_dict()).pareto[1]["equivalent"] == [fori2]
    with Cache(tmp_path / "c.db") as cache:
        cache.put(e)
        (got,) = cache.entries()
        assert got.pareto[1]["equivalent"] == [fori2]
    bad = [dict(POINTS[0]), {**POINTS[1], "equivalent": [{"nosuch": {"repr": "scan", "unroll": 2}}]}]
    with pytest.raises(CacheImportError, match=r"pareto\[1\]\.equivalent\[0\]"):
        CacheEntry.from_dict(v2_entry(pareto=bad).to_dict())
    with pytest.raises(CacheImportError, match=r"'pareto\[1\]\.equivalent' must be a list of configs"):
        CacheEntry.from_dict(v2_entry(pareto=[dict(POINTS[0]), {**POINTS[1], "equivalent": "scan×2"}]).to_dict())


def test_an_entry_in_the_older_spelling_still_reads_from_the_database_and_an_export(tmp_path):
    # Versions before the typed Point stored a point's charged seconds as "compile_s" / "run_s".
    import json
    import sqlite3

    from autotune.cache._layout import ENTRIES_TABLE

    old_points = [
        {"config": DEFAULT, "compile_s": 2.5, "run_s": 0.0, "rounds": D_ROUNDS, "confirmed": True},
        {"config": LUCKY, "compile_s": 2.0, "run_s": 0.0, "rounds": L_ROUNDS, "confirmed": True},
    ]
    new = v2_entry()
    db = tmp_path / "old.db"
    with Cache(db) as cache:
        cache.put(new)
    with sqlite3.connect(db) as con:  # the row as an older version wrote it
        con.execute(f"UPDATE {ENTRIES_TABLE} SET pareto = ?", (json.dumps(old_points),))
    with Cache(db) as cache:
        (got,) = cache.entries()
        assert got == new and got.points == [Point.from_json(p) for p in POINTS]
        # the winner rule reads its rounds
        assert got.for_objective(got.goal.overridden(expected_calls=10)).config == DEFAULT
    # An export file of an older version: the same entry.
    doc = {**new.to_dict(), "pareto": old_points}
    assert CacheEntry.from_dict(doc) == new
    path = tmp_path / "old_export.json"
    with Cache(tmp_path / "source.db") as source:
        source.put(new)
        source.export_json(path)
    exported = json.loads(path.read_text())
    exported["entries"][0]["pareto"] = old_points
    path.write_text(json.dumps(exported))
    with Cache(tmp_path / "imported.db") as cache:
        cache.import_json(path)
        (got,) = cache.entries()
        assert got == new
