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
              decides as the tuner does at its loop stage's end,
              ``autotune.study._xla_search.searched``, on the loop grid's best configs): the
              tuner with ``xla=False``, the loop-only tuner. The grid then adds the product's XLA
              variants (``xla:O1``...), ``tuned`` and ``random`` try the options in their second
              stage; ``loop_only/tuned`` is what the options win (target: >= 1.3 where compile
              dominates);
* ``product`` there too: the tuner without its stages, every loop config times every XLA
              choice in one space (``benchmarks._xla_grid``), at the same budget.

Each approach's chosen config is then re-measured in ``--final-processes`` fresh Python
processes (default 3, quick 1), one after another, each an interleaved round robin
(A B C ... B C A ..., ``--rounds`` rounds, the order rotated per round and process;
``benchmarks._final``): a program's run time differs between processes (code and
buffer placement) by more than within one, so no judgement rests on one process. A
config's final cost comes from the medians over every sample of every process; a ratio
(``default_over_tuned``...) is the median of the per-process ratios, and
``*_over_tuned_per_process`` lists each one. Compile and run seconds are the ones the
objective charges (``compile_cost_s``: process CPU seconds of trace + lower + compile;
``run_cost_s``: the 10th percentile of the timed calls; the JSON's names are autotune's,
``docs/architecture.md``), so load from other
processes stretches neither. Costs use the study's own objective (its decorator's
``expected_calls``, weights). The crossover table re-scores the stored grid
measurements at other call counts (no re-measuring). ``--burner`` keeps one core busy
(``python -c 'while True: pass'``) for the whole run: the loaded machine.

    python -m benchmarks.bench                    # every study (about 20 min on 2 CPU cores)
    python -m benchmarks.bench --quick              # CI-sized: light studies, small budgets
    python -m benchmarks.bench --study hmc --study kalman --json out.json --out out.md
    python -m benchmarks.bench --studies real       # the real-library studies (needs the examples extra)
    python -m benchmarks.bench --study hmc --burner # on a loaded machine: one core kept busy throughout

Outputs: a markdown report (``--out``) and a JSON file (``--json``) of shape
``{"jax", "device", "studies": [{"study", "expected_calls", "grid_size",
"approaches": {name: {"cost", "compile_cost_s", "run_cost_s", "trials", "tuning_wall_s", "config",
"cost_per_process"}}, "default_over_tuned", "default_over_tuned_per_process", "final": {"pids",
"configs": [{"config", "samples": [{"pid", "process", "round", ...}]}]}}]}`` with more fields
(regret, gains, grid points, crossover, settings, load averages). ``--render`` also reads a
result written before the rename (``compile_s`` / ``run_s`` then the charged figures).

The modules: this one (the command line and the run), ``_study_run`` (one study),
``_final`` (the fresh-process re-measure), ``_rows`` (a study's row), ``_xla_grid`` (the XLA
dimension: the grid's decision, stages against the product), ``_tables`` (the report), ``_studies`` (names).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks._burner import burner
from benchmarks._studies import (
    REAL_STUDIES,
    ROOT,
    STUDIES,
    STUDY_SETS,
    available,
    installed,
    log,
    study_path,
    study_set,
)
from benchmarks._study_run import run_study
from benchmarks._tables import _f, loadavg, machine_line, markdown, relabel, summary

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
        "(the tuner's own rule on the loop grid's best configs), on or off; where searched, the loop_only "
        "(xla off) and product (no stages) approaches are added",
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
    p.add_argument(
        "--max-memory",
        default=None,
        metavar="SIZE",
        help="a memory budget for every approach (12GiB, bytes, or a fraction of the device's): the tuner tunes "
        "under it and the grid's best is the best config that fits it",
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
        raise SystemExit("benchmarks.bench: --rounds and --final-processes must be at least 1.")
    a.target_s = a.target_s if a.target_s is not None else (0.05 if a.quick else 0.2)
    from autotune.select._budget import parse

    a.max_memory = parse(a.max_memory, "--max-memory")  # bytes or a fraction, turned into bytes per study
    for name in a.studies:
        if not os.path.isfile(study_path(name)):
            raise SystemExit(
                f"benchmarks.bench: no study {name!r}: expected studies/{name}.py (have: {', '.join(available())})"
            )
        missing = [lib for lib in REAL_STUDIES.get(name, ()) if not installed(lib)]
        if missing:
            raise SystemExit(
                f"benchmarks.bench: studies/{name}.py needs {', '.join(missing)}, which is not installed; "
                "install the examples extra: pip install -e '.[examples]'"
            )
    return a


def host_devices(name: str) -> int:
    """The devices a study declares it needs (``HOST_DEVICES``), read without importing it."""
    from autotune.record._studyfile import host_devices as declared

    return declared(study_path(name))


def child_argv(a: argparse.Namespace) -> list[str]:
    """This run's settings as the flags of a child bench process."""
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
    more = (("--confirm-top", a.confirm_top), ("--confirm-rounds", a.confirm_rounds), ("--max-memory", a.max_memory))
    for flag, value in more:
        if value is not None:
            argv += [flag, str(value)]
    return argv


def run_own_process(name: str, devices: int, a: argparse.Namespace) -> list[dict[str, Any]]:
    """Run one study in a bench process started with ``devices`` host devices (XLA's flag must
    be set before JAX starts, and this process's JAX already runs) and return its rows."""
    from autotune.record._studyfile import HOST_DEVICES_FLAG

    argv = child_argv(a)
    flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(HOST_DEVICES_FLAG))
    env = dict(os.environ, XLA_FLAGS=f"{flags} {HOST_DEVICES_FLAG}={devices}".strip())
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        out = os.path.join(tmp, "result.json")
        log(a, f"== {name}: in a process of its own with {devices} host devices")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.bench",
                "--study",
                name,
                "--json",
                out,
                *argv,
                *(["--quiet"] if a.quiet else []),
            ],
            env=env,
            cwd=ROOT,
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
# the run


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


def render(a: argparse.Namespace) -> dict[str, Any]:
    """``--render``: the markdown of a saved JSON (old key names read), to --out or stdout."""
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


def header(a: argparse.Namespace, jax, jaxlib, _host) -> dict[str, Any]:
    """The result's versions, device, machine, date and settings, before any study."""
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
            "max_memory": a.max_memory,
        },
        "loadavg_start": loadavg(),
        "studies": [],
    }
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    a = build_parser().parse_args(argv)
    if a.render:
        return render(a)
    a = resolve(a)
    from autotune.measuring import _host

    _host.pin()  # this process traces and lowers; workers and the final processes own the device, one at a time
    import jax
    import jaxlib

    started = time.perf_counter()
    result = header(a, jax, jaxlib, _host)
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
