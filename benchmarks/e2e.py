"""End-to-end benchmark: a user's whole script with plain ``jax.jit`` against ``@at.autotuned``.

For each study file (``studies/*.py``, and a training step,
``tests/fixtures/gru_train.py``: a GRU over T=64, B=8 under ``jax.value_and_grad`` with a
5-step Newton–Schulz ``fori_loop``):

1. tune it once, in its own process, with the CLI a user runs:
   ``autotune tune FILE --cache TMP/cache.db --storage TMP/studies.db --json``;
2. run a whole fresh process that does what a user's script does: import the study module,
   build its inputs, make the first call of each function, then ``expected_calls`` more calls
   (the call count it was tuned for), ``jax.block_until_ready``. The *plain* process calls
   ``jax.jit(fun)``, the *tuned* one the ``@at.autotuned`` function, which reads the tuned entry
   from the cache. Both import the study file (so both import ``autotune``: the difference is the
   decorator's work and the tuned program, not the import; ``python -m benchmarks.overhead`` measures
   ``import autotune``);
3. alternate the two (plain first in even runs, tuned first in odd ones), ``--runs`` times each
   after one untimed pair that also checks the tuned process really used the cache entry;
   medians, and the median of the per-pair ratios tuned/plain.

Target: tuned/plain wall ratio <= 1.02 for every script, below 1 where the tuner
found room.

    python -m benchmarks.e2e --quick                 # lambda_returns, seed_rollout, gru_train
    python -m benchmarks.e2e                         # every default study + gru_train, 7 runs
    python -m benchmarks.e2e --study kalman --runs 9
    python -m benchmarks.e2e --study real_flax_lstm  # a real_* study (needs the examples extra)

``--tier-up`` instead tunes each study once with ``autotune tune --tier-up`` (the entry a
``tier_up=True`` decorator reads) and runs whole processes at each ``--tier-calls`` count: plain
``jax.jit``, the decorator, and the decorator with ``tier_up=True``, alternating. The decorators
keep the study's ``expected_calls``; with ``--told`` each process tells them the calls it makes
(``expected_calls`` = its call count), so they re-pick from the entry's points for that count.

Writes ``docs/results/e2e.json`` and ``docs/results/e2e.md`` (``--json``, ``--out``), shape
``{"jax", "device", "date", "commit", "settings", "scripts": [{"script", "path", "functions",
"tuning_wall_s", "runs": {"plain": [run], "tuned": [run]}, "median": {mode: run}, "ratio":
{"wall_s", "cpu_s", "first_call_s", "calls_s"}, "met"}]}`` with ``run = {"wall_s", "cpu_s",
"import_s", "first_call_s", "calls_s"}``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks._tables import MIN_VERDICT_RUNS, verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY_DIR = os.path.join(ROOT, "studies")
TRAIN = os.path.join(ROOT, "tests", "fixtures", "gru_train.py")
QUICK = ["lambda_returns", "seed_rollout", "gru_train"]
TARGET = 1.02
MODES = ("plain", "tuned")
MARK = "E2E_RESULT "

# What a user's script does, timed from its first line. argv: mode, study file, calls (0: the
# decorator's expected_calls), verify (1: after the timing, say which config each call used), told
# (1: the decorators of the tuned and tiered modes are told the calls it makes, expected_calls=calls).
CHILD = (
    r'''
import time
t0 = time.perf_counter()
import importlib.util, json, os, sys
import jax
mode, path, calls, verify = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
told = {"expected_calls": calls} if len(sys.argv) > 5 and sys.argv[5] == "1" and calls else {}
name = os.path.splitext(os.path.basename(path))[0]
spec = importlib.util.spec_from_file_location(name, path)
module = sys.modules[name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
work = []
for item in module.examples():
    fn, args, kwargs = item[0], item[1], (item[2] if len(item) > 2 else {})
    ctl = getattr(fn, "autotune", fn)
    tuned = ctl.with_options(**told) if told and mode == "tuned" else fn
    f = {"tuned": tuned, "tiered": ctl.with_options(tier_up=True, **told) if mode == "tiered" else None}.get(mode) or \
        jax.jit(ctl.fun, **ctl.jit_kwargs)
    work.append((f, ctl, args, kwargs, calls or int(ctl.expected_calls)))
jax.block_until_ready([(a, k) for _, _, a, k, _ in work])
t1 = time.perf_counter()
jax.block_until_ready([f(*a, **k) for f, _, a, k, _ in work])
t2 = time.perf_counter()
for f, _, a, k, n in work:
    for _ in range(n):
        out = f(*a, **k)
    jax.block_until_ready(out)
t3 = time.perf_counter()
res = {"import_s": t1 - t0, "first_call_s": t2 - t1, "calls_s": t3 - t2, "calls": [w[4] for w in work],
       "expected_calls": [getattr(getattr(f, "autotune", f), "expected_calls", None) for f, *_ in work]}
if mode == "tiered":
    res["tier"] = [[f.key, [getattr(sl, "state", None) for sl in f.tier.slots.values()]] for f, *_ in work]
if verify and mode == "tuned":
    res["lookups"] = [[ctl.key, (lk := ctl.config_for(*a, **k)).source, lk.config.to_dict()]
                      for _, ctl, a, k, _ in work]
print("'''
    + MARK
    + r"""" + json.dumps(res), flush=True)
"""
)


def scripts(a: argparse.Namespace) -> list[tuple[str, str]]:
    """(name, path) of the scripts to run."""
    found = {os.path.basename(p)[:-3]: p for p in sorted(glob.glob(os.path.join(STUDY_DIR, "*.py")))}
    found["gru_train"] = TRAIN
    if a.study:
        missing = [n for n in a.study if n not in found]
        if missing:
            raise SystemExit(
                f"benchmarks.e2e: no study {missing} under studies/ (nor gru_train); choose from {sorted(found)}."
            )
        return [(n, found[n]) for n in a.study]
    names = QUICK if a.quick else [n for n in found if not n.startswith("real_")]
    return [(n, found[n]) for n in names]


def child_env(tmp: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AUTOTUNE_", "JAX_COMPILATION_CACHE")) or k == "AUTOTUNE_STUDY_SIZE"  # the studies' size
    }
    env["AUTOTUNE_CACHE"] = os.path.join(tmp, "cache.db")
    env["PYTHONPATH"] = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
    return env


def tune(path: str, tmp: str, a: argparse.Namespace, *extra: str) -> tuple[list[dict[str, Any]], float]:
    """Tune ``path`` once with the CLI (``extra``: more of its options) into the temporary cache;
    its functions and the wall."""
    cmd = [
        sys.executable,
        "-m",
        "autotune",
        "tune",
        path,
        "--cache",
        os.path.join(tmp, "cache.db"),
        "--storage",
        os.path.join(tmp, "studies.db"),
        "--json",
    ]
    if a.trials:
        cmd += ["--trials", str(a.trials)]
    if a.run_seconds is not None:
        cmd += ["--run-seconds", str(a.run_seconds)]
    cmd += extra
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(tmp), stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 and "No module named" in proc.stderr:  # a real_* study without its extra
        raise ImportError(proc.stderr.strip().splitlines()[-1])
    if proc.returncode != 0:
        raise RuntimeError(f"tuning {path} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    out = []
    for r in json.loads(proc.stdout):
        default = r["best_config"] == r["trials"][0]["config"]  # trial 0 is the default config
        out.append(
            {
                "function": r["function"],
                "winner": "default" if default else short(r["best_config"]),
                "best_config": r["best_config"],
                "is_default": default,
                "best_cost": r["best_cost"],
                "default_cost": r["default_cost"],
                "tuned_speedup": r["default_cost"] / r["best_cost"] if r["best_cost"] else None,
                "expected_calls": r["objective"]["expected_calls"],
            }
        )
    return out, wall


def short(config: dict[str, Any]) -> str:
    """A config in the one notation, an ``at.loop`` by its name, other sites as s1, s2... in id order."""
    from autotune.program._config import Config

    c = Config.from_dict(config)
    names = legend(config)
    return ", ".join(f"{names.get(sid, sid)}={c[sid]}" for sid in c)


def legend(config: dict[str, Any]) -> dict[str, str]:
    """``{site id: s1, s2...}`` for the sites of ``config`` that are not named ``at.loop``s."""
    return {sid: f"s{k}" for k, sid in enumerate(sorted(s for s in config if "@" in s), 1)}


def run_once(mode: str, path: str, tmp: str, calls: int, verify: bool = False, told: bool = False) -> dict[str, Any]:
    """One whole process; ``wall_s`` is from its start to its exit, as the parent saw it, and
    ``cpu_s`` the CPU seconds it used (user + system, all threads): what load moves less. With
    ``told``, the decorators are told the ``calls`` the process makes (their ``expected_calls``)."""
    cmd = [sys.executable, "-c", CHILD, mode, path, str(calls), "1" if verify else "0", "1" if told else "0"]
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(tmp), stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (now.ru_utime - used.ru_utime) + (now.ru_stime - used.ru_stime)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the {mode} process of {path} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return {"wall_s": wall, "cpu_s": cpu, **json.loads(lines[-1][len(MARK) :])}


def bench_script(name: str, path: str, a: argparse.Namespace, say) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix=f"e2e-{name}-")
    say(f"{name}: tuning with `autotune tune` ...")
    functions, tuning_wall = tune(path, tmp, a)
    for f in functions:
        say(
            f"  {f['function']}: {f['winner']} ({f['tuned_speedup']:.3f}x the default's cost), "
            f"tuned in {tuning_wall:.1f} s"
        )
    check = run_once("tuned", path, tmp, a.calls, verify=True)
    run_once("plain", path, tmp, a.calls)
    used = {key: (source, config) for key, source, config in check["lookups"]}
    for f in functions:
        source, config = used.get(f["function"], ("missing", None))
        if source != "cache" or config != f["best_config"]:
            raise RuntimeError(
                f"{name}: the tuned process did not use the tuned entry of {f['function']} "
                f"(source {source}, config {config}, tuned {f['best_config']})."
            )
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for i in range(a.runs):
        for mode in MODES if i % 2 == 0 else MODES[::-1]:
            runs[mode].append(run_once(mode, path, tmp, a.calls))
        say(
            f"  run {i + 1}/{a.runs}: plain {runs['plain'][-1]['wall_s']:.3f} s, "
            f"tuned {runs['tuned'][-1]['wall_s']:.3f} s"
        )
    keys = ("wall_s", "cpu_s", "import_s", "first_call_s", "calls_s")
    median = {m: {k: statistics.median(r[k] for r in runs[m]) for k in keys} for m in MODES}
    ratio = {
        k: statistics.median(t[k] / p[k] for t, p in zip(runs["tuned"], runs["plain"]))
        for k in ("wall_s", "cpu_s", "first_call_s", "calls_s")
    }
    found_room = any(not f["is_default"] for f in functions)
    return {
        "script": name,
        "path": os.path.relpath(path, ROOT),
        "functions": functions,
        "calls": check["calls"],
        "tuning_wall_s": tuning_wall,
        "runs": runs,
        "median": median,
        "ratio": ratio,
        "found_room": found_room,
        "met": ratio["wall_s"] <= TARGET,
    }


TIER_MODES = ("plain", "tuned", "tiered")
TIER_TARGET = 1.02  # tiered wall <= min(plain, tuned) * this, at every call count

# The slowdown of the default's steady calls while the winner compiles on a thread (the s of
# `autotune.select._tiered`): argv: study file.
SLOWDOWN = (
    r"""
import importlib.util, json, os, sys
import jax
from benchmarks.e2e import beside_winner
path = sys.argv[1]
name = os.path.splitext(os.path.basename(path))[0]
spec = importlib.util.spec_from_file_location(name, path)
module = sys.modules[name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
out = []
for item in module.examples():
    fn, args, kwargs = item[0], item[1], (item[2] if len(item) > 2 else {})
    ctl = getattr(fn, "autotune", fn)
    default = jax.jit(ctl.fun, **ctl.jit_kwargs)
    def beside():  # a fresh jit each time: nothing cached
        fresh = ctl.with_options()
        fresh.lower(*args, **kwargs).compile()
    s = beside_winner(lambda: default(*args, **kwargs), beside, calls=200, repeats=7)
    out.append({"function": ctl.key, **s})
print("""
    + repr(MARK)
    + """ + json.dumps(out), flush=True)
"""
)


def beside_winner(
    call: Callable[[], Any], compile_beside: Callable[[], Any], *, calls: int = 200, repeats: int = 5
) -> dict[str, float]:
    """The slowdown of ``call``'s calls, each waited for, while ``compile_beside`` (the winner's
    real compile) runs on a thread: median seconds per call alone, beside it, and their ratio (at
    least 1). A cross-check of the figure the tuner measures beside a stand-in compile, in its
    timing mode (`autotune.study._slowdown`).

    Alternates alone and beside ``repeats`` times; a beside round counts only the calls made while
    the compile was still running (none: the round is dropped)."""
    import jax

    jax.block_until_ready(call())
    alone: list[float] = []
    beside: list[float] = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            jax.block_until_ready(call())
        alone.append((time.perf_counter() - t) / calls)
        done = threading.Event()

        def run(done: threading.Event = done) -> None:
            compile_beside()
            done.set()

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        n, t = 0, time.perf_counter()
        while not done.is_set() and n < 100 * calls:
            jax.block_until_ready(call())
            n += 1
        elapsed = time.perf_counter() - t
        worker.join()
        if n:
            beside.append(elapsed / n)
    a = statistics.median(alone)
    b = statistics.median(beside) if beside else a
    return {"alone_s": a, "beside_s": b, "slowdown": max(1.0, b / a) if a > 0 else 1.0}


def slowdown(path: str, tmp: str) -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-c", SLOWDOWN, path], capture_output=True, text=True, env=child_env(tmp))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the slowdown process of {path} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(lines[-1][len(MARK) :])


def bench_tier(name: str, path: str, a: argparse.Namespace, say) -> dict[str, Any]:
    """Whole processes at several call counts: plain jax.jit, tuned, tuned with tier-up,
    alternating (the order rotates each run); medians and the median per-run ratios."""
    tmp = tempfile.mkdtemp(prefix=f"e2e-tier-{name}-")
    say(f"{name}: tuning with `autotune tune --tier-up` ...")
    functions, tuning_wall = tune(path, tmp, a, "--tier-up")  # the entry a tier_up=True decorator reads
    for f in functions:
        say(f"  {f['function']}: {f['winner']} ({f['tuned_speedup']:.3f}x the default's cost)")
    entries = stored_entries(tmp)
    per_calls = []
    for calls in a.tier_calls:
        for mode in TIER_MODES:
            run_once(mode, path, tmp, calls, told=a.told)  # untimed: warms the file cache
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in TIER_MODES}
        for i in range(a.runs):
            order = TIER_MODES[i % 3 :] + TIER_MODES[: i % 3]
            for mode in order:
                runs[mode].append(run_once(mode, path, tmp, calls, told=a.told))
        keys = ("wall_s", "cpu_s", "first_call_s", "calls_s")
        median = {m: {k: statistics.median(r[k] for r in runs[m]) for k in keys} for m in TIER_MODES}
        ratio = {
            f"tiered/{m}": statistics.median(t["wall_s"] / o["wall_s"] for t, o in zip(runs["tiered"], runs[m]))
            for m in ("plain", "tuned")
        }
        best = min(median["plain"]["wall_s"], median["tuned"]["wall_s"])
        row = {
            "calls": calls,
            "median": median,
            "ratio": ratio,
            "tiered_over_best": median["tiered"]["wall_s"] / best,
            **judge(runs, median),
            "tier_states": runs["tiered"][-1].get("tier"),
            "runs": runs,
        }
        per_calls.append(row)
        say(
            f"  {calls} calls: plain {median['plain']['wall_s']:.3f} s, tuned {median['tuned']['wall_s']:.3f} s, "
            f"tiered {median['tiered']['wall_s']:.3f} s ({row['tiered_over_best']:.3f}x the better)"
        )
    s = slowdown(path, tmp)
    say(f"  steady calls beside a compile: {[round(x['slowdown'], 3) for x in s]}x")
    return {
        "script": name,
        "functions": functions,
        "entries": entries,
        "tuning_wall_s": tuning_wall,
        "per_calls": per_calls,
        "slowdown": s,
    }


def judge(runs: dict[str, list[dict[str, Any]]], median: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The tier-up target at one call count, judged on the runs' spread rather than on one
    median: the per-run ratios of tier-up to the mode whose median is lower (``over_better``,
    with a bootstrap interval and ``met`` / ``not met`` / ``undecided``), and whether tier-up is
    below both modes (``below_both``: both paired intervals under 1)."""
    better = "plain" if median["plain"]["wall_s"] <= median["tuned"]["wall_s"] else "tuned"
    paired = {m: [t["wall_s"] / o["wall_s"] for t, o in zip(runs["tiered"], runs[m])] for m in ("plain", "tuned")}
    judged = verdict(paired[better], TIER_TARGET)
    below = [verdict(paired[m], 1.0)["interval"][1] < 1.0 for m in paired]
    return {
        "over_better": {"mode": better, **judged},
        "below_both": len(paired["plain"]) >= MIN_VERDICT_RUNS and all(below),
        "met": judged["verdict"] == "met",
    }


def stored_entries(tmp: str) -> list[dict[str, Any]]:
    """The stored default and winner compile/run costs of each entry (what tier-up decides on)."""
    from autotune.cache import Cache
    from autotune.program._config import Config
    from autotune.select import point_of

    out = []
    with Cache(os.path.join(tmp, "cache.db")) as cache:
        for e in cache.entries():
            d, w = e.default_point, point_of(e.points, Config.from_dict(e.config))
            out.append(
                {
                    "function": e.function_key,
                    "default": None if d is None else [d.compile_cost_s, d.run_cost_s],
                    "winner": None if w is None else [w.compile_cost_s, w.run_cost_s],
                }
            )
    return out


def tier_table(result: dict[str, Any]) -> str:
    rows = [
        "| script | calls | wall plain | wall tuned | wall tier-up | tier-up/plain | tier-up/tuned | "
        "tier-up / better (90% interval) | target | below both |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for s in result["tier_up"]:
        for r in s["per_calls"]:
            m = r["median"]
            ob = r.get("over_better")  # results written before the verdicts have only "met"
            judged = (
                f"{ob['median']:.3f} vs {ob['mode']} ({ob['interval'][0]:.3f}–{ob['interval'][1]:.3f})"
                if ob
                else f"{r['tiered_over_best']:.3f}"
            )
            word = ob["verdict"] if ob else ("met" if r["met"] else "not met")
            rows.append(
                f"| {s['script']} | {r['calls']} | {m['plain']['wall_s']:.3f} s | {m['tuned']['wall_s']:.3f} s | "
                f"{m['tiered']['wall_s']:.3f} s | {r['ratio']['tiered/plain']:.3f} | "
                f"{r['ratio']['tiered/tuned']:.3f} | {judged} | "
                f"{'**not met**' if word == 'not met' else word} | {'yes' if r.get('below_both') else 'no'} |"
            )
    return "\n".join(rows)


def tier_markdown(result: dict[str, Any]) -> str:
    """The --tier-up page: when and where, the whole-process table, the slowdown beside a compile."""
    st = result["settings"]
    lines = [
        "# Tier-up: whole processes at several call counts",
        "",
        f"{result['date']} at {result['commit']}, jax {result['jax']}, {result['device']}, {result['machine']}; "
        f"load average {result['load_at_start']} at start, {result.get('load_at_end')} at the end. Generated by "
        f"`python -m benchmarks.e2e --tier-up` ({st['runs']} alternating runs per mode after one untimed run of "
        "each; medians). Target: tier-up's wall <= the better of plain and tuned "
        f"x {TIER_TARGET} at every call count, judged on the per-run ratios against the mode with the "
        "lower median: *met* where the 90% bootstrap interval of their median lies at or below the target, "
        "*not met* where it lies above, *undecided* where the runs' spread cannot tell (run more); *below "
        "both*: both paired intervals lie under 1."
        + (
            " The tuned and tier-up decorators were told each process's call count (`--told`: "
            "`expected_calls` = the calls it makes), so they re-pick from the entry's points for it."
            if st.get("told")
            else " The decorators keep the study's `expected_calls` at every call count."
        ),
        "",
        tier_table(result),
        "",
    ]
    for s in result["tier_up"]:
        for x in s["slowdown"]:
            lines.append(
                f"- {x['function']}: the default's calls, each waited for, {x['alone_s'] * 1e6:.1f} µs alone and "
                f"{x['beside_s'] * 1e6:.1f} µs beside the winner's compile on a thread: a slowdown of "
                f"{x['slowdown']:.2f}."
            )
    return "\n".join(lines)


def write(a: argparse.Namespace, result: dict[str, Any], page: str) -> None:
    """``result`` as JSON to ``--json`` and ``page`` to ``--out``, each where given."""
    for path, text in ((a.json, json.dumps(result, indent=2)), (a.out, page)):
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "w") as fh:
                fh.write(text + "\n")


def commit() -> str | None:
    """The checkout's commit, ``+changes`` when its working tree differs from it."""
    try:
        git = lambda *a: subprocess.run(
            ["git", *a],
            cwd=ROOT,
            capture_output=True,
            text=True,  # noqa: E731
            timeout=10,
        ).stdout.strip()
        head = git("rev-parse", "--short", "HEAD")
        return None if not head else head + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return None


def table(result: dict[str, Any]) -> str:
    rows = [
        "| script | winner (tuned cost vs default) | wall plain | wall tuned | wall ratio | CPU ratio | "
        "first call plain / tuned | calls plain / tuned | calls ratio | target |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for s in result["scripts"]:
        win = "; ".join(f"{f['winner']} ({f['tuned_speedup']:.2f}×)" for f in s["functions"])
        p, t, r = s["median"]["plain"], s["median"]["tuned"], s["ratio"]
        rows.append(
            f"| {s['script']} | {win} | {p['wall_s']:.3f} s | {t['wall_s']:.3f} s | {r['wall_s']:.3f} | "
            f"{r['cpu_s']:.3f} | {p['first_call_s'] * 1e3:.0f} / {t['first_call_s'] * 1e3:.0f} ms | "
            f"{p['calls_s']:.3f} / {t['calls_s']:.3f} s | {r['calls_s']:.3f} | "
            f"{'met' if s['met'] else '**not met**'} |"
        )
    return "\n".join(rows)


def markdown(result: dict[str, Any]) -> str:
    st = result["settings"]
    met = sum(s["met"] for s in result["scripts"])
    return "\n".join(
        [
            "# End to end: a whole script with plain `jax.jit` against `@at.autotuned`",
            "",
            f"{result['date']} at {result['commit']}, jax {result['jax']}, {result['device']}, {result['machine']}; "
            f"load average {result['load_at_start']} at start. Generated by `python -m benchmarks.e2e"
            f"{' --quick' if st['quick'] else ''}` ({st['runs']} alternating runs per mode after one untimed "
            f"pair; tuning: `autotune tune FILE`{' --trials ' + str(st['trials']) if st['trials'] else ''}).",
            "",
            "Each run is a fresh process that imports the study module, builds its inputs, makes the first call "
            "of each function and then its `expected_calls` calls (the call count it was tuned for), "
            "`block_until_ready`. *wall* is the whole process as its parent saw it (interpreter start to exit), "
            "medians over runs; ratios are medians of the per-pair ratios tuned/plain; *CPU* is the process's "
            "user + system seconds (all threads), which load moves less than wall time. Target: wall ratio <= "
            f"{TARGET} on every script, below 1 where the tuner found room. Met on {met} of {len(result['scripts'])}.",
            "",
            table(result),
            "",
            *[
                f"{f['function']}: " + ", ".join(f"{n} = `{sid}`" for sid, n in legend(f["best_config"]).items())
                for s in result["scripts"]
                for f in s["functions"]
                if not f["is_default"]
            ],
            "",
            f"The figures are noisy: the machine was shared by other jobs while this ran (load average "
            f"{result['load_at_start']} at start, {result.get('load_at_end')} at the end); a ratio within a few "
            "percent of 1 is inside that noise.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--study",
        action="append",
        default=None,
        metavar="NAME",
        help="a study under studies/ or gru_train (repeatable; default: every non-real study and "
        "gru_train, or with --quick " + ", ".join(QUICK) + ")",
    )
    p.add_argument("--quick", action="store_true", help="three scripts, 5 runs, 8 trials, short timing")
    p.add_argument("--runs", type=int, default=None, help="timed runs per mode (default 7, 5 with --quick)")
    p.add_argument(
        "--calls", type=int, default=0, help="calls after the first (default: each function's expected_calls)"
    )
    p.add_argument("--trials", type=int, default=None, help="autotune tune --trials (default: its own; 8 quick)")
    p.add_argument("--run-seconds", type=float, default=None, help="autotune tune --run-seconds")
    p.add_argument("--json", default=os.path.join(ROOT, "docs", "results", "e2e.json"))
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "results", "e2e.md"))
    p.add_argument("--quiet", action="store_true")
    p.add_argument(
        "--tier-up",
        action="store_true",
        help="instead: whole processes at several call counts, plain / tuned / tuned with tier_up=True",
    )
    p.add_argument(
        "--tier-calls",
        default="10,100,1000,10000,100000",
        help="call counts for --tier-up (comma-separated; default 10,100,1000,10000,100000)",
    )
    p.add_argument(
        "--judge",
        metavar="JSON",
        default=None,
        help="instead: re-judge a saved --tier-up result's runs (verdicts, intervals) and print its table",
    )
    p.add_argument(
        "--told",
        action="store_true",
        help="with --tier-up: tell the tuned and tier-up decorators each process's call count (expected_calls)",
    )
    a = p.parse_args(argv)
    a.tier_calls = [int(c) for c in a.tier_calls.split(",") if c.strip()]
    a.runs = a.runs or (5 if a.quick else 7)
    if a.quick:
        a.trials = a.trials or 8
        a.run_seconds = 0.1 if a.run_seconds is None else a.run_seconds
    say = (lambda *_: None) if a.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    if a.judge:
        with open(a.judge) as fh:
            saved = json.load(fh)
        for row in (r for s in saved.get("tier_up", ()) for r in s["per_calls"]):
            row.update(judge(row["runs"], row["median"]))
        print(tier_table(saved))
        return 0
    import jax

    from autotune.measuring import _host

    _host.pin()  # the whole processes own the device, one at a time; this one never opens it
    result = {
        "jax": jax.__version__,
        "device": str(_host.target_device()["device_kind"]),
        "commit": commit(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_at_start": round(os.getloadavg()[0], 2),
        "settings": {
            "quick": a.quick,
            "runs": a.runs,
            "calls": a.calls or None,
            "trials": a.trials,
            "run_seconds": a.run_seconds,
            "target": TARGET,
            "told": a.told,
        },
        "scripts": [],
    }
    if a.tier_up:
        result["tier_up"] = [bench_tier(name, path, a, say) for name, path in scripts(a)]
        result["load_at_end"] = round(os.getloadavg()[0], 2)
        print(tier_table(result))
        write(a, result, tier_markdown(result))
        return 0
    for name, path in scripts(a):
        try:
            result["scripts"].append(bench_script(name, path, a, say))
        except ImportError as exc:
            say(f"{name}: skipped ({exc})")
    result["load_at_end"] = round(os.getloadavg()[0], 2)
    print(table(result))
    write(a, result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
