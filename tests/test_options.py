"""`at.TuneOptions`: one frozen value for a run's options, and the keyword split of
``fn.tune`` / ``at.tune`` (an unknown keyword is one sentence naming the nearest option)."""

import dataclasses
import warnings

import jax.numpy as jnp
import pytest

import autotune as at
from autotune._options import OPTION_NAMES, Plumbing, split_keywords


def smooth_fn(x, scale=1.0):
    return at.loop(lambda c, _: (0.5 * c * scale + 1.0, None), x, length=8, name="smooth")[0]


def test_defaults_and_short_string_form():
    opts = at.TuneOptions()
    assert (opts.n_trials, opts.sampler, opts.search, opts.isolate, opts.confirm_top) == (
        None,
        "auto",
        "cost",
        "auto",
        3,
    )
    assert str(opts) == "TuneOptions()"
    changed = at.TuneOptions(timing={"target_s": 0.01, "min_reps": 3}, search="pareto", n_trials=8)
    # field order, defaults left out, a mapping with sorted keys: the same options read the same
    assert str(changed) == "TuneOptions(n_trials=8, search='pareto', timing={'min_reps': 3, 'target_s': 0.01})"
    assert changed == at.TuneOptions(n_trials=8, search="pareto", timing={"target_s": 0.01, "min_reps": 3})
    assert hash(changed) == hash(at.TuneOptions(n_trials=8, search="pareto", timing={"min_reps": 3, "target_s": 0.01}))


def test_frozen_and_replace_validates():
    opts = at.TuneOptions(n_trials=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.n_trials = 5
    timing = {"target_s": 0.01}
    held = at.TuneOptions(timing=timing)
    timing["target_s"] = 9.0  # the caller's dict changing later does not change the options
    assert held.timing.target_s == 0.01 and held.timing.to_dict() == {"target_s": 0.01}
    assert opts.replace(sampler="grid") == at.TuneOptions(n_trials=4, sampler="grid")
    with pytest.raises(at.StudyError, match="sampler='bogus' is not one of"):
        opts.replace(sampler="bogus")


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"n_trials": 0}, "n_trials=0 must be a positive integer"),
        ({"n_trials": True}, "n_trials=True must be a positive integer"),
        ({"search": "fastest"}, "search='fastest' is not one of"),
        ({"isolate": "yes"}, "isolate='yes' must be 'auto', True or False"),
        ({"isolate": 1}, "isolate=1 must be 'auto', True or False"),
        ({"confirm_rounds": 0}, "confirm_rounds=0 must be a positive integer"),
        ({"trial_timeout": 0}, "trial_timeout=0 must be a number of seconds > 0"),
        ({"trial_memory_gb": -1.0}, "trial_memory_gb=-1.0 must be a number of GiB > 0"),
        ({"timing": 0.5}, "timing=0.5 must be a dict"),
        ({"tier_up": "yes"}, "tier_up='yes' must be True or False"),
    ],
)
def test_bad_options_are_one_sentence(bad, message):
    with pytest.raises(at.StudyError, match=message) as info:
        at.TuneOptions(**bad)
    text = str(info.value)
    assert "\n" not in text and text.endswith(".")


def test_tier_up_turns_the_objectives_tier_up_on_and_names_the_study_apart():
    from autotune.program._keys import study_name

    goal = at.Objective(expected_calls=100)
    assert at.TuneOptions().goal(goal) is goal  # off: the objective as it is, bit for bit
    tiered = at.TuneOptions(tier_up=True).goal(goal)
    assert tiered.tier_up and tiered.to_dict() == {**goal.to_dict(), "tier_up": True}
    assert str(at.TuneOptions(tier_up=True)) == "TuneOptions(tier_up=True)"
    device = {"platform": "cpu", "device_kind": "cpu"}
    plain, tier = (study_name("m:f", "0" * 12, "sig", device, g) for g in (goal, tiered))
    assert tier == plain + ",tier"
    assert study_name("m:f", "0" * 12, "sig", device, tiered, "pareto").endswith("/pareto")


def test_timing_takes_a_mode_alone_or_in_the_dict_and_names_the_three_modes_when_wrong():
    assert at.TuneOptions().timing_mode == "steady"  # the default: calls back to back
    alone = at.TuneOptions(timing="blocking")
    assert alone.timing.to_dict() == {"mode": "blocking"} and alone.timing_mode == "blocking"
    assert alone == at.TuneOptions(timing={"mode": "blocking"}) and hash(alone) == hash(
        at.TuneOptions(timing={"mode": "blocking"})
    )
    both = at.TuneOptions(timing={"mode": "device", "target_s": 0.1})
    assert both.timing.to_dict() == {"mode": "device", "target_s": 0.1} and both.timing_mode == "device"
    for bad in ("fast", {"mode": "wall"}):
        with pytest.raises(at.StudyError) as info:
            at.TuneOptions(timing=bad)
        text = str(info.value)
        assert all(f"'{mode}'" in text for mode in ("steady", "blocking", "device")), text
        assert "\n" not in text and text.endswith(".")


def test_the_docstring_lists_every_option():
    doc = at.TuneOptions.__doc__
    assert all(f"{name}:" in doc or f", {name}:" in doc or f"{name}," in doc for name in OPTION_NAMES)


def test_split_keywords_options_function_parameters_and_the_nearest_name():
    options, kwargs = split_keywords("f.tune", smooth_fn, {"n_trials": 3, "scale": 2.0})
    assert options == {"n_trials": 3} and kwargs == {"scale": 2.0}
    with pytest.raises(at.StudyError) as info:
        split_keywords("f.tune", smooth_fn, {"n_trial": 3})
    text = str(info.value)
    assert text.startswith(
        "f.tune got the keyword 'n_trial', which is neither a tune option nor a parameter of smooth_fn."
    )
    assert "Did you mean n_trials?" in text and "\n" not in text and text.endswith(".")
    # a function taking **kwargs takes any other name
    _, more = split_keywords("f.tune", lambda x, **kw: x, {"anything": 1})
    assert more == {"anything": 1}


def test_objective_keyword_is_the_deprecated_name_of_search():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options, _ = split_keywords("at.tune", smooth_fn, {"objective": "pareto"})
    assert options == {"search": "pareto"}
    assert any(issubclass(w.category, FutureWarning) and "search='pareto'" in str(w.message) for w in caught)
    with pytest.raises(at.StudyError, match="both search= and its deprecated name objective="):
        split_keywords("at.tune", smooth_fn, {"objective": "pareto", "search": "cost"})


def test_fn_tune_rejects_an_unknown_keyword_before_measuring_anything(tmp_path):
    f = at.autotuned(smooth_fn, key="tests:smooth", cache=str(tmp_path / "c.db"))
    with pytest.raises(at.StudyError) as info:
        f.tune(jnp.zeros(4), n_trails=2)
    assert "smooth_fn.tune got the keyword 'n_trails'" in str(info.value)
    assert "Did you mean n_trials?" in str(info.value)
    with pytest.raises(at.StudyError, match="Did you mean confirm_rounds?"):
        f.tune(jnp.zeros(4), confirm_round=2)
    assert not (tmp_path / "studies.db").exists()  # refused before a study or a worker started


def test_at_tune_rejects_an_unknown_keyword_naming_its_own_keywords_too(tmp_path):
    with pytest.raises(at.StudyError, match="at.tune got the keyword 'expected_call'.*Did you mean expected_calls?"):
        at.tune(smooth_fn, jnp.zeros(4), expected_call=10, storage=str(tmp_path / "s.db"))
    assert not (tmp_path / "s.db").exists()


def test_plumbing_is_no_public_option():
    assert not set(f.name for f in dataclasses.fields(Plumbing)) & set(OPTION_NAMES)
    import inspect

    public = inspect.signature(at.autotuned(smooth_fn, key="tests:s").tune).parameters
    assert not {"join", "on_ready", "before_finish", "retune", "location", "store"} & set(public)
