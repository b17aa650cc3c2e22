"""autotune/cli/_parser.py: every subcommand's options, and the --workers helpers' argv
derived from the parsed arguments."""

from __future__ import annotations

import argparse

import pytest

from autotune import cli, study
from autotune.cli._parser import NOT_FOR_HELPERS, build_parser, repeat_argv, subparser
from autotune.cli._tune_cmd import Helpers, retune_template


def _value_for(action: argparse.Action) -> list[str]:
    """Command-line words giving ``action`` a value that is not its default."""
    if not action.option_strings:
        return ["studies/x.py"]
    flag = action.option_strings[-1]
    if isinstance(action, argparse._StoreTrueAction):
        return [flag]
    if action.dest == "sampler":
        return [flag, "random"]
    if action.dest == "search":
        return [flag, "pareto"]
    if action.dest == "timing":
        return [flag, "blocking"]
    if action.dest == "max_memory":
        return [flag, "2.5GiB"]
    if action.choices:  # a choice that is not the default (--compilation-cache: off)
        return [flag, next(c for c in reversed(list(action.choices)) if c != action.default)]
    if action.type is not None and getattr(action.type, "__name__", "") in ("positive_int", "int", "builders_count"):
        return [flag, "3"]
    if action.type is not None:
        return [flag, "2.5"]
    return [flag, "some-text"]


def tune_actions() -> list[argparse.Action]:
    return [a for a in subparser(build_parser(), "tune")._actions if a.dest != "help"]


@pytest.mark.parametrize("action", tune_actions(), ids=lambda a: a.dest)
def test_every_tune_option_reaches_the_helpers_unless_it_must_not(action):
    words = ["tune"] + (["studies/x.py"] if action.option_strings else []) + _value_for(action)
    a = build_parser().parse_args(words)
    again = build_parser().parse_args(repeat_argv(a))
    if action.dest in NOT_FOR_HELPERS:
        assert getattr(again, action.dest) == action.default
    else:
        assert getattr(again, action.dest) == getattr(a, action.dest) != action.default


def test_helper_argv_joins_the_study_and_keeps_the_password_out_of_argv():
    a = build_parser().parse_args(
        [
            "tune",
            "s.py",
            "--workers",
            "3",
            "--json",
            "--trials",
            "9",
            "--storage",
            "postgresql://me:hunter22@h/db",
            "--cache",
            "c.db",
        ]
    )
    argv = Helpers(a, 2).argv("study-name")
    assert argv[1:4] == ["-m", "autotune", "tune"]
    assert argv[-4:] == ["--join-study", "study-name", "--example", "2"]
    assert "--trials" in argv and "9" in argv and "--cache" in argv
    assert not {"--workers", "--json", "--storage"} & set(argv)
    assert not any("hunter22" in w for w in argv)


def test_the_retune_command_repeats_the_options_with_absolute_paths_and_no_secret():
    a = build_parser().parse_args(
        [
            "tune",
            "s.py",
            "--trials",
            "9",
            "--expected-calls",
            "50",
            "--json",
            "--cache",
            "postgresql://me:hunter22@h/db",
            "--storage",
            "st.db",
        ]
    )
    text = retune_template(a)
    assert text.startswith("autotune tune /") and text.endswith(" --expected-calls {calls}")
    assert "--trials 9" in text and "me:***@h/db" in text and "hunter22" not in text
    assert "--json" not in text and " 50" not in text and "/st.db" in text


def test_samplers_and_searches_come_from_the_study_package(capsys):
    for name in study.SAMPLERS:
        assert build_parser().parse_args(["tune", "s.py", "--sampler", name]).sampler == name
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["tune", "s.py", "--sampler", "bogus"])
    assert exc.value.code == 2 and "'bogus' is not one of auto, tpe, grid" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "s.py", "--objective", "speed"])


def test_timing_takes_one_of_the_three_modes(capsys):
    for mode in ("steady", "blocking", "device"):
        assert build_parser().parse_args(["tune", "s.py", "--timing", mode]).timing == mode
        assert build_parser().parse_args(["tune", "--recorded", "--timing", mode]).timing == mode
    assert build_parser().parse_args(["tune", "s.py"]).timing is None  # TuneOptions' default: steady
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["tune", "s.py", "--timing", "wall"])
    assert exc.value.code == 2 and "'wall' is not one of steady, blocking, device" in capsys.readouterr().err


def test_run_seconds_must_be_more_than_zero(capsys):
    assert build_parser().parse_args(["tune", "s.py", "--run-seconds", "0.02"]).run_seconds == 0.02
    for bad in ("0", "-0.5", "nan", "soon"):
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args(["tune", "s.py", "--run-seconds", bad])
        err = capsys.readouterr().err
        assert (
            exc.value.code == 2
            and err.count("\n") == 1
            and err.startswith("autotune tune: error: argument --run-seconds")
        )
        said = "is not a number" if bad == "soon" else "must be a finite number > 0"
        assert f"{bad!r} {said}" in err, err


def test_numbers_are_refused_with_what_they_must_be(capsys):
    for flag, bad, said in [
        ("--trials", "0", "'0' must be at least 1"),
        ("--trials", "1.5", "'1.5' is not a whole number"),
        ("--builders", "-1", "'-1' must be auto or at least 0"),
        ("--builders", "some", "'some' is neither auto nor a whole number"),
        ("--timeout", "-1", "'-1' must be a finite number >= 0"),
        ("--timeout", "inf", "'inf' must be a finite number >= 0"),
    ]:
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args(["tune", "s.py", flag, bad])
        assert exc.value.code == 2 and f"argument {flag}: {said}." in capsys.readouterr().err
    a = build_parser().parse_args(["tune", "s.py", "--builders", "auto", "--timeout", "0", "--trials", "1"])
    assert (a.builders, a.timeout, a.trials) == ("auto", 0.0, 1)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["tune"], "Give exactly one of a study FILE or --recorded"),
        (["tune", "s.py", "--recorded"], "Give exactly one of a study FILE or --recorded"),
    ],
)
def test_tune_needs_exactly_one_of_a_file_or_recorded(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_pending_and_recorded_reach_the_record_commands(capsys):
    a = build_parser().parse_args(["pending", "--json", "--cache", "c.db"])
    assert (a.command, a.json, a.cache) == ("pending", True, "c.db")
    a = build_parser().parse_args(["tune", "--recorded", "--function", "m:f", "--trials", "4"])
    assert (a.recorded, a.function, a.trials, a.file) == (True, "m:f", 4, None)
    from autotune.cli import _record

    if getattr(_record, "STUB", False):  # until record-and-replay lands: one clear line, exit 2
        assert cli.main(["pending"]) == 2 and "not built yet" in capsys.readouterr().err
        assert cli.main(["tune", "--recorded"]) == 2 and "not built yet" in capsys.readouterr().err


def test_max_memory_reads_units_and_fractions_and_says_the_forms_it_takes(capsys):
    parser = build_parser()
    assert parser.parse_args(["tune", "x.py", "--max-memory", "12GiB"]).max_memory == 12 * 2**30
    assert parser.parse_args(["tune", "x.py", "--max-memory", "0.5"]).max_memory == 0.5
    with pytest.raises(SystemExit):
        parser.parse_args(["tune", "x.py", "--max-memory", "12 parsecs"])
    err = capsys.readouterr().err
    assert "--max-memory='12 parsecs' is not a memory budget; give bytes with a unit ('12GiB'" in err
