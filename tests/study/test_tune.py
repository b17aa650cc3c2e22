"""at.tune: finds clear winners, resumes, counts distinct measurements, survives signals, never loses to the default."""

import json

import jax.numpy as jnp
import optuna
import pytest
from _presets import STEADY

import autotune as at
from autotune import cli
from autotune import select as _select
from autotune.cache import Cache
from autotune.select import pareto_front

# Measured in this process: what these tests check is the study, not the worker
# (tests/measuring/process/test_worker_runner.py).
IN_PROCESS = {"timing": STEADY, "confirm_rounds": 1, "isolate": False}


def skipped(t) -> bool:
    """A trial closed on its predicted compile time, before compiling: no measurement."""
    if t.skipped:  # the record says so in one field; its state and reason say it to people
        assert t.state == "pruned" and t.reason.startswith("skipped before compiling"), t
        assert t.to_dict()["predicted_compile_s"] == t.predicted_compile_s > 0
    return t.skipped


def measured(trials) -> list:
    """The trials that count toward n_trials: not duplicates, not skipped on a prediction."""
    return [t for t in trials if t.state != "duplicate" and not skipped(t)]


def heavy(x):
    # A body with many ops over 32 steps: full unroll makes XLA compile a much larger program.
    def body(c, _):
        for k in range(6):
            c = jnp.sin(c) * 0.9 + jnp.cos(c * (k + 1)) * 0.1
        return c, None

    return at.loop(body, x, length=32, name="heavy")[0]


def tiny(x):
    # One scalar op per step.
    return at.loop(lambda c, _: (c * 0.999 + 0.001, None), x, length=32, name="tiny")[0]


def last_only(xs):
    # Each step overwrites the carry: unrolled, XLA drops every step but the last
    # (cross-iteration dead-code elimination a rolled loop cannot do).
    def body(c, x):
        y = jnp.tanh(x @ x) @ x
        return jnp.tanh(y @ y), None

    return at.loop(body, jnp.zeros((48, 48)), xs, name="last")[0]


@pytest.mark.timing  # its decision rests on real timings: tests/study/test_decisions.py asserts it on canned ones
def test_compile_only_objective_never_picks_full_unroll(tmp_path):
    r = at.tune(
        heavy,
        jnp.ones(16),
        expected_calls=0,
        storage=str(tmp_path / "s.db"),
        sampler="grid",
        timing=STEADY,
        confirm_rounds=2,
    )
    assert r.sampler == "grid" and len(r.trials) == r.space_size
    assert r.best_config["heavy"].repr != "for", r.best_config
    for_trials = [t for t in r.trials if t.config["heavy"].repr == "for"]
    # The full unroll either gets pruned by the compile budget or costs far more.
    assert for_trials and all(t.state == "pruned" or t.cost > 1.5 * r.best_cost for t in for_trials)


@pytest.mark.timing  # its decision rests on real timings: tests/study/test_decisions.py asserts it on canned ones
def test_finds_the_clear_winner(tmp_path):
    xs = jnp.ones((32, 48, 48)) * 0.01
    r = at.tune(
        last_only,
        xs,
        expected_calls=1000,
        storage=str(tmp_path / "s.db"),
        sampler="grid",
        timing=STEADY,
        isolate=False,  # confirmation's own 3 rounds: with 2, one slow compile is half of a median
    )
    rounds = "; ".join(  # what decided, should this fail: each contender's (compile s, run µs) per round
        f"{p.config}: " + " ".join(f"({c:.3f}, {run * 1e6:.0f})" for c, run in p.rounds) for p in r.confirmed
    )
    assert r.best_config["last"] == at.SiteChoice("for"), rounds  # with an XLA option or not
    assert r.default_cost > 2 * r.best_cost


def test_trial_zero_is_default_and_measurements_are_stored(tmp_path):
    storage = str(tmp_path / "s.db")
    r = at.tune(tiny, jnp.ones(()), n_trials=3, sampler="random", storage=storage, **IN_PROCESS)
    study = optuna.load_study(study_name=r.study_name, storage="sqlite:///" + storage)
    first = study.trials[0]
    assert at.Config.from_json(first.user_attrs["config"]) == at.Config({"tiny": {"repr": "scan", "unroll": 1}})
    m = first.user_attrs["measurement"]
    assert {"trace_s", "lower_s", "compile_s", "run_s"} <= set(m) and m["run_s"] > 0
    assert all(t.user_attrs.get("device") for t in study.trials)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_resume_continues_the_same_study(tmp_path):
    storage = str(tmp_path / "s.db")
    r1 = at.tune(tiny, jnp.ones(()), n_trials=3, sampler="tpe", storage=storage, **IN_PROCESS)
    r2 = at.tune(tiny, jnp.ones(()), n_trials=5, sampler="tpe", storage=storage, **IN_PROCESS)
    assert r1.study_name == r2.study_name
    assert len(measured(r1.trials)) == 3 and len(measured(r2.trials)) == 5
    assert [t.config for t in r2.trials[: len(r1.trials)]] == [t.config for t in r1.trials]


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_grid_resume_measures_nothing_twice(tmp_path):
    storage = str(tmp_path / "s.db")
    r1 = at.tune(tiny, jnp.ones(()), sampler="grid", storage=storage, **IN_PROCESS)
    r2 = at.tune(tiny, jnp.ones(()), sampler="grid", storage=storage, **IN_PROCESS)
    assert len(r2.trials) == len(r1.trials) == r1.space_size


@pytest.mark.timing  # its decision rests on real timings: tests/study/test_decisions.py asserts it on canned ones
def test_rescore_flips_with_call_count(tmp_path):
    r = at.tune(heavy, jnp.ones(16), storage=str(tmp_path / "s.db"), sampler="grid", **IN_PROCESS)
    few, _ = r.rescore(at.Objective(expected_calls=0))
    assert few["heavy"].repr != "for"
    assert len(r.pareto) >= 1
    fastest_run = min(r.pareto, key=lambda p: p.run_cost_s)
    many, _ = r.rescore(at.Objective(expected_calls=1e12))
    assert many == fastest_run.config


def test_pareto_front_by_hand():
    pts = [{"config": {}, "compile_s": c, "run_s": r} for c, r in [(1, 5), (2, 3), (3, 4), (4, 1), (5, 1)]]
    assert [(p.compile_cost_s, p.run_cost_s) for p in pareto_front(pts)] == [(1, 5), (2, 3), (4, 1)]


def test_bad_sampler_and_trials():
    with pytest.raises(at.StudyError, match="sampler"):
        at.tune(tiny, jnp.ones(()), sampler="annealing")
    with pytest.raises(at.StudyError, match="n_trials"):
        at.tune(tiny, jnp.ones(()), n_trials=0)


# --------------------------------------------------------------- distinct measurements


def two_loops(x):
    # 2 sites x (scan unroll 1, 2, 4, 8, 16 + for + fori 1..16) : a space of over 60 configs.
    a = at.loop(lambda c, _: (c * 0.999 + 0.001, None), x, length=32, name="a")[0]
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5, None), a, length=32, name="b")[0]


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_every_trial_is_a_new_measurement_and_the_default_is_measured_three_times(tmp_path):
    storage = str(tmp_path / "s.db")
    r = at.tune(
        two_loops,
        jnp.ones(4),
        n_trials=30,
        sampler="tpe",
        storage=storage,
        timing=STEADY,
        confirm_rounds=1,
        isolate=False,
    )
    assert r.space_size >= 60
    configs = [t.config for t in r.trials]
    duplicates = sum(1 for t in r.trials if t.state == "duplicate")
    assert duplicates <= 0.05 * len(r.trials)
    # n_trials counts measurements: a config skipped on its predicted compile time is recorded
    # (pruned, with the prediction as its reason) but does not use up the budget.
    assert len(measured(r.trials)) == 30 and len({c.to_json() for c in configs}) == len(configs)
    assert all(t.measurement is None and t.compile_s_at_least for t in r.trials if skipped(t))
    first = r.trials[0]
    assert first.config == r.default_config and len(first.measurement["rounds"]) == 3
    # The study's sampler really is TPE, and no trial was told a copied value.
    study = optuna.load_study(study_name=r.study_name, storage="sqlite:///" + storage)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert all(t.user_attrs["outcome"] in ("complete", "shared") for t in complete)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_random_and_grid_never_repeat_and_resume_without_repeating(tmp_path):
    storage = str(tmp_path / "s.db")
    r1 = at.tune(
        two_loops,
        jnp.ones(4),
        n_trials=8,
        sampler="random",
        storage=storage,
        timing=STEADY,
        confirm_rounds=1,
        isolate=False,
    )
    r2 = at.tune(
        two_loops,
        jnp.ones(4),
        n_trials=14,
        sampler="random",
        storage=storage,
        timing=STEADY,
        confirm_rounds=1,
        isolate=False,
    )
    assert len(measured(r1.trials)) == 8 and len(measured(r2.trials)) == 14
    assert len({t.config.to_json() for t in r2.trials}) == len(r2.trials)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_the_winner_cost_and_the_stored_winner_come_from_the_one_rule(tmp_path):
    from autotune import select as _select

    r = at.tune(
        heavy,
        jnp.ones(16),
        storage=str(tmp_path / "s.db"),
        sampler="grid",
        timing=STEADY,
        confirm_rounds=3,
        isolate=False,
    )
    choice = _select.choose(r.confirmed, r.objective, default=r.default_config)
    assert r.best_config == choice.config and r.best_cost == choice.cost
    assert r.rescore(r.objective) == (r.best_config, r.best_cost)
    # every contender's rounds (a challenger that lost a round the race counts leaves the rest, and the
    # default left alone takes no more)
    (default,) = [p for p in r.confirmed if p.config == r.default_config]
    assert all(1 <= len(p.rounds) <= 3 for p in r.confirmed)
    assert len(default.rounds) == max(len(p.rounds) for p in r.confirmed)
    study = optuna.load_study(study_name=r.study_name, storage="sqlite:///" + str(tmp_path / "s.db"))
    assert study.user_attrs["winner"] == r.best_config.to_dict()
    # A grid that measured everything is complete for every call count it did not stop a config for.
    assert r.complete_range["from_calls"] == 0.0


def test_a_config_predicted_far_over_the_budget_is_skipped_not_compiled(tmp_path):
    from autotune.program._space import Space
    from autotune.study._predict import CompilePredictor

    space = Space(at.sites(heavy, jnp.ones(16)))
    predictor = CompilePredictor(space)
    configs = list(space.configs())
    fake = {c.to_json(): 0.1 + 0.01 * sum(_copies(space, c).values()) for c in configs}
    for c in configs[:6]:
        predictor.observe(c, fake[c.to_json()])
    full = next(c for c in configs if c["heavy"].repr == "for")
    predicted = predictor.predict(full)
    assert predicted == pytest.approx(fake[full.to_json()], rel=0.05)
    assert predictor.over_budget(full, predicted / 2.5) == pytest.approx(predicted)
    assert predictor.over_budget(full, predicted) is None  # within the margin: compile it


def _copies(space, config):
    from autotune.study._predict import copies

    return copies(space, config)


# --------------------------------------------------------------- NSGA-II tuning


def smooth(x):
    return at.loop(lambda c, _: (jnp.sin(0.5 * c) + 1.0, None), x, length=8, name="smooth")[0]


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_pareto_search_with_nsga2(tmp_path):
    storage = str(tmp_path / "s.db")
    fast = {"timing": STEADY, "confirm_rounds": 1, "isolate": False}
    r = at.tune(smooth, jnp.zeros(16), search="pareto", n_trials=6, storage=storage, expected_calls=1000, **fast)
    assert (r.search, r.sampler) == ("pareto", "nsga2")
    assert r.study_name.endswith("/pareto")
    study = optuna.load_study(study_name=r.study_name, storage="sqlite:///" + storage)
    assert len(study.directions) == 2
    assert study.user_attrs["search"] == "pareto"
    complete = [t for t in study.get_trials() if t.state.name == "COMPLETE"]
    assert len(study.get_trials()) == 6 and complete
    for t in complete:  # both objectives: the compile seconds charged (CPU) and run seconds
        m = t.user_attrs["measurement"]
        charged = at.Measurement.from_dict(m)
        assert t.values == pytest.approx([charged.compile_cost_s, charged.run_cost_s])
    # The winner is the confirmed config cheapest for expected_calls; the trials have costs.
    assert r.best_cost == _select.choose(r.confirmed, r.objective, default=r.default_config).cost
    assert all(t.cost is not None for t in r.trials if t.state == "complete")
    assert r.pareto and r.default_cost >= r.best_cost

    # Another call count re-uses the same study (its name has no call count) and picks from the front.
    r2 = at.tune(smooth, jnp.zeros(16), search="pareto", n_trials=7, storage=storage, expected_calls=1, **fast)
    assert r2.study_name == r.study_name and len(r2.trials) == 7
    # A cost search of the same function is a different study.
    assert (
        at.tune(smooth, jnp.zeros(16), n_trials=2, storage=storage, sampler="random", confirm_top=1, **fast).study_name
        != r.study_name
    )
    with pytest.raises(at.StudyError, match="search='fastest' is not one of"):
        at.tune(smooth, jnp.zeros(16), search="fastest", storage=storage)


STUDY_FILE = """
import jax.numpy as jnp
import autotune as at

@at.autotuned(expected_calls=100)
def smooth(x):
    return at.loop(lambda c, _: (jnp.sin(0.5 * c) + 1.0, None), x, length=4, name="smooth")[0]

def examples():
    return [(smooth, (jnp.zeros(8),))]
"""


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_cli_tune_objective_pareto_stores_a_pareto_entry(tmp_path, capsys):
    study_file = tmp_path / "at_pareto_cli_study.py"
    study_file.write_text(STUDY_FILE)
    cache = str(tmp_path / "cache.db")
    argv = ["tune", str(study_file), "--search", "pareto", "--trials", "3", "--cache", cache, "--json"]
    argv += ["--run-seconds", "0.01"]
    assert cli.main(argv) == 0
    (res,) = json.loads(capsys.readouterr().out)
    assert res["study"].endswith("/pareto") and res["pareto"]
    (entry,) = Cache(cache).entries()
    assert entry.study_name == res["study"] and entry.pareto and entry.config == res["best_config"]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    names = optuna.study.get_all_study_names(storage="sqlite:///" + str(tmp_path / "studies.db"))
    assert names == [res["study"]]


# --------------------------------------------------------------- a finished study stays finished


class CountingRunner(at.InProcessRunner):
    """A real in-process runner that counts what it was asked to measure."""

    def __init__(self, fn, *args):
        super().__init__(at.Call(fn, args), STEADY)
        self.calls = 0

    def measure(self, config, **kw):
        self.calls += 1
        return super().measure(config, **kw)

    def retime(self, config):
        self.calls += 1
        return super().retime(config)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_finished_study_measures_nothing_until_its_budget_grows(tmp_path):
    storage, x = str(tmp_path / "s.db"), jnp.ones(())

    def run(n, **kw):
        runner = CountingRunner(tiny, x)
        return at.tune(
            tiny,
            x,
            runner=runner,
            n_trials=n,
            sampler="random",
            storage=storage,
            confirm_rounds=2,
            progress=False,
            **kw,
        ), runner

    (first, r1), (again, r2) = run(2), run(2)
    assert not first.finished and first.new_trials == 2 and r1.calls > 0
    assert again.finished and again.new_trials == 0 and r2.calls == 0
    assert again.confirmed == first.confirmed and again.best_config == first.best_config
    assert again.best_cost == first.best_cost and len(again.trials) == len(first.trials)
    (more, r3), (retimed, r4) = run(3), run(3, reconfirm=True)
    assert not more.finished and more.new_trials == 1 and len(measured(more.trials)) == 3 and r3.calls > 0
    assert not retimed.finished and retimed.new_trials == 0 and r4.calls > 0
    assert retimed.confirmed != more.confirmed  # re-timed: new figures, the same trials
    assert [t.number for t in retimed.trials] == [t.number for t in more.trials]


def _entry_row(cache: str):
    import sqlite3

    with sqlite3.connect(cache) as db:
        return db.execute("SELECT * FROM autotune_entries").fetchall()


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_fn_tune_again_keeps_the_entry_byte_for_byte_and_reconfirm_changes_it_only_on_a_win(tmp_path):
    cache = str(tmp_path / "cache.db")
    fn = at.autotuned(tiny, cache=cache, key="test:finished")
    tune = lambda **kw: fn.tune(
        jnp.ones(()), n_trials=3, timing=STEADY, confirm_rounds=2, isolate=False, progress=False, **kw
    )
    first = tune()
    row = _entry_row(cache)
    assert first.stored == "written" and len(row) == 1
    again = tune()
    assert again.finished and again.stored == "kept" and again.new_trials == 0
    assert _entry_row(cache) == row  # not even rewritten with the same values
    retimed = tune(reconfirm=True)
    assert not retimed.finished and retimed.confirmed != first.confirmed
    # Only a challenger that beat the stored winner in these paired rounds replaces the entry.
    assert (retimed.stored == "kept") == (retimed.best_config == first.best_config)
    assert (_entry_row(cache) == row) == (retimed.stored == "kept")
    # A fresh cache for the same finished study gets the entry, from the stored confirmation.
    other = fn.autotune.with_options(cache=str(tmp_path / "other.db"))
    restored = other.tune(jnp.ones(()), n_trials=3, storage=str(tmp_path / "studies.db"), isolate=False, progress=False)
    assert restored.finished and restored.stored == "written"
    assert restored.best_config == retimed.best_config


def _pt(name, rounds):
    cfg = at.Config({"s": {"repr": "scan", "unroll": name}})
    return _select.Point(cfg, sorted(c for c, _ in rounds)[1], sorted(r for _, r in rounds)[1], rounds=rounds)


def test_a_new_pick_replaces_the_studys_winner_only_by_beating_it_in_the_paired_rounds():
    from autotune.study._tune import keep_or_replace

    goal = at.Objective(expected_calls=0)  # cost = compile seconds
    d, x = _pt(1, [(1.0, 0), (1.0, 0), (1.0, 0)]), _pt(2, [(0.8, 0), (0.8, 0), (0.8, 0)])
    w = _pt(4, [(0.7, 0), (0.9, 0), (0.7, 0)])  # beats the default in every round, the incumbent in 2 of 3
    default = d.config
    assert keep_or_replace([d, x, w], goal, default, None).config == w.config  # no incumbent: the rule
    assert keep_or_replace([d, x, w], goal, default, x.config).config == x.config
    w2 = _pt(4, [(0.7, 0), (0.7, 0), (0.7, 0)])
    assert keep_or_replace([d, x, w2], goal, default, x.config).config == w2.config
    # The incumbent no longer beats the default, but the default does not beat it in every round: it stays.
    x2 = _pt(2, [(1.1, 0), (0.9, 0), (1.1, 0)])
    assert keep_or_replace([d, x2], goal, default, x2.config).config == x2.config
    x3 = _pt(2, [(1.1, 0), (1.2, 0), (1.1, 0)])
    assert keep_or_replace([d, x3], goal, default, x3.config).config == d.config
    # An incumbent that was not re-timed cannot be compared: the rule's pick.
    assert keep_or_replace([d, w], goal, default, x.config).config == w.config


def test_a_finished_pareto_study_re_picks_for_another_call_count_without_measuring(tmp_path):
    storage, x = str(tmp_path / "s.db"), jnp.zeros(16)

    def run(calls):
        runner = CountingRunner(smooth, x)
        return at.tune(
            smooth,
            x,
            runner=runner,
            search="pareto",
            n_trials=3,
            storage=storage,
            expected_calls=calls,
            confirm_rounds=1,
            progress=False,
        ), runner

    (first, _), (other, counted) = run(1000), run(1)
    assert other.finished and counted.calls == 0 and other.confirmed == first.confirmed
    pick = _select.winner(first.confirmed, at.Objective(expected_calls=1), first.default_config)
    assert other.best_config == pick.config


def test_a_stored_entry_of_the_same_study_stands_unless_beaten_in_these_paired_rounds():
    from types import SimpleNamespace as NS

    from autotune.cache._store import entry_stands

    goal = at.Objective(expected_calls=0)
    x, w = _pt(2, [(0.8, 0), (0.8, 0), (0.8, 0)]), _pt(4, [(0.7, 0), (0.9, 0), (0.7, 0)])
    entry = lambda p, study="s": NS(study_name=study, objective=goal.to_dict(), config=p.config.to_dict())  # noqa: E731
    result = lambda **kw: NS(**{"finished": False, "new_trials": 0, "confirmed": [x, w], "objective": goal, **kw})
    assert not entry_stands(None, entry(w), result())  # nothing stored
    assert not entry_stands(entry(x, "another study"), entry(w), result())
    assert entry_stands(entry(x), entry(w), result(finished=True))  # nothing was measured
    assert entry_stands(entry(x), entry(x), result())  # the same winner, only re-timed
    assert not entry_stands(entry(x), entry(x), result(new_trials=2))  # the same winner, more evidence
    assert entry_stands(entry(x), entry(w), result())  # w wins 2 of 3 rounds against x: not enough
    w3 = _pt(4, [(0.7, 0), (0.7, 0), (0.7, 0)])
    assert not entry_stands(entry(x), entry(w3), result(confirmed=[x, w3]))
    assert not entry_stands(entry(x), entry(w), result(confirmed=[w]))  # x not re-timed: no comparison
