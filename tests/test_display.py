"""autotune/_display.py: units, words never cut in the middle, and which configs a table lists."""

from __future__ import annotations

import pytest

from autotune import select as _select
from autotune._display import cost, listed_points, ratio, seconds, shorten, site_legend, site_names, wrap
from autotune.program._config import Config

TEXT = (
    "pruned after lowering: trace+lower already took 0.0625 s, over the compile budget of 0.0621 s "
    "(best cost / compile weight), so this config cannot win"
)


@pytest.mark.parametrize(
    "x, shown",
    [(2.5, "2.5 s"), (0.452, "452 ms"), (7.417e-4, "741.7 µs"), (1.2e-8, "12 ns"), (0.0, "0 s"), (None, "-")],
)
def test_seconds_carry_their_unit(x, shown):
    assert seconds(x) == shown


def test_costs_and_ratios_carry_their_unit():
    assert cost(0.72991) == "0.7299 s" and cost(None) == "-"
    assert ratio(1.3842) == "1.38×" and ratio(float("inf")) == "-"


@pytest.mark.parametrize("limit", [10, 23, 40, 79])
def test_shorten_cuts_only_between_words(limit):
    out = shorten(TEXT, limit)
    assert len(out) <= limit
    body = out.removesuffix(" …")
    assert TEXT.startswith(body) and (len(body) == len(TEXT) or TEXT[len(body)] == " ")


@pytest.mark.parametrize("width", [12, 30, 61])
def test_wrap_keeps_every_word_whole_and_every_line_within_the_width(width):
    lines = wrap(TEXT, width)
    assert all(len(line) <= width for line in lines)
    assert " ".join(lines).split() == TEXT.split()
    short = wrap(TEXT, width, max_lines=2)
    assert len(short) == 2 and short[-1].endswith("…") and short[0] == lines[0]


def test_a_word_longer_than_the_line_is_shown_by_its_tail():
    (line,) = wrap("/tmp/pytest-of-me/pytest-7/a_rather_long_folder/tiny_study.py", 20)
    assert line == "…/tiny_study.py"


def test_listed_points_are_the_front_and_every_interval_owner():
    d, f, s = (Config({"l": {"repr": r, "unroll": 2}}) for r in ("scan", "fori", "for"))
    dflt = _select.Point(d, 0.96, 0.96, rounds=((0.9, 0.9), (0.96, 0.96), (1.5, 1.5)))
    better = _select.Point(f, 0.95, 0.95, rounds=((0.95, 0.95), (0.97, 0.97), (0.91, 0.91)))
    slow = _select.Point(s, 5.0, 2.0)
    points = [slow, dflt, better]
    intervals = _select.crossover_intervals(points, default=d)
    assert [it["config"] for it in intervals] == [d]  # f has the lower medians but loses 2 rounds of 3
    assert [p.config for p in listed_points(points, intervals)] == [f, d]
    assert [p.config for p in listed_points(points, intervals, chosen=s)] == [f, d, s]


@pytest.mark.parametrize("width", range(18, 44))
def test_a_number_keeps_its_unit_and_a_mark_its_config_at_every_width(width):
    text = "winner: s1=scan×2, s2=for ★ (default)  cost 3.012 s (default 3.34 s, 1.11×) after 741.7 µs"
    lines = wrap(text, width)
    assert all(len(line) <= width for line in lines)
    assert " ".join(lines).split() == text.split()  # nothing lost, nothing cut
    for line in lines:
        assert line.split()[0] not in ("s", "s,", "s)", "µs", "★", "(default)")


def test_an_id_may_break_after_its_colon_but_never_inside_a_word():
    assert wrap("lambda_returns:advantages", 20, breaks=":/") == ["lambda_returns:", "advantages"]
    assert wrap("lambda_returns:advantages", 30, breaks=":/") == ["lambda_returns:advantages"]
    assert wrap("a b", 10, breaks=":/") == ["a b"]


def test_a_long_key_is_shortened_to_its_qualname_not_to_nothing():
    """The progress bar's title at 80 columns (`tuning …` said nothing)."""
    assert shorten("tuning lambda_returns:advantages", 28) == "tuning …:advantages"
    assert shorten("tuning a:b", 28) == "tuning a:b"


def test_site_names_follow_the_ids_not_the_order_they_come_in():
    ids = ["fori@train.py:54", "scan@train.py:42#2", "scan@train.py:42", "smooth", "a_long_loop_name_over_14"]
    names = site_names(ids, loop_names={"smooth": "smooth", "a_long_loop_name_over_14": "a_long_loop_name_over_14"})
    assert names == {
        "a_long_loop_name_over_14": "s1",
        "smooth": "smooth",
        "scan@train.py:42": "s2",
        "scan@train.py:42#2": "s3",
        "fori@train.py:54": "s4",
    }
    assert site_names(list(reversed(ids)), loop_names={"smooth": "smooth"})["fori@train.py:54"] == "s4"
    assert site_names([{"id": "l", "kind": "loop"}, {"id": "m/scan@f.py:2", "name": None}]) == {
        "l": "l",
        "m/scan@f.py:2": "s1",
    }
    assert site_legend(names, derived=["scan@train.py:42#2"])[2] == "s3 = scan@train.py:42#2 (derived)"
