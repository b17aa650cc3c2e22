"""study/_xla_search: XLA's options as a second stage on the best loop configs, and ``"auto"``'s
rule, decided on them. Every figure is canned (tests/_fake_runner.py), so each test asserts what
was decided: which configs the stages hold and in what order, the budget each stage takes, where
a resumed study goes on, and that one measurement at the rule's line does not decide alone."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optuna
import pytest
from _fake_runner import FakeRunner

import autotune as at
from autotune.program._config import Config
from autotune.program._space import Space
from autotune.program._staged import StagedSpace
from autotune.program._xla import choices, offered
from autotune.select import Point
from autotune.study import _xla_search
from autotune.study._xla_search import AUTO_COMPILE_SHARE, AUTO_MIN_COMPILE_S, XLA_TOP, reserve, searched

N = 1000  # the studies' expected calls


def loop8(x):
    return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=8, name="l")[0]


X = jnp.ones(4)
XLA = choices(offered("cpu", jax.devices()[0].device_kind)[0])
LOOPS = len(Space(at.sites(loop8, X)))  # scan×1, ×2, ×4, for, fori×1, ×2, ×4
STAGE = XLA_TOP * (len(XLA) - 1)


def tune(runner, storage, **options):
    options = {"sampler": "grid", "progress": False, "expected_calls": N, "confirm_rounds": 1, **options}
    return at.tune(loop8, X, runner=runner, storage=str(storage), **options)


def attrs(result, storage) -> dict:
    return optuna.load_study(study_name=result.study_name, storage=f"sqlite:///{storage}").user_attrs


def labels(result, *, xla: bool | None = None) -> list[str]:
    """The trials' configs in trial order (only those with, or without, XLA options)."""
    return [t.config.label() for t in result.trials if xla is None or bool(t.config.xla) == xla]


def run_s(share: float, compile_s: float = 0.3) -> float:
    """The run time per call that makes ``compile_s`` this share of the cost at N calls."""
    return compile_s * (1 - share) / share / N


# ------------------------------------------------------------------------------ the rule


def test_the_rule():
    goal = at.Objective(expected_calls=10)
    compile_heavy = Point(Config(), compile_cost_s=1.0, run_cost_s=0.001)
    run_heavy = Point(Config(), compile_cost_s=0.01, run_cost_s=0.1)
    assert searched(True, None, (), "cpu") and not searched(False, goal, [compile_heavy], "gpu")
    assert searched("auto", goal, (), "gpu")
    assert not searched("auto", goal, (), "cpu")  # nothing measured: the loop configs alone
    assert searched("auto", goal, [compile_heavy], "cpu") and not searched("auto", goal, [run_heavy], "cpu")
    tiny = Point(Config(), compile_cost_s=0.05, run_cost_s=0.0)  # all compile, but below the floor
    assert not searched("auto", goal, [tiny], "cpu")
    # the share is taken from the objective's own line: 8 processes with the cache on make compile a small part
    shared = at.Objective(expected_calls=10, processes=8, compilation_cache=True)
    assert searched("auto", goal, [Point(Config(), 1.0, 0.2)], "cpu")
    assert not searched("auto", shared, [Point(Config(), 1.0, 0.2, load_cost_s=0.01)], "cpu")


@pytest.mark.parametrize("others", [0.3, 0.03])
def test_one_measurement_at_the_line_does_not_decide_alone(others):
    """The default right below and right above the share line, beside two other best loop configs
    clearly on one side: the decision is theirs both times (on the default alone it flips)."""
    goal = at.Objective(expected_calls=N)
    below, above = (Point(Config(), 0.3, run_s(AUTO_COMPILE_SHARE * f)) for f in (0.99, 1.01))
    assert not searched("auto", goal, [below], "cpu") and searched("auto", goal, [above], "cpu")
    rest = [Point(Config({"l": {"repr": "for"}}), 0.3, run_s(others)), Point(Config(xla="xla:O1"), 0.3, run_s(others))]
    assert (
        searched("auto", goal, [below, *rest], "cpu")
        == searched("auto", goal, [above, *rest], "cpu")
        == (others > AUTO_COMPILE_SHARE)
    )
    # the compile floor, the same way
    low, high = (Point(Config(), AUTO_MIN_COMPILE_S * f, 0.0) for f in (0.99, 1.01))
    big = [Point(Config(), 1.0, 0.0)] * 2
    assert searched("auto", goal, [low, *big], "cpu") == searched("auto", goal, [high, *big], "cpu") is True


def test_the_xla_stage_keeps_its_share_of_a_budget():
    staged = StagedSpace(at.sites(loop8, X), xla=XLA, top=3)
    assert len(staged) == LOOPS + STAGE
    assert reserve(len(staged), staged) == STAGE  # a budget for every config: the whole XLA stage
    assert reserve(12, staged) == 6  # else at most half of it...
    assert reserve(LOOPS + 4, staged) == max(4, (LOOPS + 4) // 2)  # ...or what the loop configs leave
    assert reserve(1, staged) == 0


# ------------------------------------------------------------------------------ the stages, end to end

# The loop configs cheapest first at N calls: for, scan×4 (fori×4 lowers to its program), scan×2.
RANKED = {"l=for": (0.5, 1e-4), "l=scan×4": (0.5, 2e-4), "l=scan×2": (0.5, 3e-4), "*": (0.5, 1e-3)}
SHARED = {"l=fori×4": "l=scan×4"}


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_the_xla_stage_follows_the_loop_stage_on_the_best_loop_configs_only(tmp_path):
    r = tune(FakeRunner(loop8, (X,), RANKED, programs=SHARED), tmp_path / "s.db", xla=True)
    assert r.space_size == len(r.trials) == LOOPS + STAGE < LOOPS * len(XLA)
    assert labels(r)[:LOOPS] == labels(r, xla=False)  # every loop config first...
    best = ["l=for", "l=scan×4", "l=scan×2"]  # ...then every choice on the best one, the next...
    assert labels(r, xla=True) == [f"{c}, {x}" for c in best for x in XLA[1:]]  # (fori×4: scan×4's program)
    assert attrs(r, tmp_path / "s.db")["xla_searched"] is True


def test_a_budget_splits_between_the_stages(tmp_path):
    runner = FakeRunner(loop8, (X,), RANKED, programs=SHARED)
    r = tune(runner, tmp_path / "s.db", xla=True, sampler="random", n_trials=10, seed=1)
    staged = StagedSpace(at.sites(loop8, X), xla=XLA, top=3)
    assert len(labels(r, xla=False)) == 10 - reserve(10, staged) == 5 and len(r.trials) == 10
    assert labels(r)[:5] == labels(r, xla=False)
    loops = [t for t in r.trials if not t.config.xla and t.cost is not None]
    best = min(loops, key=lambda t: t.cost).config
    assert [t.config for t in r.trials[5:]] == [best.with_xla(x) for x in XLA[1:6]]


class StopAt(FakeRunner):
    """A fake runner interrupted (as by Ctrl-C) at its ``stop``-th measurement."""

    def __init__(self, *args, stop: int, **kw):
        super().__init__(*args, **kw)
        self.stop = stop

    def measure(self, config, **kw):
        if len(self.measured) + 1 == self.stop:
            raise KeyboardInterrupt
        return super().measure(config, **kw)


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_resumed_study_goes_on_where_it_stopped(tmp_path):
    whole = tune(FakeRunner(loop8, (X,), RANKED, programs=SHARED), tmp_path / "whole.db", xla=True)
    stopped = StopAt(
        loop8, (X,), RANKED, programs=SHARED, stop=1 + (LOOPS - 1) + 4
    )  # the 4th XLA config (the default compiles once: REFERENCE_COMPILES)
    with pytest.raises(KeyboardInterrupt):
        tune(stopped, tmp_path / "s.db", xla=True)
    again = FakeRunner(loop8, (X,), RANKED, programs=SHARED)
    r = tune(again, tmp_path / "s.db", xla=True)
    kept = [t for t in r.trials if t.state != "interrupted"]
    assert [t.config for t in kept] == [t.config for t in whole.trials]  # the same configs, in the same order
    # The resumed run measured the default once (the guard's reference), then the XLA stage's rest
    # from the config it was stopped at, then confirmation's contenders.
    rest = labels(whole, xla=True)[3:]
    assert again.measured[0] == "l=scan×1" and again.measured[1 : 1 + len(rest)] == rest
    assert not any(", xla:" in s for s in again.measured[1 + len(rest) :])
    assert r.space_size == LOOPS + STAGE and tune(FakeRunner(loop8, (X,), RANKED), tmp_path / "s.db").finished


# ------------------------------------------------------------------------------ "auto", end to end


@pytest.mark.parametrize("others", [0.3, 0.03])
@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_default_right_at_the_line_does_not_flip_the_space_between_two_runs(tmp_path, others):
    """Two fresh studies whose default measures right below and right above the share line, the
    other best loop configs (for, scan×4) clearly on one side: both end with the same space."""
    sizes = []
    for i, side in enumerate((0.99, 1.01)):
        costs = {
            "l=scan×1": (0.3, run_s(AUTO_COMPILE_SHARE * side)),
            "l=for": (0.3, 0.6 * run_s(others)),
            "l=scan×4": (0.3, 0.8 * run_s(others)),
            "*": (0.3, 0.5),  # far behind: never among the best
        }
        r = tune(FakeRunner(loop8, (X,), costs), tmp_path / f"s{i}.db")
        held = attrs(r, tmp_path / f"s{i}.db")
        assert held["xla_searched"] is (others > AUTO_COMPILE_SHARE) and len(held["xla_basis"]["configs"]) == 3
        assert len(r.trials) == r.space_size == held["space_size"]
        sizes.append(r.space_size)
    assert sizes[0] == sizes[1] == (LOOPS + STAGE if others > AUTO_COMPILE_SHARE else LOOPS)


def test_a_declined_xla_stage_leaves_the_loop_stage_the_whole_budget_and_stays_declined(tmp_path):
    low = {"*": (0.3, run_s(0.03))}
    r = tune(FakeRunner(loop8, (X,), low), tmp_path / "s.db", sampler="tpe", n_trials=LOOPS)
    assert attrs(r, tmp_path / "s.db")["xla_searched"] is False
    assert len(labels(r, xla=False)) == len(r.trials) == LOOPS == r.space_size
    assert r.complete_range["to_calls"] == float("inf")  # every loop config measured: the loop space is complete
    high = FakeRunner(loop8, (X,), {"*": (0.3, run_s(0.9))})  # the same study, measured compile-heavy now
    again = tune(high, tmp_path / "s.db")
    assert again.finished and again.space_size == LOOPS and not high.measured


def test_a_staged_study_covers_only_its_own_call_count(tmp_path):
    """Its XLA stage took the best loop configs at N calls: at another N others might be."""
    r = tune(FakeRunner(loop8, (X,), RANKED, programs=SHARED), tmp_path / "s.db", xla=True)
    assert r.complete_range["from_calls"] == r.complete_range["to_calls"] == N
    assert "best loop configs only" in r.complete_range["why"]


class OneSlowFirstCompile(at.InProcessRunner):
    """The real in-process runner whose first measurement charges 0.5 CPU s of compile, as one
    moment of load can make a 0.05 s compile look (every later one is real)."""

    def __init__(self, fn, args):
        super().__init__(at.Call(fn, args), {"target_s": 0.01})
        self.measured = 0

    def measure(self, config, **kw):
        m = super().measure(config, **kw)
        self.measured += 1
        return m.replace(compile_cpu_s=0.5) if self.measured == 1 else m


def test_one_slow_compile_of_the_default_does_not_switch_the_xla_options_on(tmp_path):
    """The decision is taken on the loop stage's points, the default's the medians of its three
    reference samples: one slow sample among them does not decide."""

    def fn(x):
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=16, name="l")[0]

    runner = OneSlowFirstCompile(fn, (jnp.ones(3),))
    r = at.tune(
        fn,
        jnp.ones(3),
        expected_calls=10,
        n_trials=2,
        storage=str(tmp_path / "s.db"),
        runner=runner,
        confirm_rounds=1,
        progress=False,
    )
    study = optuna.load_study(study_name=r.study_name, storage="sqlite:///" + str(tmp_path / "s.db"))
    assert study.user_attrs["xla_searched"] is False
    assert all("@xla" not in t.user_attrs["config"] for t in study.trials)
    rounds = study.trials[0].user_attrs["measurement"]["rounds"]  # the default's reference rounds...
    assert len(rounds) == 3 and rounds[0][0] >= 0.5  # ...are the three samples that decided, the slow one first


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_without_stages_the_options_multiply_every_loop_config(tmp_path, monkeypatch):
    """``XLA_TOP = None``: the product space (what ``benchmarks.bench`` measures beside the stages)."""
    monkeypatch.setattr(_xla_search, "XLA_TOP", None)
    r = tune(FakeRunner(loop8, (X,), RANKED), tmp_path / "s.db", xla=True)
    assert r.space_size == len(r.trials) == LOOPS * len(XLA)
