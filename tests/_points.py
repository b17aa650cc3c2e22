"""Three configs whose crossovers are exact by hand, and a cache entry holding them
(tests/select/test_select.py, test_front.py, test_cache_cmds.py, test_cli.py)."""

from __future__ import annotations

import autotune as at
from autotune.cache import Cache, CacheEntry
from autotune.select import Point


def pt(config, compile_s, run_s, rounds=()):
    """A point of ``config`` (a dict or a one-letter name of a one-site config)."""
    if isinstance(config, str):
        config = {config: {"repr": "scan", "unroll": 1}}
    return Point(at.Config(config), compile_s, run_s, rounds=rounds)


def C(d):
    return at.Config(d)


def point(config, rounds):
    """A point of ``config`` with paired ``rounds`` and their medians as its seconds."""
    med = lambda i: sorted(r[i] for r in rounds)[len(rounds) // 2]  # noqa: E731
    return pt(config, med(0), med(1), rounds=rounds)


# Three configs with binary-exact seconds, so the crossovers are exact by hand:
#   cost(N) = compile + N * run
#   SCAN:   1 + N/128        UNROLL: 3 + N/256        FOR: 11 + N/512
#   SCAN = UNROLL at 2 = N/256          -> N = 512
#   UNROLL = FOR  at 8 = N/512          -> N = 4096
#   (SCAN = FOR at 10 = 3N/512 -> N = 1706.67, inside UNROLL's interval: not a crossover)
SCAN = C({"l": {"repr": "scan", "unroll": 1}})
UNROLL = C({"l": {"repr": "scan", "unroll": 4}})
FOR = C({"l": {"repr": "for", "unroll": 1}})
THREE = [pt(SCAN, 1.0, 2.0**-7), pt(UNROLL, 3.0, 2.0**-8), pt(FOR, 11.0, 2.0**-9)]


SITES = {"l": {"kind": "loop", "length": 8, "has_ys": False}}
CPU = {"platform": "cpu", "device_kind": "cpu", "device_count": 1, "jax": "0.10.2", "jaxlib": "0.10.2"}
RETUNE = "autotune tune /home/me/studies/step.py --expected-calls {calls}"


def entry(**changes) -> CacheEntry:
    fields = dict(
        function_key="mod:step",
        fingerprint="f00d",
        signature="PyTreeDef(((*,), {}))|float32[8]",
        device=CPU,
        config=UNROLL,
        sites=SITES,
        measurements={"trace_s": 1.0, "lower_s": 1.0, "compile_s": 1.0, "run_s": 2.0**-8},
        objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
        cost=3 + 1000 / 256,
        pareto=[p.to_json() for p in THREE],  # as the cache stores them
    )
    fields.update(changes)
    return CacheEntry(**fields)


def put_entry(path, **changes) -> None:
    Cache(str(path)).put(entry(**changes))
