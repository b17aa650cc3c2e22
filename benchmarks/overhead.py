"""Benchmark: what @at.autotuned costs over plain jax.jit.

Whole processes (what the targets are about), alternating, ``--runs`` each, medians. Each
does what a script does (import jax, and autotune for a decorated function; define the
function with its decorator; build its inputs; call it once and wait for the result), with
plain ``jax.jit``, with ``@at.autotuned`` and a cache hit (an entry naming the default's
choice, so the compile is jax.jit's), and with ``@at.autotuned`` and no entry. Each reports,
as wall and as CPU time of the process (all threads; a loaded machine moves it less):

1. ``import autotune`` right after ``import jax`` (target: <= 30 ms), and ``import jax``;
2. the first call, and the whole process until its result (targets: hit and no entry
   <= jax.jit's first call + 10 ms); whether SQLAlchemy was loaded; the lookup's source.

In one process (skipped by ``--quick``): the steady-state call, and recording's cost (the
first call of a new signature with recording off, in shape mode and in values mode).

Children run with compiled bytecode (a private ``PYTHONPYCACHEPREFIX``, warmed first), as
an installed package does. Prints tables; writes ``--json`` and ``--md``
(default ``docs/results/overhead.json`` / ``.md``).

    python -m benchmarks.overhead [--runs 12] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "overhead:step"
MODES = ("jit", "hit", "miss")
FIRST_CALL_TARGET_MS = 10.0  # a decorated function's first call over jax.jit's
IMPORT_TARGET_MS = 30.0  # import autotune after import jax


def step(x, w):
    """The function every child calls: a small recurrent scan."""
    import jax.numpy as jnp
    from jax import lax

    return lax.scan(lambda c, _: (jnp.tanh(c @ w) * 0.9 + 0.1, None), x, length=32)[0]


def inputs():
    import jax.numpy as jnp

    return jnp.ones((8, 32)), jnp.eye(32) * 0.5


def child(mode: str, cache: str) -> None:
    """One whole process: import, decorate, build inputs, first call; prints JSON (wall
    seconds, and CPU seconds of the process, all threads: what a loaded machine moves less)."""
    t0 = time.perf_counter()
    import jax

    t1, c1 = time.perf_counter(), time.process_time()
    t2, c2 = t1, c1
    if mode != "jit":
        import autotune as at

        t2, c2 = time.perf_counter(), time.process_time()
    fn = jax.jit(step) if mode == "jit" else at.autotuned(step, cache=cache, key=KEY)
    x, w = inputs()
    jax.block_until_ready((x, w))
    t3, c3 = time.perf_counter(), time.process_time()
    jax.block_until_ready(fn(x, w))
    t4, c4 = time.perf_counter(), time.process_time()
    ctl = getattr(fn, "autotune", None)
    lookup = ctl.last_lookup if ctl is not None else None
    print(
        json.dumps(
            {
                "import_jax_s": t1 - t0,
                "import_autotune_s": t2 - t1,
                "import_autotune_cpu_s": c2 - c1,
                "first_call_s": t4 - t3,
                "first_call_cpu_s": c4 - c3,
                "wall_s": t4 - t0,
                "cpu_s": c4,
                "sqlalchemy": "sqlalchemy" in sys.modules,
                "source": lookup.source if lookup else None,
                "config": str(lookup.config) if lookup else None,
            }
        )
    )


def make_hit_cache(path: str) -> str:
    """A cache holding an entry for `step` on this machine. Its config names the default
    choice (``scan×1``), so the hit's program and compile are jax.jit's and the difference
    is the lookup's alone (that a cached config is applied is tests/jit/test_decorator.py's)."""
    import autotune as at
    from autotune.program import _keys

    program, signature = _keys.program_key(step, inputs(), {}, {})
    (site,) = program.sites
    config = {site.id: {"repr": "scan", "unroll": 1}}
    at.Cache(path).put(
        at.CacheEntry(
            function_key=KEY,
            fingerprint=program.fingerprint,
            signature=signature,
            device=_keys.device_info(),
            config=config,
            sites={site.id: {"kind": site.kind, "length": site.length, "has_ys": site.has_ys}},
            measurements={},
            objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
            cost=1.0,
        )
    )
    return str(at.Config.from_dict(config))


def run_child(mode: str, cache: str, env: dict) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.overhead", "--child", mode, "--cache", cache],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if out.returncode != 0:
        raise SystemExit(f"the {mode} child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def whole_processes(runs: int, folder: str) -> dict:
    hit_cache, miss_cache = os.path.join(folder, "hit.db"), os.path.join(folder, "miss.db")
    hit_config = make_hit_cache(hit_cache)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        PYTHONPYCACHEPREFIX=os.path.join(folder, "pycache"),
        JAX_PLATFORMS=env.get("JAX_PLATFORMS", "cpu"),
        PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""),
    )
    caches = {"jit": miss_cache, "hit": hit_cache, "miss": miss_cache}
    for mode in caches:  # warm: bytecode written, files in the page cache
        run_child(mode, caches[mode], env)
    samples: dict[str, list[dict]] = {m: [] for m in caches}
    order = list(caches)
    for i in range(runs):  # alternate, rotating the order, so drift on a shared machine hits all alike
        for mode in order[i % len(order) :] + order[: i % len(order)]:
            samples[mode].append(run_child(mode, caches[mode], env))

    def ms(field: str) -> dict[str, float]:
        return {m: statistics.median(s[field] for s in samples[m]) * 1e3 for m in MODES}

    first, first_cpu = ms("first_call_s"), ms("first_call_cpu_s")
    tuned = samples["hit"] + samples["miss"]  # every process that imported autotune after jax
    return {
        "runs": runs,
        "hit_config": hit_config,
        "first_call_ms": first,
        "first_call_cpu_ms": first_cpu,
        "first_call_extra_ms": {m: first[m] - first["jit"] for m in ("hit", "miss")},
        "first_call_extra_cpu_ms": {m: first_cpu[m] - first_cpu["jit"] for m in ("hit", "miss")},
        "wall_ms": ms("wall_s"),
        "cpu_ms": ms("cpu_s"),
        "sqlalchemy_loaded": {m: sum(s["sqlalchemy"] for s in samples[m]) for m in MODES},
        "sources": {m: sorted({str(s["source"]) for s in samples[m]}) for m in ("hit", "miss")},
        "import_ms": {
            "jax": statistics.median(s["import_jax_s"] for s in samples["jit"]) * 1e3,
            "jax_then_autotune": statistics.median(s["import_jax_s"] + s["import_autotune_s"] for s in tuned) * 1e3,
            "autotune_after_jax": statistics.median(s["import_autotune_s"] for s in tuned) * 1e3,
            "autotune_after_jax_cpu": statistics.median(s["import_autotune_cpu_s"] for s in tuned) * 1e3,
        },
        "load_avg": os.getloadavg()[0],
    }


def in_process(rounds: int, calls: int, folder: str) -> dict:
    """Steady state (interleaved rounds, @autotuned vs jax.jit) and recording, in this process:
    the first call of a new signature with recording off, in shape mode and in values mode
    (the order rotates each round), recording's own work on the call path, the background
    write (waited for after the call), and the steady state per mode."""
    import jax
    import jax.numpy as jnp

    import autotune as at
    from autotune.jit import _record

    x = jnp.ones(8)

    def tiny(x):
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=4, name="tiny")[0]

    def per_call(f) -> float:
        jax.block_until_ready(f(x))
        t0 = time.perf_counter()
        for _ in range(calls):
            y = f(x)
        jax.block_until_ready(y)
        return (time.perf_counter() - t0) / calls

    cache = os.path.join(folder, "rec.db")
    plain, tuned = jax.jit(tiny), at.autotuned(tiny, cache=cache, key="overhead:tiny")
    steady = {"jit": [], "autotuned": []}
    for _ in range(rounds):
        steady["jit"].append(per_call(plain))
        steady["autotuned"].append(per_call(tuned))
    modes = {"off": False, "shapes": True, "values": "values"}
    first: dict[str, list[float]] = {m: [] for m in modes}
    write: dict[str, list[float]] = {m: [] for m in modes}
    own: dict[str, list[float]] = {m: [] for m in modes}
    hook, current = _record.record_call, ["off"]

    def timed_hook(*args):  # recording's own work on the call path, timed where it runs
        t0 = time.perf_counter()
        try:
            return hook(*args)
        finally:
            own[current[0]].append(time.perf_counter() - t0)

    _record.record_call = timed_hook
    try:
        for i in range(rounds):
            for m in list(modes)[i % 3 :] + list(modes)[: i % 3]:
                current[0] = m
                jax.clear_caches()
                f = at.autotuned(tiny, cache=cache, key=f"overhead:{m}{i}", record=modes[m])
                t0 = time.perf_counter()
                jax.block_until_ready(f(x))
                t1 = time.perf_counter()
                _record.flush()
                first[m].append(t1 - t0)
                write[m].append(time.perf_counter() - t1)
    finally:
        _record.record_call = hook
    rec_steady: dict[str, list[float]] = {m: [] for m in modes}
    fns = {m: at.autotuned(tiny, cache=cache, key=f"overhead:steady-{m}", record=r) for m, r in modes.items()}
    for _ in range(rounds):
        for m, f in fns.items():
            rec_steady[m].append(per_call(f))
    med = statistics.median
    return {
        "rounds": rounds,
        "calls": calls,
        "steady_us": {k: med(v) * 1e6 for k, v in steady.items()},
        "steady_ratio": med(a / b for a, b in zip(steady["autotuned"], steady["jit"])),
        "recording": {
            "first_call_ms": {m: med(v) * 1e3 for m, v in first.items()},
            "first_call_extra_ms": {
                m: med(a - b for a, b in zip(first[m], first["off"])) * 1e3 for m in ("shapes", "values")
            },
            "on_call_path_ms": {m: med(own[m]) * 1e3 for m in ("shapes", "values")},
            "background_write_ms": {m: med(write[m]) * 1e3 for m in ("shapes", "values")},
            "steady_us": {m: med(v) * 1e6 for m, v in rec_steady.items()},
            "steady_ratio": {
                m: med(a / b for a, b in zip(rec_steady[m], rec_steady["off"])) for m in ("shapes", "values")
            },
        },
    }


def table(res: dict) -> str:
    w = res["whole_processes"]
    f, x, wall, imp = w["first_call_ms"], w["first_call_extra_ms"], w["wall_ms"], w["import_ms"]
    fc, xc, cpu = w["first_call_cpu_ms"], w["first_call_extra_cpu_ms"], w["cpu_ms"]

    def met(target: float, *v: float) -> str:
        return "met" if max(v) <= target else "**not met**"

    first, imported = FIRST_CALL_TARGET_MS, IMPORT_TARGET_MS
    lines = [
        f"jax {res['jax']}, {res['device']}, {os.cpu_count()} CPUs, load average {w['load_avg']:.1f} at the end; "
        f"medians of {w['runs']} whole processes per row, alternating.",
        "",
        "| first call (whole process, ms) | jax.jit | @autotuned, cache hit | @autotuned, no entry |",
        "|---|---|---|---|",
        f"| first call: trace, lookup, compile, run (wall) | {f['jit']:.1f} | {f['hit']:.1f} ({x['hit']:+.1f}) | "
        f"{f['miss']:.1f} ({x['miss']:+.1f}) |",
        f"| the same, CPU time of the process | {fc['jit']:.1f} | {fc['hit']:.1f} ({xc['hit']:+.1f}) | "
        f"{fc['miss']:.1f} ({xc['miss']:+.1f}) |",
        f"| whole process until the first result (wall) | {wall['jit']:.0f} | {wall['hit']:.0f} | {wall['miss']:.0f} |",
        f"| the same, CPU time | {cpu['jit']:.0f} | {cpu['hit']:.0f} | {cpu['miss']:.0f} |",
        f"| processes that loaded SQLAlchemy | {w['sqlalchemy_loaded']['jit']} | {w['sqlalchemy_loaded']['hit']} | "
        f"{w['sqlalchemy_loaded']['miss']} |",
        f"| lookup source | - | {', '.join(w['sources']['hit'])} ({w['hit_config']}) | "
        f"{', '.join(w['sources']['miss'])} |",
        "",
        "| target | measured: wall (CPU) | |",
        "|---|---|---|",
        f"| first call with a hit <= jax.jit's + {first:g} ms | {x['hit']:+.1f} ms ({xc['hit']:+.1f} ms) | "
        f"{met(first, x['hit'], xc['hit'])} |",
        f"| first call with no entry <= jax.jit's + {first:g} ms | {x['miss']:+.1f} ms ({xc['miss']:+.1f} ms) | "
        f"{met(first, x['miss'], xc['miss'])} |",
        f"| import autotune after import jax <= {imported:g} ms | {imp['autotune_after_jax']:.1f} ms "
        f"({imp['autotune_after_jax_cpu']:.1f} ms; import jax alone: {imp['jax']:.0f} ms, jax then autotune: "
        f"{imp['jax_then_autotune']:.0f} ms) | "
        f"{met(imported, imp['autotune_after_jax'], imp['autotune_after_jax_cpu'])} |",
    ]
    p = res.get("in_process")
    if p:
        r = p["recording"]
        fc, ex, cp, bw, st, ra = (
            r["first_call_ms"],
            r["first_call_extra_ms"],
            r["on_call_path_ms"],
            r["background_write_ms"],
            r["steady_us"],
            r["steady_ratio"],
        )
        lines += [
            "",
            f"In one process: steady call (µs, median of {p['rounds']} interleaved rounds x {p['calls']}): "
            f"jax.jit {p['steady_us']['jit']:.2f}, @autotuned {p['steady_us']['autotuned']:.2f} "
            f"({p['steady_ratio']:.3f}x).",
            "",
            "| recording (in one process) | off | shapes (`=1`) | values (`=values`) |",
            "|---|---|---|---|",
            f"| first call of a new signature (ms, median; per-round extra) | {fc['off']:.1f} | "
            f"{fc['shapes']:.1f} ({ex['shapes']:+.1f}) | {fc['values']:.1f} ({ex['values']:+.1f}) |",
            f"| recording's own work on the call path (ms, median) | - | {cp['shapes']:.2f} | {cp['values']:.2f} |",
            f"| waiting for the background write after the call (ms, median) | - | {bw['shapes']:.1f} | "
            f"{bw['values']:.1f} |",
            f"| steady call (µs, median) | {st['off']:.2f} | {st['shapes']:.2f} ({ra['shapes']:.3f}x) | "
            f"{st['values']:.2f} ({ra['values']:.3f}x) |",
        ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=12, help="whole processes per row (default 12)")
    ap.add_argument("--rounds", type=int, default=15, help="in-process rounds (default 15)")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="whole processes only")
    ap.add_argument("--json", default=os.path.join(ROOT, "docs", "results", "overhead.json"))
    ap.add_argument("--md", default=os.path.join(ROOT, "docs", "results", "overhead.md"))
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--cache", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.cache)
        return 0
    import jax

    with tempfile.TemporaryDirectory(prefix="autotune-overhead-") as folder:
        res = {
            "jax": jax.__version__,
            "device": str(jax.devices()[0]),
            "whole_processes": whole_processes(a.runs, folder),
        }
        if not a.quick:
            res["in_process"] = in_process(a.rounds, a.calls, folder)
    text = table(res)
    print(text)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=2)
    if a.md:
        with open(a.md, "w") as fh:
            fh.write(f"# python -m benchmarks.overhead ({time.strftime('%Y-%m-%d')})\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
