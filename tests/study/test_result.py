"""autotune/study/_result.py: a TuneResult shows itself in one short line and a small notebook table."""

from __future__ import annotations

import autotune as at
from autotune.measuring._measurement import Measurement
from autotune.select import Point
from autotune.study import TrialRecord, TuneResult

DEFAULT = at.Config({"body": {"repr": "scan", "unroll": 1}})
BEST = at.Config({"body": {"repr": "scan", "unroll": 4}})


def measurement(config, compile_s, run_s):
    return Measurement(0.01, 0.02, compile_s, run_s, 0.0, 10, config=config)


def result(n_trials=24, best_cost=0.5, default_cost=0.9, best=BEST):
    trials = [TrialRecord(i, DEFAULT if i % 2 else best, "complete", 1.0) for i in range(n_trials)]
    confirmed = [Point(DEFAULT, 0.4, 5e-4, confirmed=True), Point(best, 0.3, 2e-4, confirmed=True)]
    return TuneResult(
        best_config=best,
        best_cost=best_cost,
        best=measurement(best, 0.3, 2e-4),
        default_cost=default_cost,
        default=measurement(DEFAULT, 0.4, 5e-4),
        trials=trials,
        objective=at.Objective(expected_calls=1000),
        sites=[],
        fingerprint="f" * 64,
        signature="(f32[8],)",
        device={"platform": "cpu"},
        study_name="m:step@abc/cpu",
        storage="sqlite:///s.db",
        sampler="grid",
        space_size=8,
        confirmed=confirmed,
        default_config=DEFAULT,
    )


def test_the_repr_is_one_short_line_with_the_winner_gain_cost_and_trials():
    text = repr(result())
    assert text == "TuneResult(best: body=scan×4, 1.8× the default, cost 0.5 s, 24 trials)"
    assert "\n" not in text
    # Thousands of trials and a config over many sites still give a short line, never kilobytes.
    many = at.Config({f"site{i}": {"repr": "for"} for i in range(200)})
    big = repr(result(n_trials=5000, best=many))
    assert len(big) < 200 and "5000 trials" in big and big.count("…") == 1


def test_the_notebook_table_holds_the_same_facts_escaped():
    page = result(best=at.Config({"a<b": {"repr": "for"}}))._repr_html_()
    assert page.startswith("<table>") and page.endswith("</table>")
    assert "a&lt;b=for" in page and "a<b" not in page  # a site id is text, not markup
    assert "1.8×" in page and "24" in page and "m:step@abc/cpu" in page
    assert "<script" not in page
