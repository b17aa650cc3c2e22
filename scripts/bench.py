"""Benchmark the tuner against the exhaustive grid, random search and fixed loop structures.

For every study (``studies/*.py``), in one run on one machine:

* ``grid``    every config of the space (a fixed random sample of ``--grid-max`` when the
              space is larger, the default always in it): the reference optimum;
* ``tuned``   ``autotune.tune(sampler="auto")`` with 25% of the grid's size as budget (at least 6);
* ``random``  ``autotune.tune(sampler="random")`` at the same budget;
* ``default`` every site at its default (``Space.default()``: ``lax.scan`` unroll 1, or
              an ``at.loop``'s own default);
* ``for``     every site ``{"repr": "for"}`` (fully unrolled / a Python ``for``);
* ``unroll8`` every site ``{"repr": "scan", "unroll": min(8, length)}``;
* ``loop_only`` only where the study searches XLA's compile options (``--xla``; ``auto``
              decides by ``autotune.program._xla.searched`` on the default's measurement): the
              tuner with ``xla=False``, today's loop-only tuner. The grid and ``tuned``
              then span the options too (``xla:O1``...); ``loop_only/tuned`` is what
              the options win (issue 23: >= 1.3 where compile dominates).

Each approach's chosen config is then re-measured in ``--final-processes`` fresh Python
processes (default 3, quick 1), one after another, each an interleaved round robin
(A B C ... B C A ..., ``--rounds`` rounds, the order rotated per round and process;
``scripts/_bench_final.py``): a program's run time differs between processes (code and
buffer placement) by more than within one, so no judgement rests on one process. A
config's final cost comes from the medians over every sample of every process; a ratio
(``default_over_tuned``...) is the median of the per-process ratios, and
``*_over_tuned_per_process`` lists each one. Compile and run seconds are the ones the
objective charges (``Measurement.compile_cost_s``: process CPU seconds of trace + lower +
compile; ``run_cost_s``: the 10th percentile of the timed calls), so load from other
processes stretches neither. Costs use the study's own objective (its decorator's
``expected_calls``, weights). The crossover table re-scores the stored grid
measurements at other call counts (no re-measuring). ``--burner`` keeps one core busy
(``python -c 'while True: pass'``) for the whole run: the loaded machine.

    python scripts/bench.py                       # every study (about 20 min on 2 CPU cores)
    python scripts/bench.py --quick               # CI-sized: light studies, small budgets
    python scripts/bench.py --study hmc --study kalman --json out.json --out out.md
    python scripts/bench.py --studies real        # the real-library studies (needs the examples extra)
    python scripts/bench.py --study hmc --burner  # on a loaded machine: one core kept busy throughout

Outputs: a markdown report (``--out``) and a JSON file (``--json``) of shape
``{"jax", "device", "studies": [{"study", "expected_calls", "grid_size",
"approaches": {name: {"cost", "compile_s", "run_s", "trials", "tuning_wall_s", "config",
"cost_per_process"}}, "default_over_tuned", "default_over_tuned_per_process", "final": {"pids",
"configs": [{"config", "samples": [{"pid", "process", "round", ...}]}]}}]}`` with more fields
(regret, gains, grid points, crossover, settings, load averages).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import inspect
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from _bench_final import aggregate, config_key, final_measure  # noqa: E402  (scripts/ is this file's folder)
from _bench_final import ratio as final_ratio  # noqa: E402
from _burner import burner  # noqa: E402

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
CROSSOVER_CALLS = [1, 10, 100, 1_000, 10_000, 100_000]


# ---------------------------------------------------------------------------------------
# settings


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--study",
        action="append",
        default=None,
        metavar="NAME",
        help="a study under studies/ (repeatable; default: the --studies set)",
    )
    p.add_argument(
        "--studies",
        default="default",
        choices=STUDY_SETS,
        dest="study_set",
        help=f"which set: default ({', '.join(STUDIES)}), real (third-party libraries: "
        f"{', '.join(REAL_STUDIES)}; needs the examples extra) or all",
    )
    p.add_argument(
        "--quick", action="store_true", help="CI-sized: the light studies, a grid sample of 16, short timing, 2 rounds"
    )
    p.add_argument("--json", default=None, metavar="PATH", help="write the results as JSON here")
    p.add_argument("--out", default=None, metavar="PATH.md", help="write the markdown report here")
    p.add_argument("--grid-max", type=int, default=None, help="grid sample size cap (default 64, quick 16)")
    p.add_argument("--budget-frac", type=float, default=0.25, help="tuned/random trials as a fraction of the grid size")
    p.add_argument("--min-trials", type=int, default=6)
    p.add_argument("--sampler", default="auto", choices=["auto", "tpe"], help="sampler of the 'tuned' approach")
    p.add_argument(
        "--rounds", type=int, default=None, help="interleaved final re-measure rounds per process (default 3, quick 2)"
    )
    p.add_argument(
        "--final-processes",
        type=int,
        default=None,
        metavar="K",
        help="fresh processes the final re-measure runs in, one after another (default 3, quick 1)",
    )
    p.add_argument(
        "--burner",
        action="store_true",
        help="keep one core busy (python -c 'while True: pass') for the whole run: the loaded machine",
    )
    p.add_argument(
        "--target-s",
        type=float,
        default=None,
        help="seconds of runtime sampling per measurement (default 0.2, quick 0.05)",
    )
    p.add_argument("--confirm-top", type=int, default=None, help="tune()'s confirm_top (default: tune's own)")
    p.add_argument("--confirm-rounds", type=int, default=None, help="tune()'s confirm_rounds (default: tune's own)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--xla",
        default="auto",
        choices=["auto", "on", "off"],
        help="search XLA's compile options (TuneOptions.xla) in the grid, tuned and random approaches: auto "
        "(the tuner's own rule on the default's measurement), on or off; where searched, a loop_only "
        "approach (xla off) is added",
    )
    p.add_argument(
        "--trial-timeout",
        type=float,
        default=None,
        metavar="S",
        help="stop a grid or tuner trial after S seconds (its worker is killed; default: no limit)",
    )
    p.add_argument(
        "--timing",
        default=None,
        choices=["steady", "blocking", "device"],
        help="how a call's runtime is timed in every approach (default: the tuner's default)",
    )
    p.add_argument("--quiet", action="store_true")
    p.add_argument(
        "--render",
        metavar="JSON",
        default=None,
        help="measure nothing: re-render the markdown (--out, else stdout) from a saved JSON",
    )
    return p


def resolve(a: argparse.Namespace) -> argparse.Namespace:
    a.studies = a.study or study_set(a.study_set, a.quick)
    a.grid_max = a.grid_max or (16 if a.quick else 64)
    a.rounds = a.rounds or (2 if a.quick else 3)
    a.final_processes = a.final_processes or (1 if a.quick else 3)
    if a.rounds < 1 or a.final_processes < 1:
        raise SystemExit("bench: --rounds and --final-processes must be at least 1.")
    a.target_s = a.target_s if a.target_s is not None else (0.05 if a.quick else 0.2)
    for name in a.studies:
        if not os.path.isfile(os.path.join(STUDY_DIR, f"{name}.py")):
            raise SystemExit(f"bench: no study {name!r}: expected studies/{name}.py (have: {', '.join(available())})")
        missing = [lib for lib in REAL_STUDIES.get(name, ()) if not installed(lib)]
        if missing:
            raise SystemExit(
                f"bench: studies/{name}.py needs {', '.join(missing)}, which is not installed; "
                "install the examples extra: pip install -e '.[examples]'"
            )
    return a


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


# ---------------------------------------------------------------------------------------
# helpers


def controller(fn):
    """The :class:`autotune.Autotuned` behind a decorated function (the jit object or itself)."""
    return getattr(fn, "autotune", fn)


def short_site(site_id: str) -> str:
    """``algo/scan@file.py:53`` -> ``scan@53``; an at.loop keeps its name."""
    last = site_id.rsplit("/", 1)[-1]
    if "@" in last and ":" in last:
        kind, where = last.split("@", 1)
        return f"{kind}@{where.rsplit(':', 1)[-1]}"
    return last


def short_names(site_ids: list[str]) -> dict[str, str]:
    """Each site's short name, unique within a study: ``short_site``, or where two would be
    equal (a loop nested in a library's loop written on the same line) the short names of
    every part of its path."""
    base = {sid: short_site(sid) for sid in site_ids}
    clash = {b for b in base.values() if list(base.values()).count(b) > 1}
    return {
        sid: "/".join(short_site(p) for p in sid.split("/")) if base[sid] in clash else base[sid] for sid in site_ids
    }


def choice_label(c: dict[str, Any]) -> str:
    """``for``, ``scan-u4``, ``fori-u2``, ``while-u1``, ``while-u4/cond`` (an unrolled while's guard)."""
    if c.get("repr") == "for":
        return "for"
    text = f"{c.get('repr', 'scan')}-u{c.get('unroll', 1)}"
    if c.get("repr") == "while" and c.get("unroll", 1) > 1:
        text += f"/{c.get('guard') or 'select'}"
    return text


def label(config: dict[str, Any], site_ids: list[str]) -> str:
    names = short_names(site_ids)
    text = ", ".join(f"{names[sid]}={choice_label(config.get(sid, {'repr': 'scan', 'unroll': 1}))}" for sid in site_ids)
    return text + (f", xla:{'+'.join(config['@xla'])}" if config.get("@xla") else "")


def approaches_of(st: dict[str, Any]) -> list[str]:
    """The approaches a study row holds, in report order (``loop_only`` only where XLA was searched)."""
    return APPROACHES + [LOOP_ONLY] * (LOOP_ONLY in st["approaches"])


def xla_dimension(a: argparse.Namespace, runner, objective) -> tuple:
    """The XLA choices the grid and the tuner span for this study (``()``: none; also on a tree
    without ``TuneOptions.xla``): ``--xla on``, or ``auto`` where the tuner's own rule says
    so on a fresh measurement of the default."""
    if a.xla == "off" or not xla_supported():
        return ()
    from autotune import Config
    from autotune.program._xla import choices, offered, searched

    dev = runner.device_info()
    default = runner.measure(Config()) if a.xla == "auto" else None
    if not searched(True if a.xla == "on" else "auto", objective, default, dev["platform"]):
        return ()
    return choices(offered(dev["platform"], dev["device_kind"])[0])


def relabel(result: dict[str, Any]) -> dict[str, Any]:
    """Recompute every display label of a saved result from its configs (``--render``)."""
    for st in result["studies"]:
        site_ids = [x["id"] for x in st["sites"]]
        names = short_names(site_ids)
        for x in st["sites"]:
            x["short"] = names[x["id"]]
        for row in [*st["approaches"].values(), *st.get("grid_points", ()), *st.get("crossover", ())]:
            if "config" in row:
                row["label"] = label(row["config"], site_ids)
    return result


def baseline_configs(space) -> dict[str, Any]:
    from autotune import Config

    def full(e):  # a while loop has no trip count to unroll fully: its baseline is 8 guarded steps
        return {"repr": "while", "unroll": 8} if e.site.kind == "while" else {"repr": "for"}

    def unroll8(e):
        if e.site.kind == "while":
            return {"repr": "while", "unroll": 8}
        return {"repr": "scan", "unroll": min(8, e.site.length)}

    return {
        "default": space.default(),
        "for": Config({e.site.id: full(e) for e in space.entries}),
        "unroll8": Config({e.site.id: unroll8(e) for e in space.entries}),
    }


def grid_configs(space, grid_max: int, seed: int) -> tuple[list, bool]:
    """Every config, or a fixed random sample of ``grid_max`` that always holds the default."""
    configs = list(space.configs())  # the default first
    if len(configs) <= grid_max:
        return configs, False
    rng = random.Random(seed)
    return [configs[0]] + rng.sample(configs[1:], grid_max - 1), True


def measure_point(ctl, ex, config, timing: dict) -> Any:
    """One config measured in this process (the final re-measure's fresh processes, each the
    device's only owner while it runs)."""
    from autotune import measure

    return measure(ctl.fun, ex.args, ex.kwargs, config, jit_kwargs=ctl.jit_kwargs, keep_outputs=True, **timing)


def grid_runner(ctl, ex, timing: dict, a: argparse.Namespace):
    """The grid's runner: a worker process, as the tuner's (this process only traces and lowers;
    on a TPU the worker owns the chip), closed before the tuner starts its own."""
    from autotune.measuring._worker_runner import WorkerRunner

    return WorkerRunner(ctl.fun, ex.args, ex.kwargs, ctl.jit_kwargs, timing, trial_timeout=a.trial_timeout)


def point(m, objective) -> dict[str, Any]:
    return {
        "compile_s": m.compile_cost_s,  # what the objective charges: CPU seconds (load stretches wall time)
        "compile_wall_s": m.compile_total_s,
        "trace_s": m.trace_s,
        "lower_s": m.lower_s,
        "xla_compile_s": m.compile_s,
        "run_s": m.run_cost_s,  # ... and the 10th percentile of the calls (load stretches the median)
        "run_median_s": m.run_s,
        "run_iqr_s": m.run_iqr_s,
        "cost": objective.cost(m),
    }


def tune_supports(name: str) -> bool:
    from autotune import tune

    return name in inspect.signature(tune).parameters


def xla_supported() -> bool:
    """Whether this tree's tuner has the XLA option dimension (``TuneOptions.xla``)."""
    from autotune import TuneOptions

    return hasattr(TuneOptions(), "xla")


def host_devices(name: str) -> int:
    """The devices a study declares it needs (``HOST_DEVICES``), read without importing it."""
    from autotune.record._studyfile import host_devices as declared

    return declared(os.path.join(STUDY_DIR, f"{name}.py"))


def run_own_process(name: str, devices: int, a: argparse.Namespace) -> list[dict[str, Any]]:
    """Run one study in a bench process started with ``devices`` host devices (XLA's flag must
    be set before JAX starts, and this process's JAX already runs) and return its rows."""
    from autotune.record._studyfile import HOST_DEVICES_FLAG

    argv = [
        "--grid-max",
        str(a.grid_max),
        "--budget-frac",
        str(a.budget_frac),
        "--min-trials",
        str(a.min_trials),
        "--sampler",
        a.sampler,
        "--rounds",
        str(a.rounds),
        "--final-processes",
        str(a.final_processes),
        "--target-s",
        str(a.target_s),
        "--seed",
        str(a.seed),
        "--xla",
        a.xla,
    ]
    for flag, value in (("--confirm-top", a.confirm_top), ("--confirm-rounds", a.confirm_rounds)):
        if value is not None:
            argv += [flag, str(value)]
    flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(HOST_DEVICES_FLAG))
    env = dict(os.environ, XLA_FLAGS=f"{flags} {HOST_DEVICES_FLAG}={devices}".strip())
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        out = os.path.join(tmp, "result.json")
        log(a, f"== {name}: in a process of its own with {devices} host devices")
        proc = subprocess.run(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--study",
                name,
                "--json",
                out,
                *argv,
                *(["--quiet"] if a.quiet else []),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{name}: its bench process (with {devices} host devices) exited {proc.returncode}")
        with open(out) as fh:
            child = json.load(fh)
    for row in child["studies"]:
        row["device"] = child["device"]  # the main report's device line names this process's devices
    return child["studies"]


# ---------------------------------------------------------------------------------------
# one study


def run_study(name: str, a: argparse.Namespace) -> list[dict[str, Any]]:
    from autotune import Objective, tune
    from autotune.program._space import Space
    from autotune.record._studyfile import load_examples
    from autotune.study import compare_outputs

    rows = []
    examples = load_examples(os.path.join(STUDY_DIR, f"{name}.py"))
    for ex in examples:
        ctl = controller(ex.fn)
        study = name if len(examples) == 1 else f"{name}:{ctl.__name__}"
        objective = Objective(ctl.expected_calls, ctl.compile_weight, ctl.runtime_weight)
        sites = ctl.sites(*ex.args, **ex.kwargs)
        timing = {"target_s": a.target_s, **({"mode": a.timing} if a.timing else {})}
        runner = grid_runner(ctl, ex, timing, a)
        xla = xla_dimension(a, runner, objective)
        space = Space(sites, xla=xla) if xla else Space(sites)
        site_ids = [e.site.id for e in space.entries]
        log(a, f"== {study}: {len(site_ids)} sites, space {len(space)}, expected_calls={objective.expected_calls:g}")

        # -- grid -----------------------------------------------------------------------
        configs, sampled = grid_configs(space, a.grid_max, a.seed)
        runner.measure(configs[0])  # warm-up, not counted: first traces pay one-off costs
        grid_points, reference = [], None
        t0 = time.perf_counter()
        for i, config in enumerate(configs):
            entry = {"config": config.to_dict(), "label": label(config.to_dict(), site_ids)}
            try:
                m = runner.measure(config)
            except Exception as exc:  # a config that fails is a result
                entry.update(state="fail", reason=f"{type(exc).__name__}: {exc}"[:500])
                grid_points.append(entry)
                continue
            if reference is None:
                reference = m.outputs
            why = compare_outputs(reference, m.outputs) if m.outputs is not None else None
            entry.update(point(m, objective), state="rejected" if why else "complete")
            if why:
                entry["reason"] = why
            grid_points.append(entry)
            log(
                a,
                f"   grid {i + 1}/{len(configs)} {entry['label']}: compile {m.compile_total_s:.3f}s "
                f"run {m.run_s * 1e6:.1f}us cost {entry['cost']:.4g}",
            )
        grid_wall = time.perf_counter() - t0
        runner.close()  # the device goes to the tuner's worker next
        ok = [p for p in grid_points if p.get("state") == "complete"]
        if not ok:
            raise RuntimeError(f"{study}: no grid config compiled and ran")
        grid_best = min(ok, key=lambda p: p["cost"])

        # -- tuned / random -------------------------------------------------------------
        n_trials = max(a.min_trials, math.ceil(a.budget_frac * len(configs)))
        searches = {}
        tmp = tempfile.mkdtemp(prefix=f"bench-{name}-")
        runs = [("tuned", a.sampler, bool(xla)), ("random", "random", bool(xla))]
        for approach, sampler, searched in runs + [(LOOP_ONLY, a.sampler, False)] * bool(xla):
            marks: dict[str, float] = {}
            extra: dict[str, Any] = {"xla": searched} if xla_supported() else {}
            if a.confirm_top is not None:
                extra["confirm_top"] = a.confirm_top
            if a.confirm_rounds is not None:
                extra["confirm_rounds"] = a.confirm_rounds
            if tune_supports("before_finish"):
                extra["before_finish"] = lambda marks=marks: marks.setdefault("search_end", time.perf_counter())
            t0 = time.perf_counter()
            result = tune(
                ctl.fun,
                *ex.args,
                kwargs=ex.kwargs,
                expected_calls=objective.expected_calls,
                compile_weight=objective.compile_weight,
                runtime_weight=objective.runtime_weight,
                n_trials=n_trials,
                sampler=sampler,
                storage=os.path.join(tmp, f"{approach}.db"),
                function_key=ctl.key,
                jit_kwargs=ctl.jit_kwargs,
                seed=a.seed,
                timing=timing,
                trial_timeout=a.trial_timeout,
                **extra,
            )
            wall = time.perf_counter() - t0
            measured = sum(1 for t in result.trials if t.state != "duplicate")
            searches[approach] = {
                "config": result.best_config.to_dict(),
                "wall": wall,
                "search_wall": (marks["search_end"] - t0) if "search_end" in marks else None,
                "trials": len(result.trials),
                "measured": measured,
                "confirm_measurements": sum(len(c.rounds) for c in result.confirmed),
                "sampler": result.sampler,
                "study_cost": result.best_cost,
            }
            log(
                a,
                f"   {approach} ({result.sampler}, {n_trials} trials, {wall:.1f}s): "
                f"{label(result.best_config.to_dict(), site_ids)}",
            )

        # -- the final interleaved re-measure, in fresh processes ---------------------------
        chosen = {approach: s["config"] for approach, s in searches.items()}
        chosen["grid"] = grid_best["config"]
        chosen.update({k: v.to_dict() for k, v in baseline_configs(space).items()})
        # A config that failed in the grid (past --trial-timeout, say) is not re-measured: the final
        # processes have no worker to stop it, and its failure is already the result.
        failed = {config_key(p["config"]): p.get("reason", "failed") for p in grid_points if p.get("state") == "fail"}
        unique: list[str] = []
        for cfg in chosen.values():
            if config_key(cfg) not in unique and config_key(cfg) not in failed:
                unique.append(config_key(cfg))
        measured = final_measure(
            os.path.join(STUDY_DIR, f"{name}.py"),
            ex.index,
            [json.loads(k) for k in unique],
            processes=a.final_processes,
            rounds=a.rounds,
            timing=timing,
            log=lambda msg: log(a, msg),
        )
        final = aggregate(measured, objective, a.final_processes)
        errors = {**{k: f"failed in the grid: {why}" for k, why in failed.items()}, **measured["errors"]}

        approaches = {}
        for approach in APPROACHES + [LOOP_ONLY] * bool(xla):
            cfg = chosen[approach]
            key = config_key(cfg)
            f = final.get(key)
            row = {
                "cost": f["cost"] if f else None,
                "compile_s": f["compile_s"] if f else None,
                "run_s": f["run_s"] if f else None,
                "cost_per_process": f["cost_per_process"] if f else [],
                "samples": f["rounds"] if f else 0,
                "config": cfg,
                "label": label(cfg, site_ids),
            }
            if f is None:
                row["error"] = errors.get(key, "not measured")
            if approach == "grid":
                row.update(trials=len(configs), tuning_wall_s=grid_wall, search_cost=grid_best["cost"])
            elif approach in searches:
                s = searches[approach]
                row.update(
                    trials=s["trials"],
                    measured=s["measured"],
                    tuning_wall_s=s["wall"],
                    search_wall_s=s["search_wall"],
                    confirm_measurements=s["confirm_measurements"],
                    sampler=s["sampler"],
                    search_cost=s["study_cost"],
                )
            else:
                row.update(trials=0, tuning_wall_s=0.0)
            approaches[approach] = row

        def ratio(x, y, per_process=False, chosen=chosen, final=final):
            """The median of the per-process ratios of the two approaches' costs (or the list)."""
            med, each = final_ratio(final.get(config_key(chosen[x])), final.get(config_key(chosen[y])))
            return each if per_process else med

        row = {
            "study": study,
            "function": ctl.key,
            "expected_calls": objective.expected_calls,
            "compile_weight": objective.compile_weight,
            "runtime_weight": objective.runtime_weight,
            "space_size": len(space),
            "grid_size": len(configs),
            "sampled": sampled,
            "n_trials": n_trials,
            "sites": [
                {
                    "id": s.id,
                    "short": short_names(site_ids).get(s.id, short_site(s.id)),
                    "kind": s.kind,
                    "length": s.length,
                    "depth": s.depth,
                }
                for s in space.sites
            ],
            "approaches": approaches,
            "regret": ratio("tuned", "grid"),
            "random_regret": ratio("random", "grid"),
            "random_over_tuned": ratio("random", "tuned"),
            "default_over_tuned": ratio("default", "tuned"),
            "for_over_tuned": ratio("for", "tuned"),
            "unroll8_over_tuned": ratio("unroll8", "tuned"),
            "loop_only_over_tuned": ratio(LOOP_ONLY, "tuned") if xla else None,
            "default_over_tuned_per_process": ratio("default", "tuned", per_process=True),
            "loop_only_over_tuned_per_process": ratio(LOOP_ONLY, "tuned", per_process=True) if xla else None,
            "final": {
                "processes": a.final_processes,
                "rounds": a.rounds,
                "parent_pid": measured["parent_pid"],
                "pids": [p["pid"] for p in measured["processes"]],
                "failed": [p for p in measured["processes"] if p.get("error")],
                "configs": [
                    {
                        "config": json.loads(k),
                        "label": label(json.loads(k), site_ids),
                        "error": errors.get(k),
                        "samples": [
                            {x: v for x, v in s.items() if x != "key"} for s in measured["samples"] if s["key"] == k
                        ],
                    }
                    for k in unique
                ],
            },
            "xla_choices": [str(c) for c in xla],
            "wall_tuned_over_grid": approaches["tuned"]["tuning_wall_s"] / grid_wall if grid_wall else None,
            "grid_points": grid_points,
            "crossover": crossover(grid_points, objective),
        }
        rows.append(row)
    return rows


def crossover(points: list[dict[str, Any]], objective) -> list[dict[str, Any]]:
    """The winning grid config at each call count, re-scored from the grid's measurements."""
    from autotune import Objective

    ok = [p for p in points if p.get("state") == "complete"]
    out = []
    for n in CROSSOVER_CALLS:
        obj = Objective(n, objective.compile_weight, objective.runtime_weight)
        best = min(ok, key=lambda p: obj.cost_of(p["compile_s"], p["run_s"]))
        default = ok[0] if points and points[0].get("state") == "complete" else None
        out.append(
            {
                "expected_calls": n,
                "config": best["config"],
                "label": best["label"],
                "compile_s": best["compile_s"],
                "run_s": best["run_s"],
                "cost": obj.cost_of(best["compile_s"], best["run_s"]),
                "default_cost": obj.cost_of(default["compile_s"], default["run_s"]) if default else None,
            }
        )
    return out


# ---------------------------------------------------------------------------------------
# report


def summary(studies: list[dict[str, Any]]) -> dict[str, Any]:
    def vals(k):
        return [s[k] for s in studies if s.get(k) is not None]

    regrets, rt, dt, wall = (
        vals("regret"),
        vals("random_over_tuned"),
        vals("default_over_tuned"),
        vals("wall_tuned_over_grid"),
    )
    search = [
        s["approaches"]["tuned"]["search_wall_s"] / s["approaches"]["grid"]["tuning_wall_s"]
        for s in studies
        if s["approaches"]["tuned"].get("search_wall_s") and s["approaches"]["grid"].get("tuning_wall_s")
    ]
    budget = [
        s["approaches"]["tuned"]["trials"] / s["grid_size"]
        for s in studies
        if s.get("grid_size") and s["approaches"]["tuned"].get("trials")
    ]
    xla = vals("loop_only_over_tuned")
    each = [r for st in studies for r in st.get("default_over_tuned_per_process") or () if r is not None]
    out = {
        "max_loop_only_over_tuned": max(xla) if xla else None,
        "median_regret": statistics.median(regrets) if regrets else None,
        "max_regret": max(regrets) if regrets else None,
        "tuned_le_random": sum(1 for x in rt if x >= 1.0),
        "tuned_le_random_within_2pct": sum(1 for x in rt if x >= 0.98),
        "studies": len(studies),
        "min_default_over_tuned": min(dt) if dt else None,
        "default_over_tuned_ge_1": sum(1 for x in dt if x >= 1.0),
        # The worst single process of the final re-measurement (the targets read the medians).
        "min_default_over_tuned_per_process": min(each) if each else None,
        "median_wall_tuned_over_grid": statistics.median(wall) if wall else None,
        "max_wall_tuned_over_grid": max(wall) if wall else None,
        "median_search_wall_tuned_over_grid": statistics.median(search) if search else None,
        "max_search_wall_tuned_over_grid": max(search) if search else None,
        # The trials the budget allows, as a share of the grid: the floor under the wall ratio.
        "median_trials_over_grid": statistics.median(budget) if budget else None,
        "max_trials_over_grid": max(budget) if budget else None,
        # Issue 13's targets: >= 6 of 8 is three quarters of the studies.
        "targets": {
            "median_regret<=1.02": bool(regrets) and statistics.median(regrets) <= 1.02,
            "tuned<=random on >=3/4": bool(rt) and sum(1 for x in rt if x >= 1.0) >= 0.75 * len(rt),
            "default/tuned>=0.98 everywhere": bool(dt) and min(dt) >= 0.98,
            "tuned wall median<=35% and max<=60% of grid": bool(wall)
            and statistics.median(wall) <= 0.35
            and max(wall) <= 0.60,
        },
    }
    if xla:  # issue 23: where compile dominates, the XLA options win >= 1.3x over the loop-only tuner
        out["targets"]["loop_only/tuned>=1.3 on a study"] = max(xla) >= 1.3
    return out


def _f(x, fmt="{:.3f}"):
    return "-" if x is None else fmt.format(x)


def _each(ratios) -> str:
    """Per-process ratios as ``1.02 / 0.97 / 1.10`` (``-`` where none)."""
    return " / ".join(_f(r) for r in ratios) if ratios else "-"


def markdown(result: dict[str, Any]) -> str:
    s = result["summary"]
    settings = result["settings"]
    final_k, rounds = settings.get("final_processes"), settings.get("rounds")
    load0, load1 = result.get("loadavg_start"), result.get("loadavg_end")
    lines = [
        "# Benchmark: tuned vs grid, random and fixed loop structures",
        "",
        f"- date: {result['date']}",
        f"- jax {result['jax']} (jaxlib {result['jaxlib']}), python {result['python']}",
        f"- device: {result['device']}",
        f"- machine: {result['machine']}",
        f"- settings: {json.dumps(result['settings'])}",
        *(
            [
                "- load: "
                + (
                    "a CPU burner on one core for the whole run (`python -c 'while True: pass'`)"
                    if settings.get("burner")
                    else "no burner"
                )
                + (f"; load average (1/5/15 min) at start {load0}" if load0 else "")
                + (f", at end {load1}" if load1 else "")
            ]
            if "burner" in settings  # a run from before --burner says nothing of it
            else []
        ),
        f"- total wall: {result['wall_s']:.0f} s"
        + (" (PARTIAL: the run is still going or was stopped)" if result.get("partial") else ""),
        "",
        "cost = compile_weight·(trace+lower+compile) + runtime_weight·expected_calls·run, "
        + (
            f"from a final re-measurement of every approach's config in {final_k} fresh process(es), one after "
            f"another, {rounds} interleaved rounds each (medians over every sample of every process of the "
            "objective's own seconds: compile in CPU s, run the 10th percentile of the calls). A ratio between "
            "approaches is the median of the per-process ratios. "
            if final_k
            else "from one interleaved re-measurement of every approach's config (medians over the rounds of the "
            "objective's own seconds: compile in CPU s, run the 10th percentile of the calls). "
        )
        + "`cost/grid` < 1 is noise in the grid's own pick.",
        "",
        "| study | calls | grid | approach | config | compile s | run µs | cost s | cost/grid | trials "
        "| tuning wall s |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for st in result["studies"]:
        grid_cost = st["approaches"]["grid"]["cost"]
        for i, name in enumerate(approaches_of(st)):
            r = st["approaches"][name]
            g = f"{st['grid_size']}{' (sampled)' if st['sampled'] else ''}" if i == 0 else ""
            calls = format(st["expected_calls"], "g") if i == 0 else ""
            lines.append(
                f"| {st['study'] if i == 0 else ''} | {calls} | {g} | {name} | "
                f"`{r['label']}` | {_f(r['compile_s'])} | {_f(r['run_s'] and r['run_s'] * 1e6, '{:.1f}')} | "
                f"{_f(r['cost'], '{:.4g}')} | "
                f"{_f(r['cost'] / grid_cost if r['cost'] and grid_cost else None, '{:.3f}')} | "
                f"{r['trials']} | {_f(r['tuning_wall_s'], '{:.1f}')} |"
            )
    lines += [
        "",
        "## Per study",
        "",
        "| study | regret tuned/grid | random/grid | random/tuned | default/tuned | default/tuned per process "
        "| for/tuned | unroll8/tuned | wall tuned/grid | search only/grid | grid pick: 1-sample → final cost |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for st in result["studies"]:
        tuned, grid = st["approaches"]["tuned"], st["approaches"]["grid"]
        search = (
            tuned["search_wall_s"] / grid["tuning_wall_s"]
            if tuned.get("search_wall_s") and grid.get("tuning_wall_s")
            else None
        )
        lines.append(
            f"| {st['study']} | {_f(st['regret'])} | {_f(st['random_regret'])} | {_f(st['random_over_tuned'])} | "
            f"{_f(st['default_over_tuned'])} | {_each(st.get('default_over_tuned_per_process'))} | "
            f"{_f(st['for_over_tuned'])} | {_f(st['unroll8_over_tuned'])} | "
            f"{_f(st['wall_tuned_over_grid'], '{:.0%}')} | {_f(search, '{:.0%}')} | "
            f"{_f(grid.get('search_cost'), '{:.4g}')} → {_f(grid['cost'], '{:.4g}')} |"
        )
    lines += [
        "",
        "`per process`: default/tuned in each fresh process of the final re-measurement (the spread between "
        "processes; the column before is their median). `search only`: the tuned study's wall time up to its "
        "confirmation (tune() then re-measures its top configs and the default interleaved, several rounds, each "
        "a fresh compile). `grid pick`: the grid winner's cost from its single grid measurement, then from the "
        "final re-measurement (the minimum of many noisy samples is optimistic, so the grid reference is itself "
        "noisy).",
    ]
    t = s["targets"]
    lines += [
        "",
        "## Targets",
        "",
        f"- median regret cost(tuned)/cost(grid): {_f(s['median_regret'])} (max {_f(s['max_regret'])}); "
        f"target <= 1.02: {'met' if t['median_regret<=1.02'] else 'NOT met'}",
        f"- tuned <= random: {s['tuned_le_random']}/{s['studies']} studies "
        f"({s['tuned_le_random_within_2pct']} within 2%); "
        f"target >= 3/4: {'met' if t['tuned<=random on >=3/4'] else 'NOT met'}",
        f"- default/tuned >= 1.0: {s['default_over_tuned_ge_1']}/{s['studies']} "
        f"(min {_f(s['min_default_over_tuned'])}; in a single process of the final re-measurement "
        f"min {_f(s.get('min_default_over_tuned_per_process'))}); "
        f"target >= 0.98 everywhere: {'met' if t['default/tuned>=0.98 everywhere'] else 'NOT met'}",
        f"- tuning wall tuned/grid: median {_f(s['median_wall_tuned_over_grid'], '{:.0%}')}, "
        f"max {_f(s['max_wall_tuned_over_grid'], '{:.0%}')}; target median <= 35%, max <= 60%: "
        f"{'met' if t['tuned wall median<=35% and max<=60% of grid'] else 'NOT met'} (search only, without "
        f"tune()'s confirmation: median {_f(s.get('median_search_wall_tuned_over_grid'), '{:.0%}')}, "
        f"max {_f(s.get('max_search_wall_tuned_over_grid'), '{:.0%}')}; the trial budget alone is "
        f"median {_f(s.get('median_trials_over_grid'), '{:.0%}')}, max {_f(s.get('max_trials_over_grid'), '{:.0%}')} "
        f"of the grid's configs)",
        "",
    ]
    searched = [st for st in result["studies"] if st.get("loop_only_over_tuned") is not None]
    if searched:
        lines += [
            "## XLA compile options: the tuner against the loop-only tuner (xla off)",
            "",
            "| study | calls | XLA choices | loop-only config | loop-only cost s | tuned config | tuned cost s "
            "| loop-only/tuned | per process |",
            "|---|---:|---|---|---:|---|---:|---:|---:|",
        ]
        for st in searched:
            lo, tu = st["approaches"][LOOP_ONLY], st["approaches"]["tuned"]
            lines.append(
                f"| {st['study']} | {st['expected_calls']:g} | {len(st['xla_choices'])} | `{lo['label']}` | "
                f"{_f(lo['cost'], '{:.4g}')} | `{tu['label']}` | {_f(tu['cost'], '{:.4g}')} | "
                f"{_f(st['loop_only_over_tuned'])} | {_each(st.get('loop_only_over_tuned_per_process'))} |"
            )
        met = t.get("loop_only/tuned>=1.3 on a study")
        lines += [
            "",
            f"- max loop-only/tuned {_f(s['max_loop_only_over_tuned'])}; target >= 1.3 where compile "
            f"dominates: {'met' if met else 'NOT met'}",
        ]
    lines += [
        "",
        "## Crossover: the grid's winner at other call counts (re-scored, not re-measured)",
        "",
    ]
    for st in result["studies"]:
        legend = ", ".join(f"`{x['short']}` = {x['id']} ({x['kind']}, length {x['length']})" for x in st["sites"])
        lines += [
            f"### {st['study']} (tuned for {st['expected_calls']:g} calls)",
            "",
            f"Sites: {legend}.",
            "",
            "| calls | winner | compile s | run µs | cost s | default cost s |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        for c in st["crossover"]:
            lines.append(
                f"| {c['expected_calls']:g} | `{c['label']}` | {c['compile_s']:.3f} | {c['run_s'] * 1e6:.1f} | "
                f"{c['cost']:.4g} | {_f(c['default_cost'], '{:.4g}')} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    now = loadavg()
    load = f", load average at start {now[0]:.1f}" if now else ""
    return f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} logical CPUs{load}"


def loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the system has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def write(result: dict[str, Any], a: argparse.Namespace, started: float) -> str:
    result["wall_s"] = time.perf_counter() - started
    result["summary"] = summary(result["studies"])
    text = markdown(result)
    for path, content in ((a.json, None), (a.out, text)):
        if not path:
            continue
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path + ".tmp", "w") as fh:
            if content is None:
                json.dump(result, fh, indent=1)
            else:
                fh.write(content)
        os.replace(path + ".tmp", path)
    return text


def main(argv: list[str] | None = None) -> dict[str, Any]:
    a = build_parser().parse_args(argv)
    if a.render:
        with open(a.render) as fh:
            result = relabel(json.load(fh))
        result["summary"] = summary(result["studies"])
        text = markdown(result)
        if a.out:
            with open(a.out, "w") as fh:
                fh.write(text)
        else:
            print(text)
        return result
    a = resolve(a)
    from autotune.measuring import _host

    _host.pin()  # this process traces and lowers; workers and the final processes own the device, one at a time
    import jax
    import jaxlib

    started = time.perf_counter()
    machine = machine_line()
    dev = _host.target_device()
    result: dict[str, Any] = {
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", "?"),
        "python": platform.python_version(),
        "device": f"{dev['platform']}:{dev['device_kind']} x{dev['device_count']}",
        "machine": machine,
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "settings": {
            "studies": a.study_set,
            "quick": a.quick,
            "grid_max": a.grid_max,
            "budget_frac": a.budget_frac,
            "min_trials": a.min_trials,
            "sampler": a.sampler,
            "rounds": a.rounds,
            "final_processes": a.final_processes,
            "burner": a.burner,
            "target_s": a.target_s,
            "seed": a.seed,
            "confirm_top": a.confirm_top,
            "confirm_rounds": a.confirm_rounds,
            "xla": a.xla,
            "timing": a.timing or "default",
            "trial_timeout": a.trial_timeout,
        },
        "loadavg_start": loadavg(),
        "studies": [],
    }
    with burner(a.burner):
        for i, name in enumerate(a.studies):
            t0 = time.perf_counter()
            devices = host_devices(name)
            own = devices > jax.device_count()
            result["studies"].extend(run_own_process(name, devices, a) if own else run_study(name, a))
            result["partial"] = i + 1 < len(a.studies)  # written after every study, so a long run leaves results
            result["loadavg_end"] = loadavg()
            text = write(result, a, started)
            log(a, f"   {name}: {time.perf_counter() - t0:.0f}s")
    if not a.quiet:
        print(text)
    s = result["summary"]
    print(
        f"SUMMARY median regret {_f(s['median_regret'])} | tuned<=random {s['tuned_le_random']}/{s['studies']} | "
        f"min default/tuned {_f(s['min_default_over_tuned'])} | wall tuned/grid median "
        f"{_f(s['median_wall_tuned_over_grid'], '{:.0%}')} max {_f(s['max_wall_tuned_over_grid'], '{:.0%}')} | "
        f"total {result['wall_s']:.0f}s",
        flush=True,
    )
    return result


if __name__ == "__main__":
    main()
