"""Cache entries and pending records as tests build them (tests/cache/test_cache.py, test_pending.py and
the cache's other tests, and the subprocesses they start)."""

from __future__ import annotations

from autotune.cache import CacheEntry, PendingRecord

CPU = {"platform": "cpu", "device_kind": "cpu", "device_count": 1, "jax": "0.10.2", "jaxlib": "0.10.2"}
GPU = {"platform": "gpu", "device_kind": "NVIDIA H200", "device_count": 1, "jax": "0.10.2", "jaxlib": "0.10.2"}
SITES = {
    "outer": {"kind": "scan", "length": 16, "has_ys": True},
    "inner": {"kind": "loop", "length": 8, "has_ys": False},
}
OBJECTIVE = {"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0}
FOR = {"outer": {"repr": "for", "unroll": 1}}
SCAN = {"outer": {"repr": "scan", "unroll": 1}}
# compile-heavy but fast ("for") vs compile-light but slow ("scan"):
# calls=1:   for = 10 + 1e-4 = 10.0001,  scan = 0.5 + 1e-3 = 0.501      -> scan wins
# calls=1e5: for = 10 + 10   = 20,       scan = 0.5 + 100  = 100.5      -> for wins
PARETO = [
    {"config": FOR, "compile_s": 10.0, "run_s": 1e-4},
    {"config": SCAN, "compile_s": 0.5, "run_s": 1e-3},
]


def make_entry(
    function_key: str = "mymod:step",
    fingerprint: str = "f00d",
    signature: str = "(f32[8],)",
    device: dict = CPU,
    **changes,
) -> CacheEntry:
    fields = dict(
        function_key=function_key,
        fingerprint=fingerprint,
        signature=signature,
        device=dict(device),
        config={"outer": {"repr": "scan", "unroll": 4}, "inner": {"repr": "fori", "unroll": 2}},
        sites=SITES,
        measurements={"trace_s": 0.1, "lower_s": 0.05, "compile_s": 0.4, "run_s": 2e-4, "run_iqr_s": 1e-5, "reps": 50},
        objective=OBJECTIVE,
        cost=0.75,
        default_cost=1.25,
        pareto=[],
        study_name="study-1",
    )
    fields.update(changes)
    return CacheEntry(**fields)


def key_of(e: CacheEntry) -> tuple[str, str, str, str]:
    return (e.function_key, e.fingerprint, e.signature, e.device_key)


def make_record(
    function_key: str = "app:step", signature: str = "(f32[3],)", device: dict = CPU, **changes
) -> PendingRecord:
    fields = dict(
        function_key=function_key,
        fingerprint="f00d",
        signature=signature,
        device=dict(device),
        location={"module": "app", "qualname": "step", "file": "/abs/app.py"},
        abstract={"tree": "PyTreeDef((*,))", "leaves": [{"shape": [3], "dtype": "float32", "weak": False}]},
        objective=OBJECTIVE,
        options={"static_argnums": [1]},
    )
    fields.update(changes)
    return PendingRecord(**fields)
