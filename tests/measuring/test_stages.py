"""at.measure: honest, separate trace/lower/compile/run numbers."""

import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _presets import MEASURE_FAST
from jax import lax

import autotune as at


def small(x, n, *, scale, bias):
    return lax.scan(lambda c, _: (jnp.sin(c) * scale + bias, None), x, None, length=n)[0]


def reference_small(x, n, scale, bias):
    x = np.asarray(x, np.float64)
    for _ in range(n):
        x = np.sin(x) * scale + np.asarray(bias, np.float64)
    return x


def tiny(x):
    return lax.scan(lambda c, _: (jnp.sin(c) * 0.9, None), x, None, length=8)[0]


def unrolled_64(x):
    """A program whose compile is real work: 64 fully unrolled steps."""

    def body(c, _):
        c = jnp.sin(c) * 1.01 + jnp.cos(c * 0.5) * 0.1
        return c, None

    return lax.scan(body, x, None, length=64, unroll=64)[0]


def test_fields_are_positive_and_consistent():
    x = jnp.ones(4)
    m = at.measure(
        small,
        (x, 5),
        {"scale": 0.5, "bias": jnp.ones(4)},
        jit_kwargs={"static_argnums": (1,), "static_argnames": ("scale",)},
        min_reps=7,
        **MEASURE_FAST,
    )
    for field in ("trace_s", "lower_s", "compile_s", "run_s"):
        value = getattr(m, field)
        assert isinstance(value, float) and value > 0 and np.isfinite(value), (field, value)
    assert m.run_iqr_s >= 0
    assert isinstance(m.reps, int) and m.reps >= 7
    assert m.compile_total_s == pytest.approx(m.trace_s + m.lower_s + m.compile_s)
    assert m.config == at.Config()
    assert all(isinstance(v, int) and v >= 0 for v in m.memory.values())
    assert m.flops is None or m.flops >= 0


@pytest.mark.parametrize("min_reps", [1, 3, 12])
def test_reps_at_least_min_reps_even_for_a_slow_call(min_reps):
    # a tiny time budget: the minimum still holds
    m = at.measure(lambda x: jnp.sin(x), (jnp.ones(2),), min_reps=min_reps, target_s=1e-6, warmup=0)
    assert m.reps >= min_reps


def test_outputs_are_the_functions_outputs_under_the_config():
    x, bias = jnp.linspace(0.0, 1.0, 4), jnp.full(4, 0.25)
    (site,) = at.sites(small, x, 6, scale=0.5, bias=bias)
    cfg = at.Config({site.id: {"repr": "for"}})
    m = at.measure(
        small,
        (x, 6),
        {"scale": 0.5, "bias": bias},
        config=cfg,
        jit_kwargs={"static_argnums": (1,), "static_argnames": ("scale",)},
        keep_outputs=True,
        **MEASURE_FAST,
    )
    assert m.config == cfg
    np.testing.assert_allclose(m.outputs, reference_small(x, 6, 0.5, bias), rtol=1e-5)
    m2 = at.measure(
        small,
        (x, 6),
        {"scale": 0.5, "bias": bias},
        jit_kwargs={"static_argnums": (1,), "static_argnames": ("scale",)},
        **MEASURE_FAST,
    )
    assert m2.outputs is None  # not kept unless asked


def test_config_as_dict_and_invalid_config():
    x = jnp.ones(3)
    (site,) = at.sites(tiny, x)
    m = at.measure(tiny, (x,), config={site.id: {"unroll": 4}}, keep_outputs=True, **MEASURE_FAST)
    assert m.config == {site.id: {"repr": "scan", "unroll": 4}}
    np.testing.assert_allclose(m.outputs, tiny(x), rtol=1e-6)
    with pytest.raises(at.ConfigError):
        at.measure(tiny, (x,), config={"missing": {"unroll": 4}}, **MEASURE_FAST)


@pytest.mark.parametrize(
    "how",
    [
        "static_argnums",  # n positional, declared by position
        "static_argnames-kw",  # scale as keyword, declared by name
        "static_argnames-positional",  # n positional, declared by name (jax.jit accepts this)
        "static_argnums-passed-by-kw",  # n by keyword, declared by position (jax.jit accepts this)
    ],
)
def test_static_args_and_kwargs(how):
    x, bias = jnp.linspace(0.0, 1.0, 4), jnp.full(4, 0.25)

    def f(x, n, scale=0.5, bias=None):
        return small(x, n, scale=scale, bias=bias)

    args, kwargs, jit_kwargs = {
        "static_argnums": ((x, 3), {"bias": bias}, {"static_argnums": (1,)}),
        "static_argnames-kw": ((x, 3), {"scale": 0.5, "bias": bias}, {"static_argnums": 1, "static_argnames": "scale"}),
        "static_argnames-positional": ((x, 3), {"bias": bias}, {"static_argnames": ("n",)}),
        "static_argnums-passed-by-kw": ((x,), {"n": 3, "bias": bias}, {"static_argnums": (1,)}),
    }[how]
    # what jax.jit itself does with these arguments
    want = jax.jit(f, **jit_kwargs)(*args, **kwargs)
    np.testing.assert_allclose(want, reference_small(x, 3, 0.5, bias), rtol=1e-5)
    m = at.measure(f, args, kwargs, jit_kwargs=jit_kwargs, keep_outputs=True, **MEASURE_FAST)
    np.testing.assert_allclose(m.outputs, want, rtol=1e-6)
    assert m.reps >= 1 and m.run_s > 0


def test_donate_argnums_keeps_the_callers_arrays_alive():
    x, bias = jnp.linspace(0.0, 1.0, 4), jnp.full(4, 0.25)
    m = at.measure(
        small,
        (x, 4),
        {"scale": 0.5, "bias": bias},
        jit_kwargs={"static_argnums": (1,), "static_argnames": ("scale",), "donate_argnums": (0,)},
        min_reps=3,
        keep_outputs=True,
        **MEASURE_FAST,
    )
    assert m.reps >= 3 and m.run_s > 0
    assert not x.is_deleted()
    np.testing.assert_allclose(x, np.linspace(0.0, 1.0, 4), rtol=1e-7)
    np.testing.assert_allclose(m.outputs, reference_small(x, 4, 0.5, bias), rtol=1e-5)


def test_measurement_round_trips_through_json():
    x = jnp.ones(3)
    (site,) = at.sites(tiny, x)
    m = at.measure(tiny, (x,), config={site.id: {"unroll": 2}}, **MEASURE_FAST)
    back = at.Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back == m
    assert back.config == m.config


# --- honesty ------------------------------------------------------------------------------------

TRACE, LOWER, COMPILE = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
CLOCKS = 1e-3
"""Seconds JAX's own timer (time.time) may read over autotune's (perf_counter) for one stage it
times inside autotune's: JAX's stretch lies within autotune's, the two clocks differ by less."""


@pytest.fixture
def stages_run():
    """The trace, lowering and XLA compile stages JAX runs (``jax.monitoring``'s duration events):
    a list of (stage, function name, seconds), cleared by the test as it likes."""
    seen = []
    names = {TRACE: "trace", LOWER: "lower", COMPILE: "compile"}

    def listener(event, duration, **kwargs):
        if event in names:
            seen.append((names[event], kwargs.get("fun_name", ""), duration))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def of(seen, stage, name="unrolled_64"):
    """The seconds of each ``stage`` JAX ran for function ``name``."""
    return [s for kind, fun, s in seen if kind == stage and name in fun]


def test_same_config_twice_compiles_twice(stages_run):
    x = jnp.ones(8)
    measured = []
    for _ in range(2):
        stages_run.clear()
        m = at.measure(unrolled_64, (x,), **MEASURE_FAST)
        measured.append((m, of(stages_run, "compile")))
    for m, compiles in measured:
        assert len(compiles) == 1, compiles  # one XLA compile each: none kept from the first in memory
        assert m.compile_s >= compiles[0] - CLOCKS  # and the compile it reports is the one it ran
        assert m.lower_s > 0 and m.trace_s > 0


@pytest.fixture
def persistent_cache(tmp_path):
    """Turn JAX's persistent compilation cache on (as a user might), restore afterwards."""
    from jax._src import compilation_cache as cc  # only to start and end from a pristine cache object

    names = (
        "jax_compilation_cache_dir",
        "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes",
        "jax_enable_compilation_cache",
    )
    old = {n: getattr(jax.config, n) for n in names}
    hits = []

    def listener(event, **kwargs):
        if event == "/jax/compilation_cache/cache_hits":
            hits.append(event)

    cache_dir = tmp_path / "jax-cache"
    cache_dir.mkdir()
    cc.reset_cache()
    jax.config.update("jax_compilation_cache_dir", str(cache_dir))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.monitoring.register_event_listener(listener)
    try:
        yield cache_dir, hits
    finally:
        jax.monitoring.unregister_event_listener(listener)
        for n, v in old.items():
            jax.config.update(n, v)
        cc.reset_cache()
        jax.clear_caches()


def plain_compile(fn, x):
    """Compile without autotune's guard: in-memory caches cleared, persistent cache as configured."""
    jax.clear_caches()
    return jax.jit(fn).lower(x).compile()


def test_persistent_cache_is_off_while_measuring(persistent_cache, stages_run):
    cache_dir, hits = persistent_cache
    x = jnp.ones(8)

    # Control: the cache is live in this process. A second plain compile of the
    # same program is served from disk.
    plain_compile(unrolled_64, x)
    assert os.listdir(cache_dir), "the control compile did not write the persistent cache"
    n = len(hits)
    plain_compile(unrolled_64, x)
    assert len(hits) > n, "control: the second plain compile was not a persistent-cache hit"

    # measure must compile for real every time, although the program is on disk.
    entries = set(os.listdir(cache_dir))
    n = len(hits)
    for _ in range(2):
        stages_run.clear()
        m = at.measure(unrolled_64, (x,), **MEASURE_FAST)
        compiles = of(stages_run, "compile")
        assert len(compiles) == 1 and m.compile_s >= compiles[0] - CLOCKS, compiles  # an XLA compile, its own
    assert len(hits) == n, "measure read a compiled program from the persistent cache"
    assert set(os.listdir(cache_dir)) == entries, "measure wrote into the persistent cache"

    # and the user's cache works again afterwards
    assert jax.config.jax_enable_compilation_cache is True
    assert str(jax.config.jax_compilation_cache_dir) == str(cache_dir)
    n = len(hits)
    plain_compile(unrolled_64, x)
    assert len(hits) > n, "the persistent cache stayed off after measure"


def test_measure_as_the_first_compile_leaves_the_users_cache_working(persistent_cache):
    cache_dir, hits = persistent_cache
    x = np.ones(5, np.float32)  # NumPy input: nothing is compiled before measure
    at.measure(unrolled_64, (x,), warmup=0, min_reps=1, target_s=1e-6)
    assert hits == [] and os.listdir(cache_dir) == []
    plain_compile(unrolled_64, x)
    assert os.listdir(cache_dir), "measure left the persistent cache disabled for the rest of the process"
    n = len(hits)
    plain_compile(unrolled_64, x)
    assert len(hits) > n, "measure left the persistent cache disabled for the rest of the process"


# --- the timing primitives, the program hash, sharing a program ------------------------------


def test_time_stages_times_each_stage_and_calls_the_hooks_in_order():
    from autotune.measuring._stages import time_stages

    seen = []
    st = time_stages(
        jax.jit(tiny),
        (jnp.ones(3),),
        on_traced=lambda s: seen.append(("traced", s.lowered)),
        on_lowered=lambda s: seen.append(("lowered", s.program_hash, s.compiled)),
    )
    assert seen[0] == ("traced", None) and seen[1][0] == "lowered" and seen[1][2] is None  # before compiling
    assert seen[1][1] == st.program_hash and len(st.program_hash) == 64
    assert min(st.trace_s, st.lower_s, st.compile_s) > 0 and st.compiled is not None
    lowered_only = time_stages(jax.jit(tiny), (jnp.ones(3),), compile=False)
    assert lowered_only.compiled is None and lowered_only.compile_s == 0.0
    skipped = time_stages(jax.jit(tiny), (jnp.ones(3),), on_lowered=lambda s: "earlier")
    assert skipped.reused == "earlier" and skipped.compiled is None


def test_configs_that_emit_the_same_program_share_a_hash():
    x = jnp.ones(3)
    (site,) = at.sites(tiny, x)
    full = at.measure(tiny, (x,), config={site.id: {"repr": "for"}}, **MEASURE_FAST)  # "for" = unroll by the length
    unroll8 = at.measure(tiny, (x,), config={site.id: {"unroll": 8}}, **MEASURE_FAST)
    rolled = at.measure(tiny, (x,), config={site.id: {"unroll": 2}}, **MEASURE_FAST)
    assert full.program_hash == unroll8.program_hash != rolled.program_hash
    assert full.program_hash == at.measure(tiny, (x,), config={site.id: {"repr": "for"}}, **MEASURE_FAST).program_hash


def test_on_lowered_can_hand_back_an_earlier_measurement_and_nothing_is_compiled(stages_run):
    x = jnp.ones(8)
    earlier = at.Measurement(
        trace_s=1000.0,  # longer than this test may run: a figure copied from here cannot pass as measured
        lower_s=1000.0,
        compile_s=123.0,
        run_s=4.0,
        run_iqr_s=0.5,
        reps=7,
        memory={"temp": 1},
        flops=2.0,
        program_hash="h",
        outputs=np.zeros(8),
    )
    hashes = []

    def on_lowered(h):
        hashes.append(h)
        return earlier

    stages_run.clear()
    t0 = time.perf_counter()
    m = at.measure(unrolled_64, (x,), on_lowered=on_lowered, **MEASURE_FAST)
    took = time.perf_counter() - t0
    assert len(hashes) == 1 and m.program_hash == hashes[0] != "h"
    assert (m.compile_s, m.run_s, m.run_iqr_s, m.reps, m.memory, m.flops) == (123.0, 4.0, 0.5, 7, {"temp": 1}, 2.0)
    assert_own_trace_and_lower(m, stages_run, took)
    assert m.outputs is earlier.outputs and of(stages_run, "compile") == []
    stages_run.clear()
    fresh = at.measure(unrolled_64, (x,), on_lowered=lambda h: None, **MEASURE_FAST)  # None: measured as usual
    (compile_s,) = of(stages_run, "compile")
    assert fresh.program_hash == m.program_hash and compile_s - CLOCKS <= fresh.compile_s != 123.0


def assert_own_trace_and_lower(m, seen, took):
    """``m``'s trace and lower seconds are its own call's: the trace and lowering JAX timed in that
    call (in ``seen``) lie within them, and both within the call's ``took`` seconds."""
    (trace,), (lower,) = of(seen, "trace"), of(seen, "lower")
    assert trace - CLOCKS <= m.trace_s and lower - CLOCKS <= m.lower_s, (trace, lower, m)
    assert m.trace_s + m.lower_s <= took, (took, m)


def test_measurement_dicts_carry_the_program_hash():
    m = at.Measurement.from_dict({"trace_s": 1, "lower_s": 2, "compile_s": 3, "run_s": 4})
    assert m.program_hash is None and m.reps == 0  # dicts written before the hash existed still load
    m = m.replace(program_hash="abc")
    assert at.Measurement.from_dict(json.loads(json.dumps(m.to_dict()))) == m


def test_argument_zero_can_be_static_or_donated():
    # static_argnums=0 / donate_argnums=0 name argument 0: the number 0 is not "no argument".
    def scaled(n, x):
        return x * n

    x = jnp.arange(3.0)
    m = at.measure(scaled, (2, x), jit_kwargs={"static_argnums": 0}, keep_outputs=True, **MEASURE_FAST)
    np.testing.assert_allclose(m.outputs, np.arange(3.0) * 2)
    donate = {"donate_argnums": 0}
    m = at.measure(lambda v: v * 2.0, (x,), jit_kwargs=donate, keep_outputs=True, min_reps=3, **MEASURE_FAST)
    assert m.reps >= 3 and not x.is_deleted()  # a fresh copy is donated on every call


def test_the_objective_charges_cpu_seconds_of_each_stage_and_the_10th_percentile_call():
    m = at.measure(unrolled_64, (jnp.ones(8),), **MEASURE_FAST)
    for stage in ("trace", "lower", "compile"):
        cpu = getattr(m, f"{stage}_cpu_s")
        assert isinstance(cpu, float) and cpu > 0, (stage, cpu)
    assert m.compile_cost_s == m.compile_total_cpu_s == pytest.approx(m.trace_cpu_s + m.lower_cpu_s + m.compile_cpu_s)
    # Per call the objective charges the 10th percentile of the timed calls (preemption only adds time).
    assert 0 < m.run_p10_s <= m.run_s and m.run_cost_s == m.run_p10_s
    assert at.Objective(expected_calls=10).cost(m) == pytest.approx(m.compile_cost_s + 10 * m.run_p10_s)
    assert at.Measurement.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    # A record written before CPU seconds existed is charged its wall seconds.
    old = at.Measurement.from_dict({"trace_s": 1, "lower_s": 2, "compile_s": 3, "run_s": 4})
    assert old.compile_total_cpu_s is None and old.compile_cost_s == 6 and old.run_cost_s == 4


def test_a_config_sharing_a_program_keeps_its_own_trace_and_lower_cpu_seconds(stages_run):
    earlier = at.measure(unrolled_64, (jnp.ones(8),), **MEASURE_FAST)
    # Seconds no stage of this test can take (it would time out first): a figure copied from here shows.
    earlier = earlier.replace(trace_s=1000.0, lower_s=1000.0, trace_cpu_s=1000.0, lower_cpu_s=1000.0)
    stages_run.clear()
    t0, c0 = time.perf_counter(), time.process_time()
    m = at.measure(unrolled_64, (jnp.ones(8),), on_lowered=lambda h: earlier, **MEASURE_FAST)
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert (m.compile_s, m.compile_cpu_s) == (earlier.compile_s, earlier.compile_cpu_s)  # the shared compile
    assert_own_trace_and_lower(m, stages_run, took)
    # its CPU seconds too: measured (above zero), within the process's CPU seconds of this call
    assert m.trace_cpu_s > 0 and m.lower_cpu_s > 0 and m.trace_cpu_s + m.lower_cpu_s <= cpu, (cpu, m)


def test_the_tenth_percentile_never_falls_below_the_fastest_sample():
    # Exclusive quantiles extrapolate: 5 samples with one slow outlier gave a negative p10,
    # which a round then rejected as negative seconds.
    from autotune.measuring._timing import quartiles

    for samples in ([2.0e-3, 2.1e-3, 2.05e-3, 2.2e-3, 0.5], [1.0, 1.1, 1.2, 9.0], [3e-6] * 4 + [1e-3]):
        median, iqr, p10 = quartiles(samples)
        assert min(samples) <= p10 <= median and iqr >= 0


# --- timing modes: steady (back to back), blocking, device ------------------------------------


class Device:
    """A device seen through time_calls' seams: each call runs ``per_call`` seconds of its clock after
    the previous one, a wait for outputs adds ``round_trip``, and every call, wait, fresh input and
    clock reading is logged in order. time_calls itself runs unchanged."""

    def __init__(self, per_call=1e-3, round_trip=0.0):
        self.per_call, self.round_trip, self.now, self.log, self.made = per_call, round_trip, 0.0, [], 0

    def clock(self):
        self.log.append(("clock",))
        return self.now

    def call(self, *inputs):
        self.now += self.per_call
        self.log.append(("call", *inputs))
        return ("outputs", len(self.log))

    def block(self, outputs):
        self.now += self.round_trip
        self.log.append(("block",))

    def fresh(self):
        self.made += 1
        self.log.append(("fresh", self.made))
        return self.made

    def timed(self):
        """The clocked stretches: the log between each pair of clock readings."""
        marks = [i for i, event in enumerate(self.log) if event == ("clock",)]
        return [self.log[a + 1 : b] for a, b in zip(marks[::2], marks[1::2])]


def count(stretch, kind):
    return sum(1 for event in stretch if event[0] == kind)


def test_steady_dispatches_k_calls_back_to_back_and_waits_once_per_sample():
    from autotune.measuring._sampling import Sampling
    from autotune.measuring._timing import Stopwatch, time_calls

    dev = Device(per_call=1e-3, round_trip=5e-4)
    watch = Stopwatch(dev.block, dev.clock)
    t = time_calls(dev.call, Sampling(warmup=1, min_reps=3, target_s=0.1), stopwatch=watch, min_sample_s=0.01)
    assert t.mode == "steady"
    k = count(dev.timed()[-1], "call")  # calls in a batch: enough for one to last min_sample_s
    assert k * 1e-3 + 5e-4 >= 0.01 and k < 20
    samples = dev.timed()[-(t.reps // k) :]
    assert all(count(s, "call") == k and count(s, "block") == 1 and s[-1] == ("block",) for s in samples)
    assert t.reps == k * len(samples) and len(samples) >= 3  # reps counts calls; a sample is a batch of k
    # the round trip is paid once a batch: a k-th of it per call
    assert t.run_s == pytest.approx(1e-3 + 5e-4 / k)


def test_blocking_waits_for_every_call_and_charges_it_the_round_trip():
    from autotune.measuring._sampling import Sampling
    from autotune.measuring._timing import Stopwatch, time_calls

    dev = Device(per_call=1e-3, round_trip=5e-4)
    watch = Stopwatch(dev.block, dev.clock)
    t = time_calls(dev.call, Sampling(mode="blocking", warmup=1, min_reps=3, target_s=0.02), stopwatch=watch)
    assert t.mode == "blocking" and t.reps >= 3
    for stretch in dev.timed():
        assert count(stretch, "call") == count(stretch, "block") >= 1
        assert all(a[0] == "call" and b == ("block",) for a, b in zip(stretch[::2], stretch[1::2]))
    assert t.run_s == pytest.approx(1e-3 + 5e-4)


@pytest.mark.parametrize("mode", ["steady", "blocking"])
def test_donated_inputs_are_made_fresh_for_every_call_before_the_clock_starts(mode):
    from autotune.measuring._sampling import Sampling
    from autotune.measuring._timing import Stopwatch, time_calls

    dev = Device()
    watch = Stopwatch(dev.block, dev.clock)
    sampling = Sampling(mode=mode, warmup=1, min_reps=3, target_s=0.05)
    t = time_calls(dev.call, sampling, fresh=dev.fresh, stopwatch=watch)
    calls = [event for event in dev.log if event[0] == "call"]
    assert [event[1] for event in calls] == list(range(1, dev.made + 1))  # each input once, in the order made
    for stretch in dev.timed():
        assert count(stretch, "fresh") == 0 and count(stretch, "call") >= 1  # copying is never timed
    assert t.reps >= 3 and t.run_s == pytest.approx(1e-3)
    if mode == "steady":
        assert max(count(s, "call") for s in dev.timed()) > 1  # a batch's inputs all exist before it starts


def test_the_seams_see_real_jax_calls_steady_waits_less_often_than_it_calls():
    import autotune.measuring._stages as measure
    from autotune.measuring._sampling import Sampling
    from autotune.measuring._timing import Stopwatch

    compiled = jax.jit(lambda v: jnp.sin(v) * 2.0).lower(jnp.ones(16)).compile()
    waits = {}

    for mode in ("steady", "blocking"):
        waits[mode] = 0

        def block(outputs, mode=mode):
            waits[mode] += 1
            return jax.block_until_ready(outputs)

        watch = Stopwatch(block)
        t = measure.time_compiled(compiled, (jnp.ones(16),), {}, Sampling(mode=mode, **MEASURE_FAST), stopwatch=watch)
        np.testing.assert_allclose(t.outputs, np.sin(np.ones(16)) * 2.0, rtol=1e-6)
        assert t.mode == mode and t.reps >= 5
        if mode == "steady":
            assert waits[mode] < t.reps / 2, (waits, t.reps)
        else:
            assert waits[mode] >= t.reps, (waits, t.reps)


def test_steady_is_the_default_and_the_measurement_records_the_mode_charged():
    x = jnp.ones(3)
    default = at.measure(tiny, (x,), **MEASURE_FAST)
    blocking = at.measure(tiny, (x,), timing_mode="blocking", **MEASURE_FAST)
    assert (default.timing, blocking.timing) == ("steady", "blocking")
    for m in (default, blocking):
        back = at.Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
        assert back == m and back.timing == m.timing
    # A record written before the mode was kept was timed call by call.
    assert at.Measurement.from_dict({"trace_s": 1, "lower_s": 2, "compile_s": 3, "run_s": 4}).timing == "blocking"
    with pytest.raises(at.StudyError, match="'steady'.*'blocking'.*'device'"):
        at.measure(tiny, (x,), timing_mode="fastest", **MEASURE_FAST)


def test_device_timing_on_the_cpu_charges_the_steady_state_quietly():
    import warnings

    from autotune.measuring._timing import profiled_seconds

    if jax.default_backend() != "cpu":
        pytest.skip("the CPU's profile has no device plane; an accelerator's has")
    x = jnp.ones(3)
    f = jax.jit(tiny)
    assert profiled_seconds(lambda: f(x).block_until_ready(), 1) is None  # JAX's real profiler, read
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = at.measure(tiny, (x,), timing_mode="device", keep_outputs=True, **MEASURE_FAST)
    assert m.timing == "steady" and m.run_s > 0 and m.reps >= 5
    np.testing.assert_allclose(m.outputs, tiny(x), rtol=1e-6)
    assert not [w for w in caught if "timing" in str(w.message)]


def test_retime_uses_the_mode_it_is_given_and_donation_keeps_the_callers_arrays():
    from autotune.measuring._sampling import Sampling
    from autotune.measuring._stages import measure_executable

    x = jnp.linspace(0.0, 1.0, 4)
    call = at.Call(lambda v: v * 2.0, (x,), jit_kwargs={"donate_argnums": 0})
    m, exe = measure_executable(call, sampling=Sampling(mode="blocking", **MEASURE_FAST))
    assert m.timing == "blocking" and exe is not None
    again = exe.retime(Sampling(mode="steady", **MEASURE_FAST))
    assert again.timing == "steady" and again.compile_s == m.compile_s and again.reps >= 5
    assert not x.is_deleted()
    np.testing.assert_allclose(x, np.linspace(0.0, 1.0, 4))


def test_runners_pass_the_mode_on_as_the_options_spell_it():
    from autotune.measuring._runner import InProcessRunner
    from autotune.measuring._sampling import Sampling

    options = at.TuneOptions(timing="blocking")
    assert options.timing == Sampling(mode="blocking")  # the options hold the one frozen value runners take
    with InProcessRunner(at.Call(tiny, (jnp.ones(3),)), options.timing.replace(**MEASURE_FAST)) as runner:
        assert runner.sampling == Sampling(mode="blocking", **MEASURE_FAST)
        assert runner.measure(None).timing == "blocking"
        assert runner.retime(None).timing == "blocking"
