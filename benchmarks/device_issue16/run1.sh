# Device call 1: environment, a 20-record run of the main manifest, then bench_fixed_cost.
source .dev16/setup.sh || exit 1
cp .dev16/rp20.warc.gz /tmp/shared/data/warc/realpages-1171.warc.gz   # first 20 records, byte-identical prefix
set -o pipefail
t0=$(python3 -c "import time; print(time.time())"); timeout 180 datapipe run manifests/cc-2026.yaml --input /tmp/shared/data/warc/realpages-1171.warc.gz \
  --output /tmp/runs/smoke --no-progress --dashboard 127.0.0.1:0 > $OUT/smoke.log 2>&1; rc=$?
echo "smoke run rc=$rc in $(python3 -c "import time; print(round(time.time()-$t0,1))") s"; tail -30 $OUT/smoke.log | cut -c1-250
[ $rc = 0 ] || exit 1
echo "== fixed cost, default workers ($(nproc)), $(date -u +%T)"
timeout 300 python3 benchmarks/bench_fixed_cost.py --reps 5 > $OUT/fixed_cost_16w.json 2> $OUT/fixed_cost_16w.log; grep -v "Async instruction" $OUT/fixed_cost_16w.log | cut -c1-250
echo "rc=$?"; python3 -c "import json; r=json.load(open('$OUT/fixed_cost_16w.json')); print({k: r[k] for k in ['fixed_s','cluster_start_s','cpu_s_process_tree','datapipe_run_s','meets_goal']})"
echo "== fixed cost, 2 workers, $(date -u +%T)"
timeout 150 python3 benchmarks/bench_fixed_cost.py --reps 3 --workers 2 > $OUT/fixed_cost_2w.json 2> $OUT/fixed_cost_2w.log; grep -v "Async instruction" $OUT/fixed_cost_2w.log | cut -c1-250
echo "rc=$?"; python3 -c "import json; r=json.load(open('$OUT/fixed_cost_2w.json')); print({k: r[k] for k in ['fixed_s','cluster_start_s','cpu_s_process_tree','datapipe_run_s','meets_goal']})"
echo "== done $(date -u +%T)"
