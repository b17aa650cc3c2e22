"""Tier-up's test programs and cache entries, shared by tests/jit/test_tier.py and the scripts it
runs in subprocesses."""

from __future__ import annotations

import jax

import autotune as at
from autotune.program import _keys

FOR = {"l": {"repr": "for"}}


def body(c, _):
    return c * 0.5 + 1.0, None


def make(cache, tier_up=True, length=8, **kwargs):
    @at.autotuned(cache=str(cache), key="tier:smooth", tier_up=tier_up, **kwargs)
    def smooth(x):
        return at.loop(body, x, length=length, name="l")[0]

    return smooth


def counted(cache, traces: list, tier_up=True):
    """``make(cache)``'s function, appending to ``traces`` each time JAX traces it (a Python side effect)."""

    @at.autotuned(cache=str(cache), key="tier:smooth", tier_up=tier_up)
    def smooth(x):
        traces.append(1)
        return at.loop(body, x, length=8, name="l")[0]

    return smooth


def reference(x):
    return jax.jit(lambda x: at.loop(body, x, length=8, name="l")[0])(x)


def put_entry(cache, x, winner_compile_s=1.0, default_compile_s=0.01, winner_run_s=5e-3, length=8):
    """An entry for ``make(cache)`` on ``x`` whose winner (``for``) compiles ``winner_compile_s`` and
    runs ``winner_run_s`` a call, against the default's 10 ms: by default a winner that tier-up
    pays for (the calls the default serves while it compiles are worth more than the default's
    compile), with ``winner_run_s=1e-6`` one it does not (62 calls served save 62 µs). ``length``: the
    loop's trip count (written out by the winner: 3,000 steps take XLA seconds to compile)."""
    lookup = make(cache, tier_up=False, length=length).config_for(x)
    entry = at.CacheEntry(
        function_key="tier:smooth",
        fingerprint=lookup.fingerprint,
        signature=lookup.signature,
        device=_keys.device_info(),
        config=FOR,
        sites={"l": {"kind": "loop", "length": length, "has_ys": False}},
        measurements={"run_s": winner_run_s},
        objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0},
        cost=1.0,
        default_cost=2.0,
        pareto=[
            {"config": FOR, "compile_cost_s": winner_compile_s, "run_cost_s": winner_run_s},
            {"config": {}, "compile_cost_s": default_compile_s, "run_cost_s": 1e-2},
        ],
        default_config={},
    )
    with at.Cache(str(cache)) as c:
        c.put(entry)
