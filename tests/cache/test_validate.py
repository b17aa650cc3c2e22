"""cache/_validate: every stored or imported value passes these checks, and a bad one becomes one
`FieldError` naming the field (never a traceback, never a half-read value)."""

from __future__ import annotations

import json
import math

import pytest

from autotune._errors import CacheImportError
from autotune.cache import _validate as v
from autotune.cache._validate import FieldError


def fails(call, *args, **kwargs) -> FieldError:
    with pytest.raises(FieldError) as info:
        call(*args, **kwargs)
    return info.value


def test_loads_refuses_huge_integers_and_deep_nesting_with_a_value_error():
    assert v.loads('{"n": 12, "x": [1.5, null]}') == {"n": 12, "x": [1.5, None]}
    assert v.loads("1" * v.MAX_INT_DIGITS) == int("1" * v.MAX_INT_DIGITS)
    with pytest.raises(ValueError, match=f"at most {v.MAX_INT_DIGITS} are accepted"):
        v.loads("1" * (v.MAX_INT_DIGITS + 1))
    with pytest.raises(ValueError, match="nested too deeply"):
        v.loads("[" * 100_000 + "]" * 100_000)
    with pytest.raises(json.JSONDecodeError):
        v.loads("{not json")


def test_dumps_is_canonical_and_refuses_non_finite_numbers():
    assert v.dumps({"b": 1, "a": [2, 3]}) == v.dumps({"a": [2, 3], "b": 1})
    assert json.loads(v.dumps({"b": 1, "a": [2, 3]})) == {"a": [2, 3], "b": 1}
    with pytest.raises(ValueError):
        v.dumps({"x": math.nan})


def test_text_checks_type_emptiness_length_and_control_characters():
    assert v.text("site", "outer") == "outer"
    assert v.text("note", "", allow_empty=True) == ""
    assert "must be a string, got int" in str(fails(v.text, "site", 3))
    assert "must not be empty" in str(fails(v.text, "site", ""))
    e = fails(v.text, "site", "x" * (v.MAX_TEXT + 1))
    assert e.field == "site" and f"the limit is {v.MAX_TEXT}" in e.problem
    for bad in ("a\x00b", "line\nbreak", "del\x7f", "c1\x85"):
        assert "control character" in fails(v.text, "site", bad).problem
    assert v.text("key", "ünïcode ✓") == "ünïcode ✓"  # printable non-ASCII is fine


def test_number_is_finite_not_a_bool_and_above_its_minimum():
    assert v.number("n", 3) == 3 and v.number("x", 0.5, minimum=0) == 0.5
    assert "must be a number, got bool" in str(fails(v.number, "n", True))
    assert "must be a number, got str" in str(fails(v.number, "n", "3"))
    assert "finite" in fails(v.number, "n", math.inf).problem
    assert "finite" in fails(v.number, "n", math.nan).problem
    assert "too large to be a float" in fails(v.number, "n", 10**400).problem
    assert "must be >= 0" in fails(v.number, "w", -1, minimum=0).problem


def test_flag_scalar_obj_and_numbers():
    assert v.flag("f", False) is False
    assert "true or false" in fails(v.flag, "f", 1).problem
    assert [v.scalar("s", x) for x in (None, True, "", 2.5)] == [None, True, "", 2.5]
    assert "must be a number" in fails(v.scalar, "s", [1]).problem
    assert "JSON object" in fails(v.obj, "o", [("a", 1)]).problem
    assert fails(v.obj, "o", {"a\n": 1}).field == "o key"
    assert v.numbers("m", {"a": 1, "b": None}, allow_none=True) == {"a": 1, "b": None}
    assert fails(v.numbers, "m", {"a": 1, "b": None}).field == "m.b"


def test_json_object_names_the_deepest_bad_field_and_caps_depth_and_size():
    assert v.json_object("opts", {"a": [1, {"b": "c"}]}) == {"a": [1, {"b": "c"}]}
    assert fails(v.json_object, "opts", {"a": [1, {"b": math.inf}]}).field == "opts.a[1].b"
    deep: dict = {}
    node = deep
    for _ in range(v.MAX_JSON_DEPTH):
        node["x"] = node = {}
    assert f"more than {v.MAX_JSON_DEPTH} levels" in fails(v.json_object, "opts", deep).problem
    assert "characters of JSON" in fails(v.json_object, "opts", {"a": "x" * 100}, max_chars=50).problem


def test_device_and_objective_need_every_field():
    dev = {"platform": "cpu", "device_kind": "cpu", "device_count": 1, "jax": "0.10.2", "jaxlib": "0.10.2"}
    assert v.device(dev) == dev
    missing = {k: x for k, x in dev.items() if k != "jaxlib"}
    assert fails(v.device, missing).field == "device.jaxlib"
    for count in (0, True, 1.0):
        assert fails(v.device, {**dev, "device_count": count}).field == "device.device_count"
    objective = {"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0}
    assert v.objective(objective) == objective
    assert fails(v.objective, {**objective, "compile_weight": -1}).field == "objective.compile_weight"
    assert fails(v.objective, {"expected_calls": 10}).field == "objective.compile_weight"


def test_timestamp_is_iso_8601_and_utc_now_is_one():
    now = v.utc_now()
    assert v.timestamp(now) == now and now.endswith("+00:00")
    assert "ISO-8601" in fails(v.timestamp, "yesterday").problem


def test_short_caps_a_hostile_value_for_messages():
    assert v.short("abc") == "'abc'"
    assert len(v.short("x" * 10_000)) == 80 and v.short("x" * 10_000).endswith("...")

    class Unprintable:
        def __repr__(self):
            raise ValueError("no")

    assert v.short(Unprintable()) == "<Unprintable>"


def test_checked_turns_a_field_error_into_one_import_error_naming_the_function():
    def parse(d):
        return v.number("objective.expected_calls", d["calls"])

    assert v.checked(parse, {"calls": 5, "function_key": "app:f"}, "cache entry") == 5
    with pytest.raises(CacheImportError) as info:
        v.checked(parse, {"calls": "many", "function_key": "app:f"}, "cache entry")
    message = str(info.value)
    assert message.startswith("The cache entry for function 'app:f' is invalid: field 'objective.expected_calls'")
    assert message.endswith("Fix or remove this entry.") and "\n" not in message
