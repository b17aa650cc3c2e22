"""autotune/cli/_tables.py: short site names by the one rule, per function, with a legend;
tables laid out for a width (no word, number or mark ever cut); the ★ where `_select` put it."""

from __future__ import annotations

import random
from types import SimpleNamespace

from autotune import Outcome
from autotune.cli._output import console
from autotune.cli._tables import SiteNames, crossover_table, marked, table, trial_lines
from autotune.program._config import Config
from autotune.select import Point

SITES = [
    {"id": "algo_iters", "name": "algo_iters"},
    {"id": "algo_iters/scan@seed_rollout.py:53"},
    {"id": "a_very_long_loop_name_indeed", "name": "a_very_long_loop_name_indeed"},
    {"id": "algo_iters/scan@seed_rollout.py:53/fori@seed_rollout.py:40"},
]
SCAN = SITES[1]["id"]


def render(renderable, width=80) -> str:
    c = console()
    with c.capture() as cap:
        c.width = width
        c.print(renderable)
    return cap.get()


def point(config, compile_s, run_s, **kw) -> Point:
    return Point(Config(config), compile_cost_s=compile_s, run_cost_s=run_s, **kw)


def test_short_loop_names_stay_other_sites_get_numbers_by_the_one_rule():
    names = SiteNames().add(SITES)
    # named at.loops first (by name), a nested loop right after its parent
    assert [names.name(s["id"]) for s in SITES] == ["algo_iters", "s2", "s1", "s3"]
    assert names.legend() == [
        "s1 = a_very_long_loop_name_indeed",
        "s2 = algo_iters/scan@seed_rollout.py:53",
        "s3 = algo_iters/scan@seed_rollout.py:53/fori@seed_rollout.py:40",
    ]
    config = {SCAN: {"repr": "scan", "unroll": 2}, "algo_iters": {"repr": "for"}}
    assert names.config(config) == "algo_iters=for, s2=scan×2"


def test_the_names_do_not_depend_on_the_order_a_command_lists_the_sites_in():
    """`best` reads an entry's sites sorted by id, `tune` and `report` in program order: the
    same loop must get the same name (the issue: fori@train.py:54 was s1 in one, s3 in the other)."""
    sites = ["scan@train.py:42", "scan@train.py:42#2", "fori@train.py:54", "scan@train.py:9/fori@train.py:10"]
    expected = SiteNames().add(sites)
    expected = {s: expected.name(s) for s in sites}
    # by file and line, #2 after its twin, a nested loop after its parent's line
    assert [expected[s] for s in sites] == ["s2", "s3", "s4", "s1"]
    for seed in range(5):
        shuffled = random.Random(seed).sample(sites, len(sites))
        names = SiteNames().add(shuffled)
        assert {s: names.name(s) for s in sites} == expected


def test_each_function_has_its_own_names_and_the_legend_says_whose():
    names = SiteNames()
    names.add([{"id": "scan@a.py:3"}, {"id": "scan@a.py:3#2", "derived": True}], "m:f")
    names.add([{"id": "fori@b.py:7"}], "m:g")
    assert names.config({"fori@b.py:7": {"repr": "for"}}, "m:g") == "s1=for"
    assert names.config({"scan@a.py:3#2": {"repr": "for"}}, "m:f") == "s2=for"
    assert names.legend() == ["m:f:", "  s2 = scan@a.py:3#2 (derived)", "m:g:", "  s1 = fori@b.py:7"]


def test_names_never_clash_and_a_late_site_is_numbered_after_the_rest():
    names = SiteNames().add([{"id": "x/scan@f.py:3"}, {"id": "s1", "name": "s1"}, {"id": "s7", "name": "s7"}])
    shown = [names.name(i) for i in ("x/scan@f.py:3", "s1", "s7")]
    assert len(set(shown)) == 3  # at.loops named like an alias are numbered too
    late = names.name("y/while@g.py:9")
    assert late not in shown and late in dict(line.split(" = ") for line in names.legend())


def test_wide_keeps_full_ids_and_needs_no_legend():
    names = SiteNames(wide=True).add(SITES)
    assert names.config({SCAN: {"repr": "scan", "unroll": 4}}) == "algo_iters/scan@seed_rollout.py:53=scan×4"
    assert names.legend() == []


def cells_intact(text: str, cells: list[str]) -> None:
    """Every word of every cell appears whole in the rendered text, and a unit or mark is
    on the same line as the word before it."""
    lines = text.splitlines()
    words = {w for line in lines for w in line.split()}
    for cell in cells:
        for w in cell.split():
            pieces = [p + ":" for p in w.split(":")[:-1]] + [w.split(":")[-1]] if ":" in w else [w]
            for p in pieces:  # an id may end a line after its ':', nothing else parts a word
                assert p in words or any(p in line for line in lines), (p, text)
    for line in lines:
        first = line.split()[0] if line.split() else ""
        assert first not in ("s", "ms", "µs", "s)", "(default)", "★"), text


def test_a_table_at_80_columns_cuts_no_word_and_parts_no_number_from_its_unit():
    t = table("best configs on cpu", ["function", "config", "cost", "calls", "complete for"], right=("cost", "calls"))
    rows = [
        ["lambda_returns:advantages", "s1=scan×1, s2=scan×4, s3=for, s4=fori×2 ★ (default)", "3.012 s", "20,000"],
        ["train:train_step", "s1=scan×1, s2=scan×1, s3=scan×1 (default)", "0.2827 s", "2,000"],
    ]
    for r in rows:
        t.add_row(*r, "[0, 2,000]")
    text = render(t, 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "lambda_returns:adva" not in text.replace("lambda_returns:advantages", "")  # split at ':', not inside
    assert "lambda_returns:" in text and "advantages" in text
    assert "★ (default)" in text and "3.012 s" in text and "0.2827 s" in text
    cells_intact(text, [c for r in rows for c in r])


def test_wide_through_a_pipe_puts_each_row_on_one_line():
    long_sig = "PyTreeDef(((*, *), {}))|" + ";".join(["float32[1024,1024]"] * 40)  # 800 characters
    t = table("entries", ["function", "signature", "config"], wide=True)
    t.add_row("lambda_returns:advantages", long_sig, "scan@train.py:42=scan×4, fori@train.py:54=for")
    c = console(wide=True)  # stdout is not a terminal under pytest
    with c.capture() as cap:
        c.print(t)
    lines = cap.get().splitlines()
    assert len(lines) == 4 and long_sig in lines[3] and lines[3].startswith("lambda_returns:advantages")


def test_the_crossover_table_marks_the_chosen_config_and_fits_80_columns():
    points = [point({SCAN: {"repr": "scan", "unroll": 1}}, 1.0, 2.0**-7), point({SCAN: {"repr": "for"}}, 11.0, 2.0**-9)]
    names = SiteNames().add(SITES)
    text = render(
        crossover_table(
            points,
            names=names,
            chosen=points[1].config,
            default=points[0].config,
            title="a title that is long enough to need more room than the columns take, at 80 columns",
        )
    )
    assert "s2=for ★" in text and "s2=scan×1 (default)" in text
    assert "[0, 1,707)" in text and "[1,707, ∞)" in text and "11 s" in text and "1.953 ms" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert marked(names, points[0].config) == "s2=scan×1"


def test_default_is_never_alone_on_a_line_in_a_narrow_column():
    points = [
        point({s["id"]: {"repr": "scan", "unroll": 1} for s in SITES[1:]}, 0.2, 1e-5),
        point({s["id"]: {"repr": "for"} for s in SITES[1:]}, 0.3, 1e-6),
    ]
    text = render(
        crossover_table(points, names=SiteNames().add(SITES), chosen=points[0].config, default=points[0].config)
    )
    lines = [ln.strip() for ln in text.splitlines()]
    assert "★ (default)" in text and "(default)" not in lines and not any(ln.startswith("(default)") for ln in lines)


def trial(n, state, why=None):
    return SimpleNamespace(  # the fields TrialRecord has
        number=n, state=state, outcome=Outcome(state), reason=why, config=Config({"algo_iters": {"repr": "for"}})
    )


REASON = (
    "pruned after lowering: trace+lower already took 0.0625 s, over the compile budget of 0.0621 s "
    "(best cost / compile weight), so this config cannot win\nTraceback (most recent call last): ..."
)


def test_trials_without_a_measurement_are_listed_with_their_reasons_wrapped():
    trials = [trial(0, "complete"), trial(1, "shared"), trial(2, "duplicate"), trial(3, "pruned", REASON)]
    lines = trial_lines(trials, SiteNames().add(SITES), 60)
    assert lines[0] == "1 of 4 trials gave no measurement:"
    assert lines[1] == "  #3 pruned: algo_iters=for"
    assert all(len(line) <= 60 for line in lines) and "Traceback" not in " ".join(lines)
    words = [w for line in lines[2:4] for w in line.split() if w != "…"]
    assert words == REASON.splitlines()[0].split()[: len(words)]  # whole words, in order, at most two lines
    assert lines[4] == "  (--wide shows the full reasons)"


def test_wide_lists_every_trial_with_its_whole_reason():
    trials = [trial(i, "pruned", REASON) for i in range(12)]
    short = trial_lines(trials, SiteNames().add(SITES), 60)
    assert short[-1] == "  ... and 4 more (--wide lists every one with its full reason)"
    full = trial_lines(trials, SiteNames().add(SITES), 60, full=True)
    assert sum(line.startswith("  #") for line in full) == 12 and all(len(line) <= 60 for line in full)
    text = " ".join(" ".join(full[2:]).split())
    assert " ".join(REASON.split()) in text  # the whole reason, traceback line too


def test_configs_of_one_program_are_listed_as_equivalent_beside_its_contender():
    scan2, fori2 = (Config({SCAN: {"repr": r, "unroll": 2}}) for r in ("scan", "fori"))
    points = [
        point({SCAN: {"repr": "scan", "unroll": 1}}, 1.0, 2.0**-7),
        Point(scan2, 1.5, 2.0**-9, equivalent=(fori2,)),
    ]
    names = SiteNames(wide=True).add(SITES)
    text = render(crossover_table(points, names=names, chosen=scan2), width=200)
    assert "=scan×2 ★ ≡ algo_iters/scan@seed_rollout.py:53=fori×2" in text
