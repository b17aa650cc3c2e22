"""autotune/report/_figures.py (with _axes, _crossover, _history): valid PNGs, every outcome
styled, reasons wrapped at word boundaries, legends that name only what is drawn, the crossover
of one config, the history's re-timed chosen line; on real tiny studies."""

from __future__ import annotations

import pytest
from _report_study import STUDY_FILE, check_png, forged_study, tiny_study, tune_study_file

from autotune import Outcome
from autotune.report import FIGURES, OUTCOME_STYLE, load_study_report
from autotune.report._axes import REASON_CHARS, drawn
from autotune.report._figures import FIGURE_DRAWERS, FIGURE_MAKERS
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


def _legend_entries(fig):
    """(axes, label, handle-artist) for every legend entry, the artist found by its label."""
    out = []
    for ax in fig.axes:
        box = ax.get_legend()
        if box is None:
            continue
        artists = {a.get_label(): a for a in ax.get_children()}
        out += [(ax, t.get_text(), artists.get(t.get_text())) for t in box.get_texts()]
    return out


@pytest.mark.parametrize("name", FIGURES)
def test_legends_list_only_what_is_drawn(study, tmp_path_factory, name):
    forged = forged_study(tmp_path_factory)
    reports = [
        load_study_report(study["result"].study_name, study["storage"]),
        load_study_report(forged["name"], forged["storage"], expected_calls=5000),
        load_study_report(forged["name"], forged["storage"], expected_calls=1),  # the default chosen
    ]
    for rep in reports:
        fig = FIGURE_DRAWERS[name](rep)
        for ax, label, artist in _legend_entries(fig):
            assert artist is not None, (name, label)
            assert drawn(ax, artist), f"{name}: the legend lists {label!r}, which is not drawn"


def test_a_one_point_front_is_not_in_the_legend(single, tmp_path):
    rep = single
    assert len(rep.pareto) <= 1
    labels = [label for _, label, _ in _legend_entries(FIGURE_DRAWERS["tradeoff"](rep))]
    assert "Pareto front" not in labels  # one point: its step line draws nothing


def test_the_default_box_frames_the_star_when_the_default_is_chosen(tmp_path_factory):
    forged = forged_study(tmp_path_factory)
    rep = load_study_report(forged["name"], forged["storage"], expected_calls=1)
    assert rep.chosen["config"] == rep.default["config"]
    (ax,) = FIGURE_DRAWERS["tradeoff"](rep).axes
    marks = {c.get_label(): c for c in ax.collections}
    star = next(c for k, c in marks.items() if k.startswith("chosen for"))
    box = marks["default config"]
    assert "the default" in star.get_label()
    # The box is drawn over the star and larger than it, so both stay visible.
    assert box.get_zorder() > star.get_zorder() and box.get_sizes()[0] > star.get_sizes()[0]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """A real tiny study whose only measured config is the default (every other one fails)."""
    return load_study_report(*one_config_study(tmp_path_factory))


def one_config_study(tmp_path_factory):
    import optuna

    from autotune.measuring._runner import InProcessRunner

    class OnlyDefault(InProcessRunner):
        def measure(self, config, **options):
            if any(c.repr != "scan" or c.unroll != 1 for c in config.values()):
                raise RuntimeError("simulated XLA failure: only the plain scan compiles here")
            return super().measure(config, **options)

    root = tmp_path_factory.mktemp("single")
    text = STUDY_FILE.replace("length=8", "length=4")
    _, storage, result, _ = tune_study_file(root / "at_report_single_study.py", text, OnlyDefault)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return result.study_name, storage


def test_the_crossover_of_one_config_has_no_empty_panel_and_says_it_covers_every_count(single):
    rep = single
    assert len(rep.shown) == 1
    fig = FIGURE_DRAWERS["crossover"](rep)
    (ax,) = fig.axes  # no lower panel of one flat line
    drawn_lines = [ln for ln in ax.get_lines() if drawn(ax, ln)]
    assert drawn_lines
    texts = " ".join(t.get_text() for t in ax.texts).replace("\n", " ")
    assert f"{rep.shown[0]['label']} covers every call count" in texts
    assert "one config is the cheapest at every call count" in ax.get_title()


def test_the_crossover_of_several_configs_keeps_its_lower_panel(tmp_path_factory):
    forged = forged_study(tmp_path_factory)
    rep = load_study_report(forged["name"], forged["storage"], expected_calls=5000)
    assert len(rep.shown) > 1
    fig = FIGURE_DRAWERS["crossover"](rep)
    assert len(fig.axes) == 2
    for ax in fig.axes:  # no empty axes
        assert any(drawn(ax, ln) for ln in ax.get_lines())


def test_the_chosen_line_of_the_history_says_confirmation_re_timed_it(study):
    rep = load_study_report(study["result"].study_name, study["storage"])
    assert rep.confirmed and rep.chosen
    ax = FIGURE_DRAWERS["history"](rep).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    chosen = [lab for lab in labels if lab.startswith("chosen")]
    assert chosen and "confirmation re-timed it" in chosen[0], labels
    assert any(t.get_text() == "chosen: re-timed in confirmation" for t in ax.texts)
    # The chosen config's own trial(s) are marked, so the gap to the line is visible as such.
    assert any(lab.startswith("the chosen config's trial") for lab in labels), labels


def test_the_sites_figure_titles_use_the_short_site_names(study):
    from autotune import _display

    rep = load_study_report(study["result"].study_name, study["storage"])
    names = _display.site_names(rep.sites)
    fig = FIGURE_DRAWERS["sites"](rep)
    titles = [ax.get_title() for ax in fig.axes]
    for site in rep.tunable_sites:
        assert any(t.startswith(names[site["id"]]) for t in titles), (names, titles)
