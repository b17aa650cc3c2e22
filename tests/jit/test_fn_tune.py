"""jit/_fn_tune: ``fn.tune`` at a second input signature starts from what its cache holds for the
first (real studies in this process, real SQLite): the default, then the first signature's
confirmed configs in the order of their cost, then whatever the stop rule decides;
``neighbours=False`` starts from nothing, and a cache that cannot be read seeds nothing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optuna
import pytest
from _presets import FAST, ONE_ROUND

import autotune as at
from autotune import select as _select
from autotune.measuring._measurement import device_memory
from autotune.program._config import Config


def smooth(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=8, name="l")[0]


def tuned(tmp_path, cache: str = "c.db"):
    return at.autotuned(smooth, cache=str(tmp_path / cache), key="tests:smooth")


def options(tmp_path, **more):
    return {"storage": str(tmp_path / "s.db"), "timing": FAST, "isolate": False, "progress": False, **ONE_ROUND, **more}


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_a_second_signature_starts_from_the_firsts_configs(tmp_path):
    f = tuned(tmp_path)
    first = f.tune(jnp.ones(4), n_trials=5, sampler="grid", **options(tmp_path))
    assert first.seeding is None  # nothing in the cache yet
    second = f.tune(jnp.ones(8), n_trials=6, **options(tmp_path))
    s = second.seeding
    assert s is not None and [src.signature for src in s.sources] == [first.signature]
    ranked = [p.config for p in _select.ranked(first.confirmed, second.objective, first.default_config)]
    assert list(s.seeds) == [c for c in ranked if c != second.default_config][:3]
    assert [t.config for t in second.trials[: 1 + len(s.seeds)]] == [second.default_config, *s.seeds]
    assert s.verdict is not None and (len(second.trials) == 1 + len(s.seeds)) == s.stopped
    # Without neighbours the same signature is a study from nothing.
    alone = f.tune(jnp.ones(8), n_trials=2, study_name="alone", **options(tmp_path, neighbours=False))
    assert alone.seeding is None and len(alone.trials) == 2


def test_a_cache_that_cannot_be_read_seeds_nothing_with_one_warning(tmp_path):
    (tmp_path / "c.db").write_bytes(b"not a database" * 100)
    f = tuned(tmp_path)
    with pytest.warns(RuntimeWarning, match="could not read the cache's configs of tests:smooth"):
        with pytest.raises(at.CacheError, match="not a database"):  # storing the winner fails, as it always did
            f.tune(jnp.ones(8), n_trials=2, **options(tmp_path))


# -- memory: the figure stored, and a budget -------------------------------------------------------
def outer_rollout(x, w):
    """A scan whose stacked outputs a Python ``for`` builds at once: fully unrolled, its temporaries
    grow from a few KiB to the whole stack (1 MiB on the CPU), so a budget between the two configs'
    device memory leaves scan configs in and ``for`` out."""

    def body(c, _):
        y = jnp.tanh(c @ w)
        return y, jnp.outer(y[0], y[0])

    return jax.lax.scan(body, x, None, length=16)


ROLLOUT_ARGS = (jnp.ones((8, 128)), jnp.ones((128, 128)))


def study_trials(tmp_path, name: str):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{tmp_path / 's.db'}").trials


def rollout(tmp_path, **decorator):
    return at.autotuned(outer_rollout, cache=str(tmp_path / "c.db"), key="tests:rollout", **decorator)


def test_the_stored_figure_is_what_memory_analysis_reports_for_the_decorators_executable(tmp_path):
    f = rollout(tmp_path)
    r = f.tune(*ROLLOUT_ARGS, n_trials=3, sampler="grid", **options(tmp_path))
    entry = f.config_for(*ROLLOUT_ARGS).entry
    assert entry is not None and Config.from_dict(entry.config) == r.best_config
    stats = f.lower(*ROLLOUT_ARGS).compile().memory_analysis()
    expected = (
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
        + stats.generated_code_size_in_bytes
        - stats.alias_size_in_bytes
    )
    assert entry.measurements["memory_bytes"] == expected == r.best.memory_bytes
    assert entry.measurements["memory_temp_bytes"] == stats.temp_size_in_bytes
    assert all(p.get("memory_bytes") is not None for p in entry.pareto)  # every confirmed point keeps its figure
    attrs = [t.user_attrs for t in study_trials(tmp_path, r.study_name) if t.user_attrs.get("measurement")]
    assert attrs and all(a["memory_bytes"] == device_memory(a["measurement"]["memory"]) for a in attrs)


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_under_a_budget_a_config_over_it_never_wins_and_each_budget_keeps_its_own_entry(tmp_path):
    site = at.sites(outer_rollout, *ROLLOUT_ARGS)[0].id
    unrolled, rolled = Config({site: {"repr": "for"}}), Config({site: {"repr": "scan", "unroll": 1}})
    sizes = {
        c: at.measure(outer_rollout, ROLLOUT_ARGS, config=c, target_s=0.01).memory_bytes for c in (unrolled, rolled)
    }
    assert sizes[rolled] < sizes[unrolled]  # the premise: unrolling holds the whole stack at once
    budget = (sizes[rolled] + sizes[unrolled]) // 2
    free, held = rollout(tmp_path), rollout(tmp_path, max_memory=budget)
    kept = held.tune(*ROLLOUT_ARGS, sampler="grid", **options(tmp_path))  # the whole space: "for" among it
    assert kept.objective.max_memory == budget and f"mem<={budget}" in kept.study_name
    assert kept.best.memory_bytes <= budget and kept.best_config != unrolled
    over = [t for t in kept.trials if t.config == unrolled]
    assert over and "over the memory budget" in over[0].reason and over[0].memory_bytes == sizes[unrolled]
    told = {t.number: t for t in study_trials(tmp_path, kept.study_name)}[over[0].number]
    assert told.user_attrs["memory_over_bytes"] == sizes[unrolled] - budget > 0
    said = told.constraints  # what Optuna's samplers read: a dict from Optuna 5 on, a list before
    assert list(said.values() if isinstance(said, dict) else said) == [sizes[unrolled] - budget]
    assert all(unrolled not in (p.config, *p.equivalent) for p in kept.confirmed)  # never confirmed
    # Unbudgeted, the same function has no entry: the budgeted one does not stand in for it.
    assert free.config_for(*ROLLOUT_ARGS).source == "default"
    free.tune(*ROLLOUT_ARGS, n_trials=4, sampler="grid", **options(tmp_path))
    mine, theirs = held.config_for(*ROLLOUT_ARGS), free.config_for(*ROLLOUT_ARGS)
    assert mine.source == theirs.source == "cache" and mine.device_key != theirs.device_key
    assert mine.entry.objective["max_memory"] == budget and "max_memory" not in theirs.entry.objective
    assert Config.from_dict(mine.entry.config) == kept.best_config


def _checkpointed_step(ws, x):
    def layer(h, w):
        return h + jnp.tanh(jnp.tanh(h @ w) @ w.T), None

    def loss(ws):
        y, _ = jax.lax.scan(jax.checkpoint(layer, policy=jax.checkpoint_policies.dots_saveable), x, ws)
        return jnp.mean(y * y)

    return jax.grad(loss)(ws)


STEP_ARGS = (jnp.full((4, 16, 64), 0.05), jnp.ones((128, 16)))


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_under_a_budget_the_default_is_over_the_leanest_config_is_measured_next(tmp_path):
    # A sampler learns what fits only from trials that fit: the config likeliest to fit (rolled
    # loops, the checkpointed body saving nothing) is trial 1, whatever the sampler draws.
    sites = at.sites(_checkpointed_step, *STEP_ARGS)
    derived = next(s for s in sites if s.policy is not None)
    policy = {derived.id: {"policy": "nothing"}}
    lean = Config({s.id: {"repr": "scan", "unroll": 1, **policy.get(s.id, {})} for s in sites})
    sizes = {c: at.measure(_checkpointed_step, STEP_ARGS, config=c, target_s=0.01).memory_bytes for c in (None, lean)}
    assert sizes[lean] < sizes[None]  # the premise: saving nothing keeps less than saving the dots
    f = at.autotuned(_checkpointed_step, key="tests:checkpointed", max_memory=(sizes[lean] + sizes[None]) // 2)
    r = f.tune(*STEP_ARGS, n_trials=3, sampler="random", seed=3, **options(tmp_path))
    assert [t.config for t in r.trials[:2]] == [r.default_config, lean]
    assert "over the memory budget" in r.trials[0].reason and r.trials[1].memory_bytes == sizes[lean]
    assert r.best_config == lean or r.best.memory_bytes <= f.autotune.objective.max_memory
