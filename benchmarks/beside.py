"""The slowdown of a program's calls while a compile runs beside them: the stand-in the tuner
uses (`autotune.measuring._beside`) against the winner's own compile.

For each function of a study: its default config's steady calls (dispatched back to back, one
wait: the tuner's default timing) timed alone, beside the stand-in compiling back to back, and
beside the winner's real compile (trace, lower and compile of ``--config``, again and again),
interleaved for ``--rounds`` rounds in this one process; medians and the two slowdowns. The
tuner charges the first (`autotune.study._slowdown`); the second is what tier-up's thread does.
The other side too: how many times longer the stand-in and the winner's build take beside the
calls (which go on, untimed, until one has finished beside them) than alone, the tiered cost's
``c`` (the tuner charges the stand-in's).

    python -m benchmarks.beside --study demo_unroll --rounds 7 --json out.json

Prints a table; ``--json`` writes ``{"jax", "device", "machine", "date", "rounds",
"functions": [{"function", "config", "alone_s", "stand_in_s", "winner_s", "stand_in",
"winner", "build_alone_s", "build_beside_s", "stand_in_compile", "winner_compile"}]}`` (seconds per
call; ``stand_in`` and ``winner`` the calls' slowdowns; the builds' seconds alone and beside the
calls, medians; the last two the compiles' stretches).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from typing import Any

from benchmarks._studies import study_path
from benchmarks._tables import run_facts, write_json


def written_out(sites: list[Any]) -> dict[str, Any]:
    """The config that writes every site out as a Python ``for`` (the slowest to compile)."""
    return {s.id: {"repr": "for"} for s in sites}


def measure(fn: Any, args: tuple, kwargs: dict, config: dict[str, Any], rounds: int, target_s: float) -> dict[str, Any]:
    import jax

    import autotune as at
    from autotune.measuring import _beside
    from autotune.measuring._sampling import Sampling
    from autotune.measuring._timing import time_calls

    ctl = getattr(fn, "autotune", fn)
    default = jax.jit(ctl.fun, **ctl.jit_kwargs)
    jax.block_until_ready(default(*args, **kwargs))

    def steady() -> float:
        return time_calls(lambda: default(*args, **kwargs), Sampling(mode="steady", target_s=target_s)).run_s

    def build() -> float:  # a fresh function each time: nothing cached
        t = time.perf_counter()
        jax.jit(at.with_config(ctl.fun, config), **ctl.jit_kwargs).lower(*args, **kwargs).compile()
        return time.perf_counter() - t

    def winner_compiles(stop: threading.Event, started: threading.Event, beside: list[float]) -> None:
        started.set()
        while not stop.is_set():
            took = build()
            if not stop.is_set():  # built beside the calls all along
                beside.append(took)

    alone: list[float] = []
    stand_in: list[float] = []
    winner: list[float] = []
    stretches: list[float] = []
    builds_alone: list[float] = []
    builds_beside: list[float] = []
    for _ in range(rounds):
        alone.append(steady())
        with _beside.compiling() as compiles:
            stand_in.append(steady())
            while not compiles.beside_s:  # the calls go on, untimed, until a stand-in compiled beside them
                steady()
        stretches.append(compiles.stretch)
        builds_alone.append(build())
        stop, started, beside = threading.Event(), threading.Event(), []
        thread = threading.Thread(target=winner_compiles, args=(stop, started, beside), daemon=True)
        thread.start()
        started.wait()
        winner.append(steady())
        while not beside:
            steady()
        stop.set()
        thread.join()
        builds_beside.extend(beside)
    a, s, w = (statistics.median(x) for x in (alone, stand_in, winner))
    b_alone, b_beside = statistics.median(builds_alone), statistics.median(builds_beside)
    return {
        "function": ctl.key,
        "config": config,
        "alone_s": a,
        "stand_in_s": s,
        "winner_s": w,
        "stand_in": max(1.0, s / a),
        "winner": max(1.0, w / a),
        "build_alone_s": b_alone,
        "build_beside_s": b_beside,
        "stand_in_compile": statistics.median(stretches),
        "winner_compile": max(1.0, b_beside / b_alone),
    }


def parser(doc: str) -> argparse.ArgumentParser:
    """The options: which study, which winner, how many rounds, how long each timing, where the
    JSON goes."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--study", default="demo_unroll", help="a study under studies/ (default demo_unroll)")
    p.add_argument("--config", help="the winner's config as JSON (default: every site written out, `for`)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--target-s", type=float, default=0.2, help="seconds of calls per timing (default 0.2)")
    p.add_argument("--json", help="write the results as JSON here")
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser(__doc__).parse_args(argv)

    from autotune.record._studyfile import load_examples

    rows = []
    for ex in load_examples(study_path(a.study)):
        config = json.loads(a.config) if a.config else written_out(ex.sites())
        rows.append(measure(ex.fn, ex.args, ex.kwargs, config, a.rounds, a.target_s))
    cols = (
        "function",
        "µs a call alone",
        "beside the stand-in",
        "beside the winner's build",
        "s stand-in",
        "s winner",
        "winner's build alone / beside",
        "c stand-in",
        "c winner",
    )
    print("| " + " | ".join(cols) + " |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['function']} | {r['alone_s'] * 1e6:.1f} | {r['stand_in_s'] * 1e6:.1f} | {r['winner_s'] * 1e6:.1f} "
            f"| {r['stand_in']:.3f} | {r['winner']:.3f} | {r['build_alone_s']:.3f} s / {r['build_beside_s']:.3f} s "
            f"| {r['stand_in_compile']:.3f} | {r['winner_compile']:.3f} |"
        )
    if a.json:
        write_json(a.json, {**run_facts(), "rounds": a.rounds, "functions": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
