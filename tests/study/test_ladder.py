"""study/_ladder: one scan site's unroll factors walked as a ladder. The walk replayed on trials
(up from the default, then down, each direction stopped by two rungs in a row that improve on
nothing, at once by a rung stopped for its compile or memory); which spaces are ladders and what
``sampler="auto"`` and ``"ladder"`` make of them; and a real study on the CPU whose walk stops
before its trial budget and, run again, has nothing to measure."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import pytest
from _presets import FAST
from jax import lax

import autotune as at
from autotune.measuring._outcome import Outcome
from autotune.program._space import Space
from autotune.select._objective import Objective
from autotune.study._ladder import AHEAD, LadderProposer, is_ladder, rungs
from autotune.study._trials import TrialView
from autotune.study._tune import plan


def rolled(x):
    return lax.scan(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=64)[0]


def from_eight(x):
    return lax.scan(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=64, unroll=8)[0]


def two_sites(x):
    a = lax.scan(lambda c, _: (jnp.sin(c), None), x, length=8)[0]
    return lax.scan(lambda c, _: (jnp.cos(c), None), a, length=8)[0]


def with_fori(x):  # an at.loop that stacks nothing also offers fori_loop: not one ladder
    return at.loop(lambda c, _: (jnp.sin(c), None), x, length=8, name="l")[0]


X = jnp.ones(4)


def views(space, costs: dict) -> list[TrialView]:
    """Trials of ``space``'s rungs: ``{rung index: cost}``, a cost an Outcome for a trial without one."""
    ladder = rungs(space)
    out = []
    for n, (i, cost) in enumerate(costs.items()):
        outcome = cost if isinstance(cost, Outcome) else Outcome.COMPLETE
        values = None if isinstance(cost, Outcome) else (float(cost),)
        out.append(TrialView(n, n, "COMPLETE", outcome, ladder[i].to_json(), None, None, values, {}))
    return out


def walk(space, costs: dict) -> int | None:
    """The next rung's index the ladder measures after ``costs``, or None when its walk has ended."""
    got = LadderProposer(None, space)._next(views(space, costs), set())
    return None if got is None else rungs(space).index(got)


def test_the_rungs_are_the_unroll_factors_by_body_copies_then_the_full_unroll():
    space = Space(at.sites(rolled, X))
    labels = [c.label(space.sites) for c in rungs(space)]
    assert labels[0].endswith("scan×1") and labels[-1].endswith("for") and len(labels) == len(space)
    assert (
        is_ladder(space)
        and not is_ladder(Space(at.sites(two_sites, X)))
        and not is_ladder(Space(at.sites(with_fori, X)))
    )


def test_the_walk_goes_up_until_two_rungs_improve_on_nothing_then_tries_the_full_unroll():
    space = Space(at.sites(rolled, X))  # the default is rung 0, `for` the last
    top = len(space) - 1
    assert walk(space, {0: 10.0}) == 1
    assert walk(space, {0: 10.0, 1: 8.0, 2: 7.0}) == 3  # still falling
    assert walk(space, {0: 10.0, 1: 8.0, 2: 9.0}) == 3  # one miss
    assert walk(space, {0: 10.0, 1: 8.0, 2: 9.0, 3: 8.5}) == top  # two in a row: `for`, then the end
    assert walk(space, {0: 10.0, 1: 8.0, 2: 9.0, 3: 8.5, top: 30.0}) is None
    assert walk(space, {0: 10.0, 1: 8.0, 2: 9.0, 3: 7.0}) == 4  # a miss, then a new best: on
    assert walk(space, {0: 10.0, 1: 12.0, 2: Outcome.ERROR}) == top  # a failed rung is a miss


def test_a_rung_stopped_for_its_compile_or_memory_ends_the_way_up_at_once_full_unroll_included():
    space = Space(at.sites(rolled, X))
    for stopped in (Outcome.PRUNED, Outcome.TIMEOUT, Outcome.OOM):
        assert walk(space, {0: 10.0, 1: 8.0, 2: stopped}) is None, stopped


def test_from_a_default_in_the_middle_the_walk_goes_up_then_down():
    space = Space(at.sites(from_eight, X))
    at_default = [c.to_json() for c in rungs(space)].index(space.default().to_json())
    assert at_default == 3  # scan×1, ×2, ×4, then the program's own ×8
    top = len(space) - 1
    up = {at_default: 10.0, 4: 11.0, 5: 12.0}
    assert walk(space, up) == top  # two misses: `for`, the top rung
    up[top] = 20.0
    assert walk(space, up) == 2  # the way up ended: down from the default
    assert walk(space, {**up, 2: 9.0, 1: 9.5}) == 0  # one miss on the way down
    assert walk(space, {**up, 2: 9.0, 1: 9.5, 0: 9.9}) is None


def clamped(x):  # the program's own unroll is its length: scan×8, a rung below `for` and above every factor
    return at.loop(lambda c, _: (jnp.sin(c), c), x, length=8, name="l", unroll=8)[0][0]


def test_a_default_that_is_no_rung_is_placed_by_its_body_copies():
    space = Space(at.sites(clamped, X))
    default = space.default()
    assert is_ladder(space) and default.to_json() not in [c.to_json() for c in rungs(space)]
    measured = [TrialView(0, 0, "COMPLETE", Outcome.COMPLETE, default.to_json(), None, None, (10.0,), {})]
    proposer = LadderProposer(None, space)
    top = proposer._next(measured, set())
    assert top is not None and top.label(space.sites).endswith("for")  # the one rung above it
    measured.append(TrialView(1, 1, "COMPLETE", Outcome.COMPLETE, top.to_json(), None, None, (20.0,), {}))
    below = proposer._next(measured, set())
    assert below == rungs(space)[-2]  # then down: the largest factor below its 8 copies


def test_a_rung_whose_compile_alone_costs_the_best_ends_the_way_up_as_a_pruned_one_does():
    space = Space(at.sites(rolled, X))  # the default is rung 0: no way down

    def after(compile_s: float, objective: Objective) -> int | None:
        measured = views(space, {0: 10.0, 1: 11.0})  # rung 1 costs more than the default: a miss, or a stop
        measured[1] = dataclasses.replace(
            measured[1], measurement={"trace_s": 0.0, "lower_s": 0.0, "compile_s": compile_s, "run_s": 1e-3}
        )
        ladder = LadderProposer(None, space)
        ladder.objective = objective
        got = ladder._next(measured, set())
        return None if got is None else rungs(space).index(got)

    assert after(10.0, Objective(1)) is None  # as if pruned at its budget: nothing above can win, `for` included
    assert after(4.0, Objective(1)) == 2  # its calls made it dear: one miss, on up
    assert after(10.0, Objective(1, tier_up=True)) == 2  # under tier-up a compile is no one-off charge


def test_a_rung_another_worker_measures_is_passed_over_but_the_full_unroll_waits_for_it():
    space = Space(at.sites(rolled, X))
    ladder = rungs(space)
    measured = views(space, {0: 10.0, 1: 11.0})
    assert LadderProposer(None, space)._next(measured, {ladder[2].to_json()}) == ladder[3]
    assert LadderProposer(None, space)._next(views(space, {0: 10.0, 1: 11.0, 3: 12.0}), {ladder[2].to_json()}) is None


def test_the_builders_are_handed_the_way_up_in_order_but_never_the_full_unroll_ahead_of_it():
    space = Space(at.sites(rolled, X))
    ladder, top = rungs(space), len(space) - 1
    assert AHEAD == 2 and top > AHEAD + 2
    ahead = LadderProposer(None, space)._ahead(views(space, {0: 10.0}), {ladder[1].to_json()}, 4)
    assert ahead == ladder[2:4]  # rung 1 is under way: the two above it, however many builders
    nearly = {i: 10.0 - i for i in range(top - 1)}  # the way up improves up to the rung below the last
    assert LadderProposer(None, space)._ahead(views(space, nearly), set(), 4) == [ladder[top - 1]]
    # `for` waits until the way up has been measured
    done = {0: 10.0, 1: 8.0, 2: 9.0, 3: 8.5}  # two rungs in a row improved on nothing
    assert LadderProposer(None, space)._ahead(views(space, done), set(), 3) == [ladder[top]]


def test_the_walk_down_counts_a_stopped_rung_as_a_miss():
    space = Space(at.sites(from_eight, X))
    top = len(space) - 1
    up = {3: 10.0, 4: 11.0, 5: 12.0, top: 20.0}
    assert walk(space, {**up, 2: Outcome.PRUNED}) == 1  # one miss: on down


def test_auto_takes_the_ladder_only_past_the_grid_and_ladder_is_refused_elsewhere():
    assert plan("auto", "cost", 7, 4, ladder=True) == ("ladder", 4)
    assert plan("auto", "cost", 7, 8, ladder=True) == ("grid", 7)  # it fits: the grid measures it whole
    assert plan("auto", "cost", 7, 4, ladder=False) == ("tpe", 4)
    assert plan("auto", "pareto", 7, 4, ladder=True) == ("nsga2", 4)
    with pytest.raises(at.StudyError, match="^sampler='ladder' walks one scan site's .* not one scan site's: use"):
        plan("ladder", "cost", 7, 4, ladder=False)


def heavy(x):
    # Six ops a step over 128 steps: from a few rungs up, each compiles a clearly larger program.
    def body(c, _):
        for k in range(6):
            c = jnp.sin(c) * 0.9 + jnp.cos(c * (k + 1)) * 0.1
        return c, None

    return lax.scan(body, x, length=128)[0]


@pytest.mark.parametrize("xla", [False, "auto"])  # auto: the ladder is the loop stage (XLA's declined: small compiles)
def test_a_study_walks_the_ladder_stops_before_the_top_and_run_again_measures_nothing(tmp_path, xla):
    # Tuned for one call, compile is the cost: scan×64 (64 copies) costs several times the best
    # of the low rungs, so the way up ends before it whatever the noise among them: at a rung whose
    # compile alone costs the best (pruned at its budget, or measured whole within its grace), or
    # after two misses, and then at the full unroll.
    fn = at.autotuned(heavy, expected_calls=1)
    options = dict(sampler="ladder", storage=str(tmp_path / "s.db"), timing=FAST, progress=False, xla=xla)
    first = fn.tune(jnp.ones(256), **options)
    labels = [t.config.label(first.sites).split("=")[-1] for t in first.trials]
    assert first.sampler == "ladder" and len(labels) < first.space_size == 8
    last, before = first.trials[-1], [t.cost for t in first.trials[:-1] if t.cost is not None]
    stopped = last.state in ("pruned", "timeout") or (
        last.point() is not None and last.point().compile_cost_s >= min(before)  # compile weight 1
    )
    assert "scan×64" not in labels and (stopped or labels[-1] == "for"), (labels, last.state, last.reason)
    again = fn.tune(jnp.ones(256), **options)
    assert again.finished and again.new_trials == 0 and again.best_config == first.best_config
