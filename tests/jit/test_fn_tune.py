"""jit/_fn_tune: ``fn.tune`` at a second input signature starts from what its cache holds for the
first (real studies in this process, real SQLite): the default, then the first signature's
confirmed configs in the order of their cost, then whatever the stop rule decides;
``neighbours=False`` starts from nothing, and a cache that cannot be read seeds nothing."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from _presets import FAST, ONE_ROUND

import autotune as at
from autotune import select as _select


def smooth(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=8, name="l")[0]


def tuned(tmp_path, cache: str = "c.db"):
    return at.autotuned(smooth, cache=str(tmp_path / cache), key="tests:smooth")


def options(tmp_path, **more):
    return {"storage": str(tmp_path / "s.db"), "timing": FAST, "isolate": False, "progress": False, **ONE_ROUND, **more}


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
