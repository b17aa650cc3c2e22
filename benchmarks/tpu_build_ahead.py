"""(An experiment; its answer is in docs/results/tuning-wall.md, "Sixth pass on the chip".)
Side by side on the chip: a study's tune() (accel_rnn unless named) as the bench's tuned approach, confirmation's
build-ahead on and off alternately (BUILD_AHEAD), N pairs; prints one JSON line a run."""
import json, os, sys, tempfile, time

from autotune.measuring import _host

_host.pin()
import autotune as at
from autotune.record._studyfile import load_examples
from autotune.study import _confirm
from benchmarks._studies import controller, study_path  # run from the repository root: PYTHONPATH=.

pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
name = sys.argv[2] if len(sys.argv) > 2 else "accel_rnn"
ex = load_examples(study_path(name))[0]
ctl = controller(ex.fn)
out = os.environ.get("OUT", "out")
rows = []
with tempfile.TemporaryDirectory() as tmp:
    for i in range(2 * pairs):
        on = (i % 2 == 0) if (i // 2) % 2 == 0 else (i % 2 == 1)  # ABBA
        _confirm.BUILD_AHEAD = on
        t0 = time.perf_counter()
        r = at.tune(ctl.fun, *ex.args, kwargs=ex.kwargs, expected_calls=ctl.expected_calls,
                    compile_weight=ctl.compile_weight, runtime_weight=ctl.runtime_weight, n_trials=6,
                    storage=os.path.join(tmp, f"{i}.db"), function_key=ctl.key, jit_kwargs=ctl.jit_kwargs,
                    seed=0, timing={"target_s": 0.2}, trial_timeout=60, xla=True)
        wall = time.perf_counter() - t0
        row = {"ahead": on, "wall": wall, "best": r.best_config.to_dict(), "best_cost": r.best_cost,
               "confirm_measurements": sum(len(c.rounds) for c in r.confirmed),
               "phases": r.wall.to_json() if r.wall is not None else None}
        rows.append(row)
        print(json.dumps(row), flush=True)
json.dump(rows, open(os.path.join(out, f"ahead-{name}.json"), "w"), indent=1)
