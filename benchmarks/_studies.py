"""The bench's studies and names: which studies run, how a config and its sites are labelled
(autotune's own notation, ``s1=scan×4``), and one config measured in this process.

A leaf of ``benchmarks.bench``: it imports nothing else of ``benchmarks``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY_DIR = os.path.join(ROOT, "studies")

# Every study, lightest first; --quick runs QUICK_STUDIES.
STUDIES = [
    "lambda_returns",
    "seed_rollout",
    "demo_unroll",
    "gru_encoder",
    "ode_rk4",
    "kalman",
    "hmc",
    "scan_layers",
    "rl_cartpole",
    "xla_unrolled",
]
QUICK_STUDIES = ["lambda_returns", "seed_rollout"]
# The studies of real third-party code (studies/real_*.py), lightest first, and what each
# imports: they need `pip install -e '.[examples]'`. A study that declares HOST_DEVICES
# (the 8-device mesh ones) runs in a bench process of its own started with that many devices.
REAL_STUDIES = {
    "real_numpyro_ar": ("numpyro",),
    "real_flax_lstm": ("flax",),
    "real_optax_train": ("optax",),
    "real_optimistix_newton": ("optimistix", "lineax"),
    "real_equinox_stack": ("equinox",),
    "real_blackjax_hmc": ("blackjax",),
    "real_flax_transformer": ("flax",),
    "real_sharded_train": (),
    "real_shard_map": (),
    "real_diffrax_ode": ("diffrax", "equinox"),
}
QUICK_REAL_STUDIES = ["real_numpyro_ar"]
STUDY_SETS = ("default", "real", "all")
APPROACHES = ["grid", "tuned", "random", "default", "for", "unroll8"]
LOOP_ONLY = "loop_only"
"""The extra approach of a study that searches the XLA options: the tuner with ``xla=False``."""
PRODUCT = "product"
"""... and the tuner without its two stages: every loop config times every XLA choice in one space."""
CROSSOVER_CALLS = [1, 10, 100, 1_000, 10_000, 100_000]


def study_path(name: str) -> str:
    return os.path.join(STUDY_DIR, f"{name}.py")


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def study_set(name: str, quick: bool) -> list[str]:
    """The studies of a ``--studies`` set."""
    default = QUICK_STUDIES if quick else STUDIES
    real = QUICK_REAL_STUDIES if quick else list(REAL_STUDIES)
    return {"default": default, "real": real, "all": default + real}[name]


def available() -> list[str]:
    return sorted(f[:-3] for f in os.listdir(STUDY_DIR) if f.endswith(".py") and not f.startswith("_"))


def log(a, *msg) -> None:
    if not a.quiet:
        print(*msg, file=sys.stderr, flush=True)


def controller(fn):
    """The :class:`autotune.Autotuned` behind a decorated function (the jit object or itself)."""
    return getattr(fn, "autotune", fn)


def site_names(sites: list[Any]) -> dict[str, str]:
    """``{site id: short name}`` by the CLI's rule (an ``at.loop``'s name, else ``s1``, ``s2``...);
    ``sites`` are ``LoopSite`` objects or the report's site dicts (``id``, ``kind``)."""
    from autotune._display import site_names as names

    return names(sites)


def label(config: dict[str, Any], sites: list[Any]) -> str:
    """A config in autotune's notation with the CLI's site names: ``s1=scan×4, smooth=for, xla:O1``."""
    from autotune.program._config import config_label

    return config_label(config, [{"id": sid, "name": short} for sid, short in site_names(sites).items()])


def approaches_of(st: dict[str, Any]) -> list[str]:
    """The approaches a study row holds, in report order (``loop_only``, ``product`` only where XLA was searched)."""
    return APPROACHES + [x for x in (LOOP_ONLY, PRODUCT) if x in st["approaches"]]


def measure_point(ctl, ex, config, timing: dict) -> Any:
    """One config measured in this process (the final re-measure's fresh processes, each the
    device's only owner while it runs)."""
    from autotune import measure

    return measure(ctl.fun, ex.args, ex.kwargs, config, jit_kwargs=ctl.jit_kwargs, keep_outputs=True, **timing)
