"""The Optuna study: finds clear winners, resumes, never loses to the default, re-scores."""

import jax.numpy as jnp
import optuna
import pytest

import autotune as at
from autotune._study import compare_outputs, pareto_front

FAST = {"target_s": 0.02, "min_reps": 3, "warmup": 1}


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


def test_compile_only_objective_never_picks_full_unroll(tmp_path):
    r = at.tune(heavy, jnp.ones(16), expected_calls=0, storage=str(tmp_path / "s.db"), sampler="grid",
                timing=FAST, confirm_rounds=2)
    assert r.sampler == "grid" and len(r.trials) == r.space_size
    assert r.best_config["heavy"].repr != "for", r.best_config
    for_trials = [t for t in r.trials if t.config["heavy"].repr == "for"]
    # The full unroll either gets pruned by the compile budget or costs far more.
    assert for_trials and all(t.state == "pruned" or t.cost > 1.5 * r.best_cost for t in for_trials)


def test_finds_the_clear_winner(tmp_path):
    xs = jnp.ones((32, 48, 48)) * 0.01
    r = at.tune(last_only, xs, expected_calls=1000, storage=str(tmp_path / "s.db"), sampler="grid",
                timing=FAST, confirm_rounds=2)
    assert r.best_config == at.Config({"last": {"repr": "for"}})
    assert r.default_cost > 2 * r.best_cost


def test_trial_zero_is_default_and_measurements_are_stored(tmp_path):
    storage = str(tmp_path / "s.db")
    r = at.tune(tiny, jnp.ones(()), n_trials=3, sampler="random", storage=storage, timing=FAST, confirm_rounds=1)
    study = optuna.load_study(study_name=r.study_name, storage="sqlite:///" + storage)
    first = study.trials[0]
    assert at.Config.from_json(first.user_attrs["config"]) == at.Config({"tiny": {"repr": "scan", "unroll": 1}})
    m = first.user_attrs["measurement"]
    assert {"trace_s", "lower_s", "compile_s", "run_s"} <= set(m) and m["run_s"] > 0
    assert all(t.user_attrs.get("device") for t in study.trials)


def test_resume_continues_the_same_study(tmp_path):
    storage = str(tmp_path / "s.db")
    r1 = at.tune(tiny, jnp.ones(()), n_trials=3, sampler="tpe", storage=storage, timing=FAST, confirm_rounds=1)
    r2 = at.tune(tiny, jnp.ones(()), n_trials=5, sampler="tpe", storage=storage, timing=FAST, confirm_rounds=1)
    assert r1.study_name == r2.study_name
    assert len(r1.trials) == 3 and len(r2.trials) == 5
    assert [t.config for t in r2.trials[:3]] == [t.config for t in r1.trials]


def test_grid_resume_measures_nothing_twice(tmp_path):
    storage = str(tmp_path / "s.db")
    r1 = at.tune(tiny, jnp.ones(()), sampler="grid", storage=storage, timing=FAST, confirm_rounds=1)
    r2 = at.tune(tiny, jnp.ones(()), sampler="grid", storage=storage, timing=FAST, confirm_rounds=1)
    assert len(r2.trials) == len(r1.trials) == r1.space_size


def test_rescore_flips_with_call_count(tmp_path):
    r = at.tune(heavy, jnp.ones(16), storage=str(tmp_path / "s.db"), sampler="grid", timing=FAST, confirm_rounds=1)
    few, _ = r.rescore(at.Objective(expected_calls=0))
    assert few["heavy"].repr != "for"
    assert len(r.pareto) >= 1
    fastest_run = min(r.pareto, key=lambda p: p["run_s"])
    many, _ = r.rescore(at.Objective(expected_calls=1e12))
    assert many == at.Config.from_dict(fastest_run["config"])


def test_pareto_front_by_hand():
    pts = [{"config": {}, "compile_s": c, "run_s": r} for c, r in [(1, 5), (2, 3), (3, 4), (4, 1), (5, 1)]]
    assert [(p["compile_s"], p["run_s"]) for p in pareto_front(pts)] == [(1, 5), (2, 3), (4, 1)]


def test_compare_outputs_tolerance():
    a = jnp.linspace(0, 1, 100, dtype=jnp.float32)
    assert compare_outputs(a, a + 1e-7) is None
    assert "differs" in compare_outputs(a, a.at[3].add(0.01))
    assert "2 leaves" in compare_outputs((a,), (a, a))


def test_bad_sampler_and_trials():
    with pytest.raises(at.StudyError, match="sampler"):
        at.tune(tiny, jnp.ones(()), sampler="annealing")
    with pytest.raises(at.StudyError, match="n_trials"):
        at.tune(tiny, jnp.ones(()), n_trials=0)


def test_a_challenger_must_beat_the_default_in_most_rounds():
    from autotune._study import pick_winner

    default = at.Config({"l": {"repr": "scan", "unroll": 1}})
    other = {"l": {"repr": "for", "unroll": 1}}
    row = lambda cfg, cost, rounds: {"config": cfg, "cost": cost, "round_costs": rounds}  # noqa: E731
    # Lower median, but it won only one paired round of three: noise, the default stays.
    noisy = [row(default.to_dict(), 1.0, [0.9, 1.0, 1.3]), row(other, 0.95, [0.95, 1.1, 0.7])]
    assert pick_winner(noisy, default)["config"] == default.to_dict()
    clear = [row(default.to_dict(), 1.0, [1.0, 1.1, 0.9]), row(other, 0.5, [0.5, 0.6, 0.4])]
    assert pick_winner(clear, default)["config"] == other
