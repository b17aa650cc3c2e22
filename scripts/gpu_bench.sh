#!/usr/bin/env bash
# The benchmark on a GPU machine: a subset of studies sized to finish in <= 8 minutes.
#
#   OUT=/some/dir scripts/gpu_bench.sh            # default OUT=./out
#   BENCH_ARGS="--quick" scripts/gpu_bench.sh     # extra/override arguments for benchmarks/bench.py
#   GPU_STUDIES="hmc kalman" scripts/gpu_bench.sh # another subset
#
# Runs anywhere (also on CPU, for checking). Python packages the image lacks (optuna,
# sqlalchemy, ...) are installed from wheels in ./.whl when that folder exists.
# Writes $OUT/bench.json, $OUT/bench.md and $OUT/bench.log.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}

if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}
else
    export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
# Each measurement compiles cold; keep the GPU allocator from grabbing most of the memory.
export XLA_PYTHON_CLIENT_PREALLOCATE=${XLA_PYTHON_CLIENT_PREALLOCATE:-false}

# GPU compiles are slower than CPU ones and tiny loop bodies are launch-bound, so the
# subset mixes a launch-bound study, a matmul-heavy one and a nested one, with a grid
# capped at 32 configs.
STUDIES=${GPU_STUDIES:-lambda_returns gru_encoder scan_layers hmc}
args=()
for s in $STUDIES; do args+=(--study "$s"); done

"$PY" -c 'import jax; print("jax", jax.__version__, jax.devices())' 2>&1 | tee "$OUT/bench.log"
# shellcheck disable=SC2086
"$PY" -m benchmarks.bench "${args[@]}" --grid-max 32 --rounds 3 --target-s 0.1 \
    --json "$OUT/bench.json" --out "$OUT/bench.md" ${BENCH_ARGS:-} 2>&1 | tee -a "$OUT/bench.log"
echo "wrote $OUT/bench.json $OUT/bench.md"
