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


@pytest.mark.parametrize(
    "d",
    [
        {},
        {SITE: {"repr": "scan", "unroll": 3}},
        {"x": {"repr": "for"}, "y": {"repr": "fori", "unroll": 2}, SITE: {"unroll": 8}},
    ],
)
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


@pytest.mark.parametrize(
    "entry",
    [
        "for",  # a bare string instead of a dict
        4,
        None,
        ["scan", 2],
        ("scan", 2),
    ],
    ids=["str", "int", "none", "list", "tuple"],
)
def test_non_dict_entry(entry):
    with pytest.raises(at.ConfigError) as e:
        at.Config.from_dict({SITE: entry})
    assert SITE in str(e.value)


@pytest.mark.parametrize(
    "entry",
    [
        {"repr": "scan", "unrol": 2},
        {"rep": "for"},
        {"repr": "scan", "unroll": 2, "extra": True},
    ],
)
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


@pytest.mark.parametrize(
    "entry",
    [
        {"repr": object()},
        {"unroll": object()},
        {"repr": b"scan"},
        {"unroll": {1, 2}},
        {"unroll": 2 + 0j},
    ],
    ids=["repr-object", "unroll-object", "repr-bytes", "unroll-set", "unroll-complex"],
)
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


# --- the one notation -------------------------------------------------------------------------

from autotune.program._config import (  # noqa: E402
    POLICIES,
    SiteChoice,
    choice_label,
    config_label,
    misfit,
    scan_unroll,
    site_label,
)

NOTATION = [
    (at.SiteChoice("scan", 1), "scan×1"),
    (at.SiteChoice("scan", 4), "scan×4"),
    (at.SiteChoice("for"), "for"),
    (at.SiteChoice("fori", 2), "fori×2"),
    (at.SiteChoice("while", 1), "while×1"),
    (at.SiteChoice("while", 4), "while×4"),
    (at.SiteChoice("while", 4, "select"), "while×4"),
    (at.SiteChoice("while", 8, "cond"), "while×8/cond"),
]


@pytest.mark.parametrize("choice, text", NOTATION, ids=[t for _, t in NOTATION])
def test_str_and_parse_round_trip(choice, text):
    assert str(choice) == text
    assert at.SiteChoice.parse(text) == choice
    assert at.SiteChoice.parse(text.replace("×", "x")) == choice  # ASCII x works too
    assert at.SiteChoice.parse(f"  {text.replace('×', ' x ')} ") == choice
    assert at.Config.from_dict({"s": choice.to_dict()})["s"] == choice


def test_parse_accepts_bare_names_and_an_explicit_select():
    assert at.SiteChoice.parse("scan") == at.SiteChoice("scan", 1)
    assert at.SiteChoice.parse("while") == at.SiteChoice("while", 1)
    assert at.SiteChoice.parse("while×4/select") == at.SiteChoice("while", 4)
    assert at.SiteChoice.parse("while×1/cond") == at.SiteChoice("while", 1)  # unroll 1 needs no guard


@pytest.mark.parametrize(
    "text", ["", "scanx", "scan×0", "scan×-2", "for×4", "unrolled", "scan×4/cond", "while×4/maybe", "scan*4", None, 4]
)
def test_parse_rejects_other_text_with_a_sentence(text):
    with pytest.raises(at.ConfigError) as e:
        at.SiteChoice.parse(text)
    assert repr(text) in str(e.value) or "must be text" in str(e.value)


def test_while_choices_in_configs():
    c = at.Config.from_dict(
        {
            "w": {"repr": "while", "unroll": 4},
            "v": {"repr": "while", "unroll": 2, "guard": "cond"},
            "u": {"repr": "while", "unroll": 1, "guard": "cond"},
        }
    )
    assert c.to_dict() == {
        "u": {"repr": "while", "unroll": 1},  # guard only when set
        "v": {"repr": "while", "unroll": 2, "guard": "cond"},
        "w": {"repr": "while", "unroll": 4, "guard": "select"},
    }
    assert at.Config.from_json(c.to_json()) == c
    assert str(c) == "u=while×1, v=while×2/cond, w=while×4"
    assert "guard" not in at.Config({"s": {"unroll": 2}}).to_dict()["s"]


@pytest.mark.parametrize(
    "entry",
    [
        {"repr": "scan", "unroll": 2, "guard": "cond"},
        {"repr": "for", "guard": "select"},
        {"repr": "while", "unroll": 2, "guard": "maybe"},
        {"repr": "while", "unroll": 2, "guard": 1},
    ],
)
def test_bad_guards_name_the_site(entry):
    with pytest.raises(at.ConfigError) as e:
        at.Config.from_dict({SITE: entry})
    assert SITE in str(e.value) and "guard" in str(e.value)


def test_site_choice_checks_its_guard():
    with pytest.raises(at.ConfigError):
        at.SiteChoice("scan", 2, "cond")
    with pytest.raises(at.ConfigError):
        at.SiteChoice("while", 2, "sometimes")
    assert at.SiteChoice("while", 2).guard == "select" and at.SiteChoice("while", 1, "cond").guard is None


def test_labels():
    sites = [{"id": "algo", "name": "algo"}, {"id": "algo/scan@f.py:53", "name": None}]
    config = {
        "algo/scan@f.py:53": {"repr": "scan", "unroll": 2},
        "algo": {"repr": "for"},
        "zz/while@g.py:1": {"repr": "while", "unroll": 4, "guard": "cond"},
    }
    assert config_label(config, sites) == "algo=for, scan@f.py:53=scan×2, while@g.py:1=while×4/cond"
    assert at.Config(config).label(sites) == config_label(config, sites)
    assert at.Config().label() == config_label({}) == "default"
    assert site_label(sites[1]) == "scan@f.py:53" and site_label(sites[0]) == "algo"
    assert choice_label({"repr": "fori", "unroll": 3}) == "fori×3" == choice_label(at.SiteChoice("fori", 3))
    assert choice_label({"repr": "bogus"}) == '{"repr": "bogus"}'  # a foreign record is shown, not fatal


def test_labels_take_loop_sites():
    import jax.numpy as jnp

    def f(x):
        return at.loop(lambda c, _: (c + 1.0, None), x, length=3, name="step")[0]

    sites = at.sites(f, jnp.ones(2))
    assert at.Config({"step": {"repr": "for"}}).label(sites) == "step=for"
    assert site_label(sites[0]) == "step"


def test_one_unroll_clamp():
    assert scan_unroll(at.SiteChoice("for"), 8) == 8
    assert scan_unroll(at.SiteChoice("scan", 3), 8) == 3
    assert scan_unroll(at.SiteChoice("scan", 30), 8) == 8
    assert scan_unroll(at.SiteChoice("fori", 2), 0) == 1
    assert scan_unroll(at.SiteChoice("for"), 0) == 1


# --- each rule once: the canonical text, the choice rules, which choice fits which site ----------


def test_one_canonical_json_for_configs_and_stored_cache_data():
    from autotune.cache import _validate
    from autotune.program._config import canonical_json

    c = at.Config({"b": {"repr": "for"}, "a": {"unroll": 2}})
    assert c.to_json() == canonical_json(c.to_dict()) == _validate.dumps(c.to_dict())
    assert c.to_json() == '{"a":{"repr":"scan","unroll":2},"b":{"repr":"for","unroll":1}}'
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})  # never NaN in stored JSON


@pytest.mark.parametrize(
    ("rep", "unroll", "guard", "problem"),
    [("whilst", 1, None, "repr='whilst'"), ("scan", 0, None, "unroll must be >= 1"), ("scan", 2, "cond", "a guard")],
)
def test_the_site_choice_rules_are_one_rule_whoever_reads_the_choice(rep, unroll, guard, problem):
    # A dict entry, the notation and the dataclass all refuse the same choice for the same reason.
    with pytest.raises(at.ConfigError, match=problem) as entry:
        at.Config.from_dict({SITE: {"repr": rep, "unroll": unroll, **({"guard": guard} if guard else {})}})
    assert SITE in str(entry.value)
    with pytest.raises(at.ConfigError, match=problem):
        at.SiteChoice(rep, unroll, guard)
    if rep != "whilst":  # the notation cannot even spell an unknown repr
        with pytest.raises(at.ConfigError, match=problem):
            at.SiteChoice.parse(f"{rep}×{unroll}" + (f"/{guard}" if guard else ""))
    assert at.SiteChoice("while", 4).guard == "select" and at.SiteChoice("while", 1, "cond").guard is None


def test_which_choice_fits_which_site_is_one_rule_for_the_rewrite_and_the_cache():
    from autotune.program._config import misfit

    assert misfit(at.SiteChoice("scan", 4), "scan", 8, has_ys=True) is None
    assert misfit(at.SiteChoice("for"), "loop", 8, has_ys=True) is None
    assert misfit(at.SiteChoice("fori", 2), "scan", 8, has_ys=True)[0] == "repr"
    assert misfit(at.SiteChoice("scan", 16), "scan", 8, has_ys=False)[0] == "unroll"
    assert misfit(at.SiteChoice("while", 2), "scan", 8, has_ys=False)[0] == "repr"
    assert misfit(at.SiteChoice("scan", 2), "while", None, has_ys=False)[0] == "repr"
    assert misfit(at.SiteChoice("while", 2), "while", None, has_ys=False, effects=True)[0] == "guard"
    assert misfit(at.SiteChoice("while", 2, "cond"), "while", None, has_ys=False, effects=True) is None


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("base", ["scan×4", "for", "fori×2", "while×4/cond", "while×1"])
def test_a_policy_follows_a_plus_and_round_trips_through_text_and_json(base, policy):
    choice = SiteChoice.parse(f"{base}+{policy}")
    assert choice.policy == policy and str(choice) == f"{base}+{policy}"
    assert SiteChoice.parse(str(choice).replace("×", "x").replace("+", " + ")) == choice
    assert choice.to_dict()["policy"] == policy
    config = at.Config({"s": choice})
    assert at.Config.from_json(config.to_json()) == config and str(config) == f"s={base}+{policy}"


def test_a_choice_without_policy_keeps_its_text_and_json():
    """Entries written before policies existed still parse to the same config, with the same identity."""
    assert SiteChoice.parse("scan×4").policy is None
    assert at.Config({"s": {"repr": "scan", "unroll": 4}}).to_json() == '{"s":{"repr":"scan","unroll":4}}'
    assert at.Config({"s": {"repr": "scan", "unroll": 4, "policy": None}}) == at.Config({"s": SiteChoice("scan", 4)})


@pytest.mark.parametrize("text", ["scan×4+dot", "for+", "scan×4+dots+nothing", "+dots"])
def test_an_unknown_or_malformed_policy_is_refused_by_name(text):
    with pytest.raises(at.ConfigError, match=r"policy|Cannot read"):
        SiteChoice.parse(text)
    with pytest.raises(at.ConfigError, match=r"policy='x'; valid policies are \['nothing', 'dots'"):
        at.Config({"s": {"repr": "scan", "unroll": 1, "policy": "x"}})


def test_a_policy_fits_only_a_checkpointed_site():
    choice = SiteChoice("scan", 2, policy="dots")
    assert misfit(choice, "scan", 8, has_ys=False, checkpointed=True) is None
    assert misfit(choice, "scan", 8, has_ys=False)[0] == "policy"
