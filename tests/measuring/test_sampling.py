"""`Sampling`: how a call's runtime is sampled, one frozen value built once where a person says how
to time, with one home for its names and defaults."""

import dataclasses
import inspect
import json

import pytest

import autotune as at
from autotune.measuring._sampling import DEFAULT, NAMES, TIMING_MODES, Sampling, timing_mode_error


def test_every_form_a_boundary_takes_reads_as_one_value():
    assert Sampling.of(None) == DEFAULT == Sampling()
    assert Sampling.of("blocking") == Sampling(mode="blocking")
    given = {"target_s": 0.01, "min_reps": 3}
    held = Sampling.of(given)
    given["target_s"] = 9.0  # the caller's dict changing later does not change the value
    assert held == Sampling(min_reps=3, target_s=0.01) and Sampling.of(held) is held
    assert Sampling.of({"target_s": 0.01, "max_batch": 7}) == Sampling(target_s=0.01)  # other names: ignored
    with pytest.raises(dataclasses.FrozenInstanceError):
        held.target_s = 1.0
    with pytest.raises(TypeError, match="a sampling is a Sampling"):
        Sampling.of(0.5)


def test_it_crosses_as_json_the_fields_that_differ_from_the_defaults():
    s = Sampling(mode="device", target_s=0.1)
    assert s.to_dict() == {"mode": "device", "target_s": 0.1} and DEFAULT.to_dict() == {}
    assert Sampling.of(json.loads(json.dumps(s.to_dict()))) == s
    assert s.replace(warmup=1) == Sampling(mode="device", warmup=1, target_s=0.1)


def test_a_bad_mode_is_the_one_sentence_naming_the_three_modes():
    with pytest.raises(at.StudyError) as info:
        Sampling(mode="fastest")
    assert str(info.value) == timing_mode_error("fastest")
    assert all(f"'{mode}'" in str(info.value) for mode in TIMING_MODES)
    with pytest.raises(at.StudyError, match="'fastest' is not a timing mode"):
        Sampling.of({"mode": "fastest"})


def test_at_measure_and_the_options_take_their_names_and_defaults_from_it():
    params = inspect.signature(at.measure).parameters
    spelled = {"timing_mode" if name == "mode" else name: name for name in NAMES}
    assert {p: params[p].default for p in spelled} == {p: getattr(DEFAULT, n) for p, n in spelled.items()}
    options = at.TuneOptions(timing={"mode": "blocking", "target_s": 0.01})
    assert options.timing == Sampling(mode="blocking", target_s=0.01)
    assert at.TuneOptions(timing=options.timing) == options and at.TuneOptions().timing is None
