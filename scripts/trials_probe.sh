source scripts/tpu_env.sh
export PYTHONUNBUFFERED=1 AUTOTUNE_STUDY_SIZE=full AUTOTUNE_CACHE=$OUT/cache.db
for s in ${STUDIES:-accel_rnn accel_tiny_scan}; do
  start=$(date +%s.%N)
  python3 -m autotune tune studies/$s.py --trials 6 --trial-timeout 60 --storage $OUT/st-$s.db --json > $OUT/$s.json 2> $OUT/$s.err
  echo "$s exit $? wall $(python3 -c "import time;print(round(time.time()-$start,1))")"
  python3 - $OUT/$s.json $OUT/st-$s.db <<'PY'
import json, sqlite3, sys
r = json.load(open(sys.argv[1]))[0]
db = sqlite3.connect(sys.argv[2])
dur = dict(db.execute("select number, round((julianday(datetime_complete)-julianday(datetime_start))*86400,2) from trials").fetchall())
for t in r["trials"]:
    m = t.get("measurement") or {}
    c = list(t["config"].values())
    print(t["number"], c, t["state"], "cost", t["cost"], "dur", dur.get(t["number"]), "cmp", m.get("compile_s"), "cpu", m.get("compile_cpu_s"), "run", m.get("run_s"), "reason", (t.get("reason") or "")[:160])
print("wall", json.dumps(r.get("wall"))[:1500])
print("best", r["best_config"], r["best_cost"], "default", r["default_cost"])
PY
done
