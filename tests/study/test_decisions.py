"""The study's decisions, tested without a stopwatch: every figure comes from a `FakeRunner`
(tests/_fake_runner.py), canned per config, so each test asserts what was decided (the winner,
the guard, the compile budget, confirmation's second process, the trial count, the re-pick)
and the same way on a quiet machine or a loaded one. JAX still traces the function (the study
is named for its program); no decision reads a clock."""

from __future__ import annotations

import re

import jax.numpy as jnp
import pytest
from _fake_runner import FakeRunner

import autotune as at
from autotune import select as _select

MS = 1e-3


def loop8(x):
    return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=8, name="l")[0]


def loop32(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=32, name="l")[0]


X = jnp.ones(4)
DEFAULT = "l=scan×1"


def tune(runner: FakeRunner, tmp_path, fn=loop8, **options):
    """``at.tune`` of ``fn`` on the fake runner: the loops only (no XLA options), the grid unless said."""
    options = {"sampler": "grid", "xla": False, "progress": False, "expected_calls": 1e4, **options}
    return at.tune(fn, X, runner=runner, storage=str(tmp_path / "studies.db"), **options)


def label(config: at.Config) -> str:
    return config.label()


def confirmed(result, name: str):
    return next(p for p in result.confirmed if label(p.config) == name)


# --------------------------------------------------------------- the winner rule, end to end


def test_a_challenger_faster_in_every_round_wins_and_is_confirmed_in_a_second_process(tmp_path):
    # 1.25x ahead: a lead one process's code placement could make (SECOND_PROCESS_LEAD).
    runner = FakeRunner(loop8, (X,), {"l=scan×4": (0.1, 0.8 * MS), "*": (0.1, 1 * MS)})
    r = tune(runner, tmp_path)
    assert label(r.best_config) == "l=scan×4"
    assert runner.renewed == 1 and runner.closed
    # Its rounds come from both processes (3 + 3), paired with the default's, which was measured there too.
    won, default = confirmed(r, "l=scan×4"), confirmed(r, DEFAULT)
    assert won.worker_processes == default.worker_processes == 2
    assert len(won.rounds) == len(default.rounds) == 6
    assert r.best_cost == pytest.approx(0.1 + 1e4 * 0.8 * MS) and r.default_cost == pytest.approx(0.1 + 1e4 * MS)


def test_a_lead_no_process_can_undo_wins_without_a_second_process(tmp_path):
    # 5x ahead in every round: over SECOND_PROCESS_LEAD, so no fresh worker is started for it.
    runner = FakeRunner(loop8, (X,), {"l=scan×4": (0.1, 0.2 * MS), "*": (0.1, 1 * MS)})
    r = tune(runner, tmp_path)
    assert label(r.best_config) == "l=scan×4" and runner.renewed == 0 and runner.closed
    won, default = confirmed(r, "l=scan×4"), confirmed(r, DEFAULT)
    assert won.worker_processes == default.worker_processes == 1
    assert len(won.rounds) == len(default.rounds) == 3
    assert r.best_cost == pytest.approx(0.1 + 1e4 * 0.2 * MS) and r.default_cost == pytest.approx(0.1 + 1e4 * MS)


def test_a_challenger_ahead_on_the_median_but_not_in_enough_paired_rounds_keeps_the_default(tmp_path):
    # 0.7, 0.7, 1.3 ms in turn: any six consecutive samples have a median of 0.7 ms (30% under the
    # default's 1 ms) and win 4 paired rounds of 6; the sign test asks for 5. (Six rounds: with three,
    # where all must be won, the first round lost leaves the race: _Rounds.race.)
    runner = FakeRunner(loop8, (X,), {"l=scan×4": (0.1, [0.7 * MS, 0.7 * MS, 1.3 * MS]), "*": (0.1, 1 * MS)})
    r = tune(runner, tmp_path, confirm_rounds=6)
    challenger, default = confirmed(r, "l=scan×4"), confirmed(r, DEFAULT)
    assert challenger.run_cost_s < default.run_cost_s  # ahead on the median ...
    wins = sum(1 for (_, a), (_, b) in zip(challenger.rounds, default.rounds) if a < b)
    assert (wins, len(challenger.rounds)) == (4, 6)  # ... in 4 of 6 paired rounds
    assert label(r.best_config) == DEFAULT and runner.renewed == 0  # no new winner: no second process
    assert not _select.beats(challenger, default, r.objective)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_challenger_as_good_as_the_default_within_noise_rarely_replaces_it_and_only_by_the_rule(tmp_path):
    # Every config runs 1 ms, each sample within ±20% (seeded): a challenger is a coin against the
    # default. It must win 3 of 3 rounds in the first process (1 time in 8 by chance) and 5 of 6
    # once the second is in: of 8 such studies at most one names another winner, and only so.
    picks = []
    for seed in range(8):
        runner = FakeRunner(loop8, (X,), {"*": (0.1, 1 * MS)}, noise=0.2, seed=seed)
        r = tune(runner, tmp_path / str(seed))
        best, default = confirmed(r, label(r.best_config)), confirmed(r, DEFAULT)
        if best is not default:
            wins = sum(1 for (_, a), (_, b) in zip(best.rounds, default.rounds) if a < b)
            assert runner.renewed == 1 and len(best.rounds) == 6 and wins >= 5, (seed, best.rounds, default.rounds)
        assert _select.winner(r.confirmed, r.objective, default.config).config == r.best_config
        picks.append(label(r.best_config))
    assert sum(p != DEFAULT for p in picks) <= 1, picks


# --------------------------------------------------------------- a second, fresh process


def _two_processes(first: float | list[float], second: float | list[float]):
    """Costs where the challenger ``l=scan×4`` runs ``first`` ms in the first process, ``second`` in a renewed one."""

    def costs(name: str, process: int):
        if name != "l=scan×4":
            return 0.1, 1 * MS
        runs = first if process == 0 else second
        return 0.1, [v * MS for v in runs] if isinstance(runs, list) else runs * MS

    return costs


def test_a_lead_seen_in_one_process_only_keeps_the_default(tmp_path):
    runner = FakeRunner(loop8, (X,), _two_processes(0.8, 1.5))
    r = tune(runner, tmp_path)
    assert runner.renewed == 1  # it won the first process by a lead one process could make: measured again
    assert label(r.best_config) == DEFAULT
    assert len(confirmed(r, "l=scan×4").rounds) == len(confirmed(r, DEFAULT).rounds) == 6


def test_a_challenger_that_wins_five_of_six_paired_rounds_across_two_processes_wins(tmp_path):
    # The renewed process starts its sequence again: rounds 1, 2, 3 there run 0.8, 0.8, 1.1 ms.
    runner = FakeRunner(loop8, (X,), _two_processes(0.8, [0.8, 0.8, 1.1]))
    r = tune(runner, tmp_path)
    assert runner.renewed == 1 and label(r.best_config) == "l=scan×4"
    won, default = confirmed(r, "l=scan×4"), confirmed(r, DEFAULT)
    assert sum(1 for (_, a), (_, b) in zip(won.rounds, default.rounds) if a < b) == 5


def test_four_of_six_is_not_enough(tmp_path):
    runner = FakeRunner(loop8, (X,), _two_processes(0.8, [0.8, 1.1, 1.1]))
    r = tune(runner, tmp_path)
    assert runner.renewed == 1 and label(r.best_config) == DEFAULT


def test_a_runner_without_a_second_process_decides_on_the_first(tmp_path):
    runner = FakeRunner(loop8, (X,), _two_processes(0.8, 1.5), renewable=False)
    r = tune(runner, tmp_path)
    assert runner.renewed == 0 and label(r.best_config) == "l=scan×4"
    assert confirmed(r, "l=scan×4").worker_processes == 1 and len(confirmed(r, "l=scan×4").rounds) == 3


# --------------------------------------------------------------- the correctness guard


def test_a_config_that_changes_the_results_is_rejected_however_fast(tmp_path):
    costs = {"l=scan×4": (0.1, 0.1 * MS), "l=scan×2": (0.1, 0.5 * MS), "*": (0.1, 1 * MS)}
    runner = FakeRunner(loop8, (X,), costs, outputs={"l=scan×4": lambda out: out * 1.01})
    r = tune(runner, tmp_path)
    (bad,) = [t for t in r.trials if label(t.config) == "l=scan×4"]
    assert bad.state == "rejected" and bad.reason.startswith("correctness guard")
    assert "l=scan×4" not in {label(p.config) for p in r.confirmed}
    assert label(r.best_config) == "l=scan×2"  # the fastest config that computes the same results


def test_a_change_within_the_dtype_tolerance_is_not_rejected(tmp_path):
    runner = FakeRunner(
        loop8,
        (X,),
        {"l=scan×4": (0.1, 0.1 * MS), "*": (0.1, 1 * MS)},
        outputs={"l=scan×4": lambda out: out * (1 + 1e-6)},
    )
    r = tune(runner, tmp_path)
    assert label(r.best_config) == "l=scan×4"


# --------------------------------------------------------------- the compile budget and the trial count


def copies(name: str) -> int:
    """Body copies of a config of ``loop32`` (a power-of-two unroll k: k copies; ``for``: 32)."""
    k = re.search(r"×(\d+)", name)
    return 32 if k is None else int(k.group(1))


def linear_compile(name: str, process: int = 0):
    """0.1 s + 0.02 s a body copy, 1 ms a call whatever the config: at 150 calls the default costs
    0.12 + 0.15 s, the compile budget is 10% more (0.297 s), and a config predicted at twice that
    (``for``, 32 copies: 0.74 s) is skipped once the fit has 4 compiles to go on."""
    return 0.1 + 0.02 * copies(name), 1 * MS


def test_the_compile_budget_prunes_and_the_prediction_skips(tmp_path):
    runner = FakeRunner(loop32, (X,), linear_compile)
    r = tune(runner, tmp_path, fn=loop32, expected_calls=150)
    state = {label(t.config): t for t in r.trials}
    assert len(state) == r.space_size == 11
    for name in ("l=scan×1", "l=scan×2", "l=scan×4", "l=scan×8", "l=fori×1", "l=fori×2", "l=fori×4", "l=fori×8"):
        assert state[name].state == "complete", state[name]
    for name in ("l=scan×16", "l=fori×16"):  # compiled under the budget, stopped at it
        assert state[name].state == "pruned" and not state[name].skipped, state[name]
        assert name in runner.measured
    skipped = state["l=for"]  # the fit had scan×1, ×2, ×4, ×8: predicted 0.74 s, skipped before compiling
    assert skipped.state == "pruned" and skipped.skipped and skipped.measurement is None
    assert skipped.predicted_compile_s == pytest.approx(0.74) and "l=for" not in runner.measured
    # Every later trial was measured against the budget: the default's cost (0.27 s) plus 10%.
    assert runner.budgets[3:] and all(b == pytest.approx(0.27 * 1.1) for b in runner.budgets[3:9])
    assert label(r.best_config) == DEFAULT


def test_which_trials_count_toward_n_trials(tmp_path):
    # Grid order: scan×1, ×2, ×4, ×8 complete; scan×16 pruned (counts); for skipped (does not);
    # fori×1 lowers to the default's program (shared: counts); fori×2 changes the results
    # (rejected: counts) and is the 7th counted trial: the search stops there.
    runner = FakeRunner(
        loop32,
        (X,),
        linear_compile,
        programs={"l=fori×1": "l=scan×1"},
        outputs={"l=fori×2": lambda out: out + 1.0},
    )
    r = tune(runner, tmp_path, fn=loop32, expected_calls=150, n_trials=7)
    states = [(label(t.config), t.state, t.skipped) for t in r.trials]
    assert states == [
        ("l=scan×1", "complete", False),
        ("l=scan×2", "complete", False),
        ("l=scan×4", "complete", False),
        ("l=scan×8", "complete", False),
        ("l=scan×16", "pruned", False),
        ("l=for", "pruned", True),
        ("l=fori×1", "shared", False),
        ("l=fori×2", "rejected", False),
    ]
    assert r.new_trials == sum(t.counted for t in r.trials) == 7
    # Resumed with a budget of 8: one more counted trial, the next config of the grid.
    more = tune(FakeRunner(loop32, (X,), linear_compile), tmp_path, fn=loop32, expected_calls=150, n_trials=8)
    assert more.new_trials == 1 and [label(t.config) for t in more.trials][-1] == "l=fori×4"


# --------------------------------------------------------------- another call count


def test_a_re_pick_for_few_calls_gives_the_config_cheaper_to_compile(tmp_path):
    # ``for`` runs 5x faster but compiles 10x longer; ``scan×2`` compiles in half the default's time.
    costs = {"l=for": (1.0, 0.2 * MS), "l=scan×2": (0.05, 1 * MS), "*": (0.1, 1 * MS)}
    runner = FakeRunner(loop8, (X,), costs)
    r = tune(runner, tmp_path, expected_calls=1e6)
    assert label(r.best_config) == "l=for"
    assert label(r.rescore(at.Objective(expected_calls=1))[0]) == "l=scan×2"
    assert label(r.rescore(at.Objective(expected_calls=0))[0]) == "l=scan×2"
    # Where the two lines cross: for costs 1.0 + 0.2 ms·N, scan×2 0.05 + 1 ms·N.
    assert label(r.rescore(at.Objective(expected_calls=1100))[0]) == "l=scan×2"
    assert label(r.rescore(at.Objective(expected_calls=1300))[0]) == "l=for"


def test_a_finished_pareto_study_re_picks_for_another_call_count_without_measuring(tmp_path):
    costs = {"l=for": (1.0, 0.2 * MS), "l=scan×2": (0.05, 1 * MS), "*": (0.1, 1 * MS)}
    first = tune(FakeRunner(loop8, (X,), costs), tmp_path, search="pareto", sampler="auto", expected_calls=1e6)
    assert label(first.best_config) == "l=for"
    again = FakeRunner(loop8, (X,), costs)
    few = tune(again, tmp_path, search="pareto", sampler="auto", expected_calls=1)
    assert few.finished and again.measured == [] and again.retimed == []
    assert label(few.best_config) == "l=scan×2"
