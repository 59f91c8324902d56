# Device call: issue 16's fixed cost at 16 and 2 workers (bench_fixed_cost.py), from a bare machine.
#   carry: models, .dev16, .dev16r   (see README.md here: site-packages, UT1 members, data, rp20)
#   run:   bash benchmarks/device_issue16/fixed_cost.sh
# A 20-record run of the main manifest first, as a user's first run: it fills the check cache
# (checked-stages.json) and numba's kernel cache, which every later run of the same files reuses.
# Results: $OUT/fixed_cost_16w.json, $OUT/fixed_cost_2w.json (bench JSON), *.log (its stderr).
# Wall-clock bounds keep the call under the device's 600 s per command.
source benchmarks/device_issue16/setup.sh || exit 1
cp .dev16/rp20.warc.gz /tmp/shared/data/warc/realpages-1171.warc.gz || exit 1  # the first 20 records
echo "== smoke run $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
timeout 150 datapipe run manifests/cc-2026.yaml --input /tmp/shared/data/warc/realpages-1171.warc.gz \
  --output /tmp/runs/smoke --no-progress --dashboard 127.0.0.1:0 > $OUT/smoke.log 2>&1; rc=$?
echo "smoke run rc=$rc"; tail -5 $OUT/smoke.log | cut -c1-250
[ $rc = 0 ] || exit 1
summary() {  # the step medians and the headline numbers of one bench JSON
  python3 - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print({k: r[k] for k in ("workers", "fixed_s", "cluster_start_s", "cpu_s_process_tree", "datapipe_run_s", "meets_goal", "loadavg") if k in r})
print("steps (median, min, max):", {n: (v["median"], v["min"], v["max"]) for n, v in r["steps_s"].items()})
EOF
}
for wr in 16:5 2:3; do w=${wr%:*}; reps=${wr#*:}
  echo "== fixed cost, $w workers, $reps repetitions, $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
  timeout $(( w == 16 ? 300 : 150 )) python3 benchmarks/bench_fixed_cost.py --reps $reps --workers $w \
    > $OUT/fixed_cost_${w}w.json 2> $OUT/fixed_cost_${w}w.log; rc=$?
  grep -v "Async instruction" $OUT/fixed_cost_${w}w.log | grep "fixed cost" | cut -c1-250
  echo "rc=$rc"; [ $rc = 0 ] && summary $OUT/fixed_cost_${w}w.json
done
echo "== done $(date -u +%T)"
