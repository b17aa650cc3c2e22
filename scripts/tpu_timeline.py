"""Experiment: where a tune()'s wall goes on a TPU, as a timeline (builders, worker, loads,
confirmation rounds). Run: python scripts/tpu_timeline.py STUDY N_TRIALS [sampler]."""

import functools
import json
import sys
import tempfile
import time

T0 = time.perf_counter()
LOG = []


def note(*what):
    LOG.append((round(time.perf_counter() - T0, 3), *what))


def wrap(cls, name, lab=lambda a, k: ""):
    orig = getattr(cls, name)

    @functools.wraps(orig)
    def w(*a, **k):
        tag = lab(a, k)
        note("start", f"{cls.__name__}.{name}", tag)
        try:
            return orig(*a, **k)
        finally:
            note("end", f"{cls.__name__}.{name}", tag)

    setattr(cls, name, w)


def main():
    study, n_trials = sys.argv[1], int(sys.argv[2])
    sampler = sys.argv[3] if len(sys.argv) > 3 else "auto"
    from autotune.measuring import _host

    note("pinned", _host.pin())
    from autotune.measuring.process import _builders, _exported, _slot, _worker_runner
    from autotune.study import _confirm

    def cfg(i):
        return lambda a, k: (a[i].to_json() if hasattr(a[i], "to_json") else str(a[i]))[:60] if len(a) > i else ""

    wrap(_exported.ExportHost, "_measure_export", cfg(1))
    wrap(_exported.ExportHost, "_load_built", cfg(1))
    wrap(_exported.ExportHost, "_prepare", cfg(1))
    wrap(_exported.ExportHost, "prefetch")
    wrap(_worker_runner.WorkerRunner, "_retime", cfg(1))
    wrap(_worker_runner.WorkerRunner, "start")
    wrap(_worker_runner.WorkerRunner, "close")
    wrap(_worker_runner.WorkerRunner, "renew")
    wrap(_slot.WorkerHost, "_wait_ready")
    wrap(_builders.BuilderPool, "wait", lambda a, k: a[1].key[:12])
    wrap(_builders.BuilderPool, "submit", lambda a, k: a[1][:12])
    wrap(
        _builders.BuilderPool, "_event", lambda a, k: str(a[2].get("event")) + " " + str(a[2].get("compile_s", ""))[:6]
    )
    orig_confirm = _confirm.confirm

    from autotune.study import _tune

    def confirm(*a, **k):
        note("start", "confirm", "")
        out = orig_confirm(*a, **k)
        note("end", "confirm", json.dumps([(p.config.to_json()[:40], len(p.rounds), p.compiles) for p in out]))
        return out

    _tune.confirm = confirm
    from autotune import tune
    from autotune.record._studyfile import load_examples
    from benchmarks._studies import controller, study_path

    note("imported")
    ex = load_examples(study_path(study))[0]
    ctl = controller(ex.fn)
    with tempfile.TemporaryDirectory() as tmp:
        note("tune")
        t = time.perf_counter()
        r = tune(
            ctl.fun,
            *ex.args,
            kwargs=ex.kwargs,
            expected_calls=ctl.expected_calls,
            compile_weight=ctl.compile_weight,
            runtime_weight=ctl.runtime_weight,
            n_trials=n_trials,
            sampler=sampler,
            storage=f"{tmp}/s.db",
            function_key=ctl.key,
            jit_kwargs=ctl.jit_kwargs,
            seed=0,
            timing={"target_s": 0.2},
            trial_timeout=60,
            progress=False,
            **({"builders": int(sys.argv[4])} if len(sys.argv) > 4 else {}),
        )
        wall = time.perf_counter() - t
    note("done")
    for row in LOG:
        print(*row)
    print("WALL", round(wall, 2), r.best_config.to_json(), r.sampler, json.dumps(r.wall.to_json()))
    for tr in r.trials:
        m = tr.measurement
        print("TRIAL", tr.number, tr.state, tr.config.to_json() if tr.config else None, tr.cost,
              m and {k: m.get(k) for k in ("compile_s", "compile_cpu_s", "trace_cpu_s", "lower_cpu_s", "run_p10_s")})
    for p in r.confirmed:
        print("CONFIRMED", p.config.to_json(), p.compile_cost_s, p.run_cost_s, p.compiles, p.rounds)


main()
