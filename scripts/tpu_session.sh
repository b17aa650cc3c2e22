#!/usr/bin/env bash
# The accelerator results, run on a TPU host through the `device` tool, one part per command
# (each fits the 10-minute limit of one command); results go to $OUT (default: out/).
#
#   bash scripts/tpu_session.sh check    # the chip, the wheels, one CLI study measured in its worker (arguments
#                                        # after it go to its `autotune tune`: --run-seconds 0.02)
#   bash scripts/tpu_session.sh bench-one accel_rnn --grid-max 8   # benchmarks/bench.py on one study, about
#                                        # 5 min at full size (two do not fit a command); arguments after a
#                                        # part go to its benchmark (--xla off: one approach less). The four:
#                                        # accel_rnn, accel_tiny_scan, accel_bf16_layers, accel_rk4 (about 9 min
#                                        # with --xla off and TRIAL_TIMEOUT=30)
#   bash scripts/tpu_session.sh builders accel_rk4 # benchmarks/builders.py: tuning wall with 4 builders vs none
#                                        # (about 2.5 min)
#   bash scripts/tpu_session.sh e2e      # benchmarks/e2e.py: accel_tiny_scan, 20,000 calls, whole processes (~4.5 min)
#   bash scripts/tpu_session.sh e2e-tier # benchmarks/e2e.py --tier-up on tier_sampler at full size, 100,000 calls, one
#                                        # run of each mode (not run yet: about 8 min)
#   bash scripts/tpu_session.sh notebook # a process that holds the chip tunes in-process (one warning)
#   bash scripts/tpu_session.sh xla      # benchmarks/tpu_xla_probe.py: which compile options the TPU takes
#   bash scripts/tpu_session.sh memory   # a checkpointed training step tuned, then under half its winner's memory
#   bash scripts/tpu_session.sh oom      # scripts/tpu_oom.py --remat: configs over the chip's HBM fail, the study
#                                        # finishes (72 s on a v5e)
#
# Tried on the CPU first: `AUTOTUNE_STUDY_SIZE=small bash scripts/tpu_session.sh check` runs the
# same steps with small studies (NO_WHEELS=1 PYTHON=.venv/bin/python: no wheels, the venv's Python).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -d .whl-tpu ] && [ -z "${NO_WHEELS:-}" ]; then
    # shellcheck source=/dev/null
    source scripts/tpu_env.sh || exit 1
fi
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 AUTOTUNE_STUDY_SIZE=${AUTOTUNE_STUDY_SIZE:-full}
OUT=${OUT:-out}
mkdir -p "$OUT"
work=$(mktemp -d)
export AUTOTUNE_CACHE=$work/cache.db
TIMEOUT=${TRIAL_TIMEOUT:-60}
bench() {
    local name=$1; shift
    "$PY" -m benchmarks.bench "$@" --final-processes 2 --rounds 2 --trial-timeout "$TIMEOUT" \
        --json "$OUT/$name.json" --out "$OUT/$name.md" 2>&1 | tee "$OUT/$name.log"  # progress streams: a killed part still shows where it was
}
watch_trials() {  # every 20 s, each trial of the studies in $1 so far: a tune with --json shows no progress
    while sleep 20; do
        [ -f "$1" ] && "$PY" - "$1" <<'PY'
import sqlite3, sys, time
rows = sqlite3.connect(sys.argv[1]).execute(
    "select study_id, number, state, round((julianday(coalesce(datetime_complete, datetime('now'))) - "
    "julianday(datetime_start)) * 86400, 1) from trials order by trial_id").fetchall()
print(time.strftime("%H:%M:%S"), "trials (study, number, state, s):", rows, flush=True)
PY
    done
}
part=${1:-check}
shift $(( $# > 0 ? 1 : 0 ))  # what follows the part goes to its benchmark (bench-one accel_rnn --grid-max 16)
case "$part" in
check)
    "$PY" -c 'import platform; print("glibc", platform.libc_ver())'
    start=$(date +%s)
    "$PY" -m autotune tune studies/accel_rnn.py --trials 6 --trial-timeout "$TIMEOUT" \
        --storage "$work/studies.db" --json "$@" > "$OUT/check.json" 2> "$OUT/check.log"
    echo "autotune tune: exit $? in $(( $(date +%s) - start )) s"
    grep -c "without isolation" "$OUT/check.log" | sed 's/^/"without isolation" warnings: /'
    "$PY" - "$OUT/check.json" <<'PY'
import collections, json, sys
for r in json.load(open(sys.argv[1])):
    states = collections.Counter(t["state"] for t in r["trials"])
    print(r["function"], "best", r["best_config"], f"cost {r['best_cost']:.4g} s, default {r['default_cost']:.4g} s,",
          f"default/best {r['default_cost'] / r['best_cost']:.3f}", dict(states))
    for p in r["confirmed"]:
        print("  confirmed", p.get("config"), "compile", p.get("compile_cost_s"), "run", p.get("run_cost_s"))
PY
    ;;
bench-one) study=${1:?bench-one needs a study name}; shift; bench "tpu-$study" --study "$study" "$@" ;;
e2e)
    # A TPU process spends about 17 s starting and stopping the runtime (13-14 s to its first call): at accel_rnn's 10,000 calls the loop's
    # 0.3 s is inside that noise, and 3 runs did not fit a command; the tiny scan's calls are a third of its process.
    "$PY" -m benchmarks.e2e --study accel_tiny_scan --runs 2 --calls 20000 --json "$OUT/tpu-e2e.json" --out "$OUT/tpu-e2e.md" "$@" 2>&1 \
        | tee "$OUT/tpu-e2e.log"
    ;;
e2e-tier)
    # tier_sampler at full size: the written-out loop compiles 8 s and, tiered, beats every config compiled up front
    # from about 100,000 calls (docs/results/tpu.md, "A workload for tier-up on the chip"); a process there takes
    # about 65 s, so one run of each mode fits a command
    "$PY" -m benchmarks.e2e --tier-up --study tier_sampler --runs 1 --tier-calls 100000 \
        --json "$OUT/tpu-tier.json" --out "$OUT/tpu-tier.md" "$@" 2>&1 | tee "$OUT/tpu-tier.log"
    ;;
notebook)
    # a process that holds the device (a notebook) tunes in-process: one warning, no traceback
    timeout 120 "$PY" - <<'PY' 2>&1 | tee "$OUT/notebook.log"
import time, warnings
import jax.numpy as jnp
import autotune as at

@at.autotuned(expected_calls=10_000)
def smooth(x):
    return at.loop(lambda c, _: (0.99 * c + 0.01, None), x, length=2048, name="steps")[0]

x = jnp.zeros((16, 128))
smooth(x).block_until_ready()  # this process holds the chip now
t0 = time.monotonic()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    r = smooth.tune(x, n_trials=4, progress=False, trial_timeout=30)
ours = [str(w.message) for w in caught if "autotune" in str(w.message)]
print("warnings:", len(ours)); print(ours[0][:400] if ours else "")
print("winner", r.best_config, f"default/best {r.default_cost / r.best_cost:.3f}", f"in {time.monotonic() - t0:.1f} s")
PY
    ;;
builders)
    study=${1:?builders needs a study name}; shift
    "$PY" -m benchmarks.builders --study "studies/$study.py" --builders 4 --trials 6 --trial-timeout 20 \
        --json "$OUT/builders-$study.json" "$@" 2>&1 | tee "$OUT/builders-$study.log"
    ;;
memory)
    # Issue 47 on the chip: a training step over checkpointed layers (STUDY, default transformer_step), tuned
    # with the policy dimension, then again under a budget of half the first winner's device memory; prints
    # each winner's config, cost and memory (about 4 min at full size by estimate; arguments after go to both tunes)
    study=${MEMORY_STUDY:-transformer_step}
    watch_trials "$work/studies.db" &
    watcher=$!
    trap 'kill "$watcher" 2>/dev/null' EXIT  # on every way out: a watcher left running holds the output pipe open
    timeout "${MEMORY_TIMEOUT:-240}" "$PY" -m autotune tune "studies/$study.py" --trials 6 --xla off --trial-timeout "$TIMEOUT" \
        --storage "$work/studies.db" --json "$@" > "$OUT/memory-$study.json" 2> "$OUT/memory-$study.log"
    echo "tune: exit $?"
    half=$("$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))[0]; print(int(r["memory_bytes"]) // 2)' \
        "$OUT/memory-$study.json") || exit 1
    timeout "${MEMORY_TIMEOUT:-240}" "$PY" -m autotune tune "studies/$study.py" --trials 6 --xla off --trial-timeout "$TIMEOUT" \
        --max-memory "$half" --storage "$work/studies.db" --json "$@" > "$OUT/memory-$study-half.json" \
        2> "$OUT/memory-$study-half.log"
    echo "tune under $half B: exit $?"
    "$PY" - "$OUT/memory-$study.json" "$OUT/memory-$study-half.json" <<'PY'
import json, sys
for path in sys.argv[1:]:
    for r in json.load(open(path)):
        print(path.rsplit("/", 1)[-1], "budget", r.get("max_memory"), "best", r["best_config"], f"cost {r['best_cost']:.4g} s",
              f"default {r['default_cost']:.4g} s", "memory", r.get("memory_bytes"))
        for t in r["trials"]:
            print("  ", t["state"], t["config"], t.get("memory_bytes"), (t.get("reason") or "")[:100])
PY
    ;;
oom) timeout 300 "$PY" scripts/tpu_oom.py --remat 2>&1 | tee "$OUT/oom-remat.log" ;;
xla) timeout 150 "$PY" -m benchmarks.tpu_xla_probe --json "$OUT/xla-probe.json" 2>&1 | tail -20 ;;
*) echo "tpu_session.sh: unknown part '$part' (check, notebook, xla, memory, oom, bench-one NAME, builders NAME, e2e, e2e-tier)" >&2; exit 2 ;;
esac
