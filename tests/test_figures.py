"""autotune/report/_figures.py (with _axes, _history): valid PNGs, every outcome styled,
reasons wrapped at word boundaries."""

from __future__ import annotations

import pytest
from _report_study import check_png, forged_study, tiny_study

from autotune import Outcome
from autotune.report import FIGURES, OUTCOME_STYLE, load_study_report
from autotune.report._axes import REASON_CHARS
from autotune.report._figures import FIGURE_MAKERS
from autotune.report._history import reason_lines


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return tiny_study(tmp_path_factory)


def test_every_outcome_has_a_style():
    assert set(OUTCOME_STYLE) >= {o.value for o in Outcome} | {"running", "waiting"}
    assert "fail" not in OUTCOME_STYLE  # trials of old studies read as "error"


@pytest.mark.parametrize("name", FIGURES)
def test_each_figure_is_a_real_png(study, tmp_path, name):
    rep = load_study_report(study["result"].study_name, study["storage"])
    path = tmp_path / f"{name}.png"
    assert FIGURE_MAKERS[name](rep, str(path)) == str(path)
    check_png(path)


def test_a_dominated_default_owning_calls_is_drawn(tmp_path_factory, tmp_path):
    forged = forged_study(tmp_path_factory)
    rep = load_study_report(forged["name"], forged["storage"], expected_calls=5000)
    for name in ("crossover", "tradeoff"):  # the crossover figure used to look it up among the front only
        FIGURE_MAKERS[name](rep, str(tmp_path / f"{name}.png"))
        check_png(tmp_path / f"{name}.png")


def test_reasons_are_wrapped_at_word_boundaries_never_cut_mid_word(study):
    rep = load_study_report(study["result"].study_name, study["storage"])
    lines = reason_lines(rep.trials)
    assert lines and all(len(line) <= REASON_CHARS for line in lines)
    originals = " ".join(f"#{t.number} {t.outcome}: {t.reason}" for t in rep.trials if t.failed)
    words = set(originals.split())
    for line in lines:
        for word in line.split():
            # a word is whole, the ellipsis that ends a shortened reason, or a long path shown by its tail
            assert word in words or word == "…" or word.startswith("…/"), (word, line)
    assert any("worker_process_that_was_killed_after_it_hung.py" in line for line in lines)
