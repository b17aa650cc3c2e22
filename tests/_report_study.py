"""A tiny real study for the report tests, built once per test session.

Every config of one 8-step loop is measured in-process, with a failed, a rejected and a
timed-out trial; and a study with hand-written attributes (as ``tune()`` writes them)
whose dominated default wins the paired rounds, and whose range stops at 2,000 calls.
"""

from __future__ import annotations

import dataclasses
import json

import optuna
from _presets import FAST

import autotune as at
from autotune.measuring._runner import InProcessRunner
from autotune.record._studyfile import load_examples

PNG = b"\x89PNG\r\n\x1a\n"
STUDY_FILE = """
import jax.numpy as jnp
import autotune as at

@at.autotuned(expected_calls=1000)
def smooth(x):
    return at.loop(lambda c, _: (jnp.sin(0.5 * c) + 1.0, None), x, length=8, name="smooth")[0]

def examples():
    return [(smooth, (jnp.zeros(16),))]
"""
_BUILT: dict[str, dict] = {}


class Troubled(InProcessRunner):
    """A real runner that fails the fully unrolled config and corrupts fori x4's outputs."""

    def measure(self, config, **options):
        if any(c.repr == "for" for c in config.values()):
            raise RuntimeError("simulated XLA failure: out of memory while compiling the unrolled loop")
        m = super().measure(config, **options)
        if any(c.repr == "fori" and c.unroll == 4 for c in config.values()):
            m = dataclasses.replace(m, outputs=m.outputs + 1.0)
        return m


def tune_study_file(path, text: str, runner: type[InProcessRunner]):
    """Write ``text`` to ``path`` and grid-tune its one example in-process with ``runner``,
    into ``studies.db`` beside it: ``(path, storage, result, function key)``."""
    path.write_text(text)
    (ex,) = load_examples(str(path))
    storage = str(path.parent / "studies.db")
    result = at.tune(
        ex.fn.fun,
        *ex.args,
        function_key=ex.fn.key,
        expected_calls=1000,
        storage=storage,
        sampler="grid",
        timing=FAST,
        runner=runner(at.Call(ex.fn.fun, ex.args), FAST),
        confirm_rounds=1,
        # The loop space only: under load the default's compile can pass the floor at which `auto`
        # adds XLA's options, and a config with them would pass the runners' "only the plain scan".
        xla=False,
        progress=False,
    )
    return path, storage, result, ex.fn.key


def tiny_study(tmp_path_factory) -> dict:
    """The tiny study of the module docstring: ``root``, ``file``, ``storage``, ``result``, ``key``."""
    if "tiny" in _BUILT:
        return _BUILT["tiny"]
    root = tmp_path_factory.mktemp("report")
    path, storage, result, key = tune_study_file(root / "at_report_tiny_study.py", STUDY_FILE, Troubled)
    # A trial that some other worker timed out (as a worker process records it).
    s = optuna.load_study(study_name=result.study_name, storage="sqlite:///" + storage)
    s.add_trial(
        optuna.trial.create_trial(
            state=optuna.trial.TrialState.FAIL,
            user_attrs={
                "config": json.dumps({"smooth": {"repr": "scan", "unroll": 2}}),
                "outcome": "timeout",
                "reason": "trial timeout: compile + run took longer than 30 s, and the worker "
                "/tmp/a/very/long/path/to/the/worker_process_that_was_killed_after_it_hung.py was killed",
            },
        )
    )
    _BUILT["tiny"] = {"root": root, "file": str(path), "storage": storage, "result": result, "key": key}
    return _BUILT["tiny"]


SITE = {
    "id": "l",
    "kind": "loop",
    "length": 8,
    "depth": 0,
    "parent": None,
    "source": None,
    "name": "l",
    "has_ys": False,
    "default": {"repr": "scan", "unroll": 1},
    "form": "loop",
    "derived": False,
}
DEFAULT = {"l": {"repr": "scan", "unroll": 1}}
FOR = {"l": {"repr": "for", "unroll": 1}}
FORI = {"l": {"repr": "fori", "unroll": 1}}
# FORI dominates the default on both medians, but loses two of three paired rounds to it:
# the rule keeps the default, which then owns call counts although it is off the front.
CONFIRMED = [
    {
        "config": DEFAULT,
        "compile_s": 0.96,
        "run_s": 0.96e-3,
        "rounds": [[0.90, 0.90e-3], [0.96, 0.96e-3], [1.50, 1.50e-3]],
    },
    {
        "config": FORI,
        "compile_s": 0.95,
        "run_s": 0.95e-3,
        "rounds": [[0.95, 0.95e-3], [0.97, 0.97e-3], [0.91, 0.91e-3]],
    },
    {"config": FOR, "compile_s": 4.0, "run_s": 1e-4, "rounds": [[4.0, 1e-4], [4.0, 1e-4], [4.0, 1e-4]]},
]
RETUNE = "autotune tune /studies/forged.py --expected-calls {calls}"


def forge_study(storage: str, key: str, site: dict, default: dict, confirmed: list, **more) -> optuna.Study:
    """An empty study ``<key>@f00d/cpu`` in ``storage``, with the attributes ``tune()`` writes
    for one site on a CPU (``more`` adds some, such as ``retune``)."""
    study = optuna.create_study(study_name=f"{key}@f00d/cpu", storage="sqlite:///" + storage)
    attrs = {
        "function_key": key,
        "fingerprint": "f00d",
        "search": "cost",
        "sites": [site],
        "objective": {"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
        "default_config": default,
        "confirmed": confirmed,
        **more,
        "device": {"platform": "cpu", "device_kind": "cpu", "device_count": 1, "jax": "x", "jaxlib": "x"},
    }
    for k, v in attrs.items():
        study.set_user_attr(k, v)
    return study


def forged_study(tmp_path_factory) -> dict:
    """A study written as ``tune()`` writes its attributes (no trial measured here): the
    confirmed points above, a complete range [0, 2,000] and a re-tune command."""
    if "forged" in _BUILT:
        return _BUILT["forged"]
    root = tmp_path_factory.mktemp("forged")
    storage = str(root / "studies.db")
    complete = {"from_calls": 0.0, "to_calls": 2000.0, "why": "2 config(s) were stopped"}
    study = forge_study(storage, "forged:step", SITE, DEFAULT, CONFIRMED, retune=RETUNE, complete_range=complete)
    name = study.study_name
    for config, (c, r) in ((DEFAULT, (0.9, 0.9e-3)), (FORI, (0.95, 0.95e-3)), (FOR, (4.0, 1e-4))):
        study.add_trial(
            optuna.trial.create_trial(
                state=optuna.trial.TrialState.COMPLETE,
                value=c + 1000 * r,
                user_attrs={
                    "config": json.dumps(config),
                    "outcome": "complete",
                    "measurement": {"trace_s": 0.0, "lower_s": 0.0, "compile_s": c, "run_s": r},
                },
            )
        )
    _BUILT["forged"] = {"root": root, "storage": storage, "name": name}
    return _BUILT["forged"]


def check_png(path) -> tuple[int, int]:
    """A real PNG: the signature, decodable, not blank, of a reasonable size."""
    data = path.read_bytes()
    assert data[:8] == PNG, path
    import matplotlib.image

    img = matplotlib.image.imread(str(path))
    assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 500
    assert img[..., :3].std() > 0.05  # not a blank canvas
    return img.shape[1], img.shape[0]
