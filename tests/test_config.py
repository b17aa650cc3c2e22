"""at.Config: parsing, validation, value semantics and the JSON round trip."""

import json
import math

import pytest

import autotune as at

SITE = "outer/scan@model.py:12"


def test_from_dict_fills_defaults_and_to_dict_is_complete():
    c = at.Config.from_dict({"a": {"repr": "for"}, "b": {"unroll": 4}, "c": {}})
    assert c.to_dict() == {
        "a": {"repr": "for", "unroll": 1},
        "b": {"repr": "scan", "unroll": 4},
        "c": {"repr": "scan", "unroll": 1},
    }
    assert c["b"].repr == "scan" and c["b"].unroll == 4
    assert set(c) == {"a", "b", "c"} and len(c) == 3


@pytest.mark.parametrize("d", [
    {},
    {SITE: {"repr": "scan", "unroll": 3}},
    {"x": {"repr": "for"}, "y": {"repr": "fori", "unroll": 2}, SITE: {"unroll": 8}},
])
def test_json_round_trip(d):
    c = at.Config.from_dict(d)
    text = json.dumps(c.to_dict())
    back = at.Config.from_dict(json.loads(text))
    assert back == c and hash(back) == hash(c) and str(back) == str(c)
    assert at.Config.from_json(c.to_json()) == c
    assert json.loads(c.to_json()) == c.to_dict()
    assert at.Config.from_dict(c.to_dict()).to_dict() == c.to_dict()


def test_equality_and_hash_by_value_not_insertion_order():
    d1 = {"b": {"repr": "for"}, "a": {"unroll": 2}}
    d2 = {"a": {"repr": "scan", "unroll": 2}, "b": {"repr": "for", "unroll": 1}}
    c1, c2 = at.Config.from_dict(d1), at.Config(d2)
    assert c1 == c2 and not (c1 != c2)
    assert hash(c1) == hash(c2)
    assert str(c1) == str(c2) and repr(c1) == repr(c2)
    assert c1.to_json() == c2.to_json()
    assert len({c1, c2}) == 1
    assert {c1: "seen"}[c2] == "seen"
    assert c1 == d2  # a Config equals the dict it was made from


def test_different_configs_differ():
    base = at.Config({"a": {"unroll": 2}})
    others = [
        at.Config({"a": {"unroll": 4}}),
        at.Config({"a": {"repr": "for"}}),
        at.Config({"a": {"repr": "fori", "unroll": 2}}),
        at.Config({"b": {"unroll": 2}}),
        at.Config({"a": {"unroll": 2}, "b": {"unroll": 2}}),
        at.Config(),
    ]
    for other in others:
        assert other != base
        assert str(other) != str(base)
    assert len({base, *others}) == len(others) + 1


def test_str_is_deterministic_and_names_every_site():
    c = at.Config({"zeta": {"unroll": 3}, "alpha": {"repr": "for"}, SITE: {"repr": "fori", "unroll": 2}})
    s = str(c)
    assert s == str(at.Config(dict(reversed(list(c.to_dict().items())))))
    for site_id in c:
        assert site_id in s


def test_from_dict_accepts_a_config_and_none():
    c = at.Config({"a": {"unroll": 2}})
    assert at.Config.from_dict(c) == c
    assert at.Config.from_dict(None) == at.Config() == {}
    assert len(at.Config.from_dict(None)) == 0


def test_config_is_immutable():
    c = at.Config({"a": {"unroll": 2}})
    with pytest.raises(TypeError):
        c["a"] = {"unroll": 3}
    with pytest.raises((AttributeError, TypeError)):
        c.unrelated = 1
    d = {"a": {"unroll": 2}}
    c = at.Config(d)
    d["a"]["unroll"] = 5
    assert c["a"].unroll == 2


# --- validation: every error is a ConfigError that names the site ---------------------


@pytest.mark.parametrize("entry", [
    "for",                      # a bare string instead of a dict
    4,
    None,
    ["scan", 2],
    ("scan", 2),
], ids=["str", "int", "none", "list", "tuple"])
def test_non_dict_entry(entry):
    with pytest.raises(at.ConfigError) as e:
        at.Config.from_dict({SITE: entry})
    assert SITE in str(e.value)


@pytest.mark.parametrize("entry", [
    {"repr": "scan", "unrol": 2},
    {"rep": "for"},
    {"repr": "scan", "unroll": 2, "extra": True},
])
def test_unknown_keys(entry):
    with pytest.raises(at.ConfigError) as e:
        at.Config.from_dict({SITE: entry})
    msg = str(e.value)
    assert SITE in msg
    assert any(k in msg for k in set(entry) - {"repr", "unroll"})


@pytest.mark.parametrize("rep", ["whilst", "Scan", "", None, 1, ["scan"], {"scan": 1}])
def test_bad_repr(rep):
    with pytest.raises(at.ConfigError) as e:
        at.Config.from_dict({SITE: {"repr": rep}})
    msg = str(e.value)
    assert SITE in msg
    assert all(r in msg for r in ("scan", "for", "fori", "while"))  # names the valid choices


@pytest.mark.parametrize("unroll", [0, -1, -8])
def test_unroll_below_one(unroll):
    with pytest.raises(at.ConfigError) as e:
        at.Config.from_dict({SITE: {"repr": "scan", "unroll": unroll}})
    assert SITE in str(e.value)


@pytest.mark.parametrize("unroll", [2.5, "2", None, True, False, math.nan, math.inf, [2], {"n": 2}])
def test_non_integer_unroll(unroll):
    with pytest.raises(at.ConfigError) as e:
        at.Config.from_dict({SITE: {"unroll": unroll}})
    assert SITE in str(e.value)


@pytest.mark.parametrize("entry", [
    {"repr": object()},
    {"unroll": object()},
    {"repr": b"scan"},
    {"unroll": {1, 2}},
    {"unroll": 2 + 0j},
], ids=["repr-object", "unroll-object", "repr-bytes", "unroll-set", "unroll-complex"])
def test_non_json_values(entry):
    with pytest.raises(at.ConfigError) as e:
        at.Config.from_dict({SITE: entry})
    assert SITE in str(e.value)


@pytest.mark.parametrize("key", [1, None, "", ("a",)])
def test_bad_site_id_keys(key):
    with pytest.raises(at.ConfigError):
        at.Config.from_dict({key: {"repr": "scan"}})


@pytest.mark.parametrize("d", [[("a", {"repr": "for"})], "a", 3])
def test_config_must_be_a_mapping(d):
    with pytest.raises(at.ConfigError):
        at.Config.from_dict(d)


def test_malformed_json():
    with pytest.raises(at.ConfigError):
        at.Config.from_json('{"a": {"repr": "for"')
    with pytest.raises(at.ConfigError):
        at.Config.from_json('["a"]')


def test_config_error_is_a_value_error_and_an_autotune_error():
    with pytest.raises(ValueError):
        at.Config.from_dict({SITE: {"repr": "whilst"}})
    assert issubclass(at.ConfigError, at.AutotuneError)


def test_equality_with_an_invalid_dict_is_false_not_an_error():
    assert at.Config({"a": {"unroll": 2}}) != {"a": {"unroll": 0}}
    assert at.Config() != 3
