"""autotune/cli/_tables.py: short site names with a legend, configs in the one notation,
the ★ where `_select` put it."""

from __future__ import annotations

from types import SimpleNamespace

from autotune import Outcome
from autotune._config import Config
from autotune.cli._output import console
from autotune.cli._tables import SiteNames, crossover_table, marked, trial_lines

SITES = [
    {"id": "algo_iters", "name": "algo_iters"},
    {"id": "algo_iters/scan@seed_rollout.py:53"},
    {"id": "a_very_long_loop_name_indeed", "name": "a_very_long_loop_name_indeed"},
    {"id": "algo_iters/scan@seed_rollout.py:53/fori@seed_rollout.py:40"},
]


def render(renderable, width=80) -> str:
    c = console()
    with c.capture() as cap:
        c.width = width
        c.print(renderable)
    return cap.get()


def test_short_loop_names_stay_other_sites_get_numbered_aliases():
    names = SiteNames().add(SITES)
    assert [names.name(s["id"]) for s in SITES] == ["algo_iters", "s1", "s2", "s3"]
    assert names.legend() == [
        "s1 = algo_iters/scan@seed_rollout.py:53",
        "s2 = a_very_long_loop_name_indeed",
        "s3 = algo_iters/scan@seed_rollout.py:53/fori@seed_rollout.py:40",
    ]
    config = {SITES[1]["id"]: {"repr": "scan", "unroll": 2}, "algo_iters": {"repr": "for"}}
    assert names.config(config) == "algo_iters=for, s1=scan×2"  # program order, the one notation


def test_names_are_the_same_in_every_table_and_never_clash():
    names = SiteNames().add([{"id": "x/scan@f.py:3"}, {"id": "s1", "name": "s1"}, {"id": "s7", "name": "s7"}])
    shown = [names.name(i) for i in ("x/scan@f.py:3", "s1", "s7")]
    assert len(set(shown)) == 3 and shown[0] == "s1"  # at.loops named like an alias are numbered too
    first = names.config({"x/scan@f.py:3": {"repr": "fori", "unroll": 1}})
    assert names.config({"x/scan@f.py:3": {"repr": "fori", "unroll": 1}}) == first
    late = names.name("y/while@g.py:9")  # not added beforehand: numbered on first use
    assert late.startswith("s") and late in dict(line.split(" = ") for line in names.legend())


def test_wide_keeps_full_ids_and_needs_no_legend():
    names = SiteNames(wide=True).add(SITES)
    assert names.config({SITES[1]["id"]: {"repr": "scan", "unroll": 4}}) == "algo_iters/scan@seed_rollout.py:53=scan×4"
    assert names.legend() == []


def test_the_crossover_table_marks_the_chosen_config_and_fits_80_columns():
    points = [
        {"config": {SITES[1]["id"]: {"repr": "scan", "unroll": 1}}, "compile_s": 1.0, "run_s": 2.0**-7},
        {"config": {SITES[1]["id"]: {"repr": "for", "unroll": 1}}, "compile_s": 11.0, "run_s": 2.0**-9},
    ]
    names = SiteNames().add(SITES)
    text = render(
        crossover_table(
            points,
            names=names,
            chosen=points[1]["config"],
            default=points[0]["config"],
            title="a title that is long enough to need more room than the columns take",
        )
    )
    assert "s1=for ★" in text and "s1=scan×1 (default)" in text
    assert "[0, 1,707)" in text and "[1,707, ∞)" in text and "11 s" in text and "1.953 ms" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert marked(names, points[0]["config"]) == "s1=scan×1"


def test_trials_without_a_measurement_are_listed_with_their_reasons_wrapped():
    reason = (
        "pruned after lowering: trace+lower already took 0.0625 s, over the compile budget of 0.0621 s "
        "(best cost / compile weight), so this config cannot win\nTraceback (most recent call last): ..."
    )
    trial = lambda n, state, why=None: SimpleNamespace(  # noqa: E731 - the fields TrialRecord has
        number=n, state=state, outcome=Outcome(state), reason=why, config=Config({"algo_iters": {"repr": "for"}})
    )
    trials = [trial(0, "complete"), trial(1, "shared"), trial(2, "duplicate"), trial(3, "pruned", reason)]
    lines = trial_lines(trials, SiteNames().add(SITES), 60)
    assert lines[0] == "1 of 4 trials gave no measurement:"
    assert lines[1] == "  #3 pruned: algo_iters=for"
    assert all(len(line) <= 60 for line in lines) and "Traceback" not in " ".join(lines)
    words = [w for line in lines[2:] for w in line.split() if w != "…"]
    assert words == reason.splitlines()[0].split()[: len(words)]  # whole words, in order, at most two lines
    assert len(lines) == 4


def test_configs_of_one_program_are_listed_as_equivalent_beside_its_contender():
    scan2, fori2 = ({SITES[1]["id"]: {"repr": r, "unroll": 2}} for r in ("scan", "fori"))
    points = [
        {"config": {SITES[1]["id"]: {"repr": "scan", "unroll": 1}}, "compile_s": 1.0, "run_s": 2.0**-7},
        {"config": scan2, "compile_s": 1.5, "run_s": 2.0**-9, "equivalent": [fori2]},
    ]
    names = SiteNames(wide=True).add(SITES)
    text = render(crossover_table(points, names=names, chosen=scan2), width=200)
    assert "=scan×2 ★ ≡ algo_iters/scan@seed_rollout.py:53=fori×2" in text
