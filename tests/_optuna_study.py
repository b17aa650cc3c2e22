"""A study with one config slow to compile, tuned in a subprocess, and a wait for its trial of
that config (tests/study/test_optuna.py, test_interrupt.py)."""

import os
import subprocess
import sys
import textwrap

import optuna
from _repo import repo_env
from _wait import wait_until

# A study whose full unroll compiles for seconds (about 3 s of CPU; its other configs under 1 s
# each, so a walk of the whole grid stays short): a trial is RUNNING long enough to kill.
STUDY = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    def body(c, _):
        for k in range(8):
            c = jnp.sin(c) * 0.9 + jnp.cos(c * (k + 1)) * 0.1
        return c, None

    @at.autotuned(expected_calls=10**6, key="slowstudy:f")
    def f(x):
        return at.loop(body, x, length=200, name="slow", repr="scan")[0]

    def examples():
        return [(f, (jnp.ones(8),))]
""")

TUNE = textwrap.dedent("""
    import sys
    sys.path.insert(0, {folder!r})
    import slowstudy
    slowstudy.f.tune(*slowstudy.examples()[0][1], sampler="grid", storage={storage!r}, isolate=False,
                     timing={{"target_s": 0.01, "min_reps": 3, "warmup": 1}}, confirm_rounds=1, progress=False)
""")


def start_tuner(tmp_path, **env):
    (tmp_path / "slowstudy.py").write_text(STUDY)
    storage = str(tmp_path / "studies.db")
    script = TUNE.format(folder=str(tmp_path), storage=storage)
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        env=repo_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return proc, storage


def wait_for_running(storage: str, proc, timeout: float = 240.0):
    """The study's RUNNING trial of the slow (fully unrolled) config, once the tuner is in it."""

    def running() -> tuple[str, int] | None:
        assert proc.poll() is None, proc.communicate()
        if not os.path.exists(storage):
            return None
        try:
            names = optuna.study.get_all_study_names(storage="sqlite:///" + storage)
        except Exception:
            names = []
        for name in names:
            study = optuna.load_study(study_name=name, storage="sqlite:///" + storage)
            for t in study.get_trials(deepcopy=False):
                if t.state.name == "RUNNING" and '"for"' in t.user_attrs.get("config", ""):
                    return name, t.number
        return None

    found = wait_until(running, timeout=timeout, interval=0.2)
    assert found, "the tuner never started measuring the slow config"
    return found
