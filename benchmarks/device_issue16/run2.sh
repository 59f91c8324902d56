# Device call 2: bench_phase1 --part ratio on core 0 (realpages-1171), then bench_scaling at 1, 16, 4 workers.
source .dev16/setup.sh || exit 1
python3 .dev16/warcpack.py unpack .dev16w/realpages.pack /tmp/shared/data/warc/realpages-1171.warc.gz || exit 1
set -o pipefail; command -v taskset || exit 1
F=${F:-600}
echo "== ratio $(date -u +%T)"
timeout 200 taskset -c 0 python3 benchmarks/bench_phase1.py --part ratio --reps 3 --cc-records 0 > $OUT/ratio.json 2> $OUT/ratio.err
echo "rc=$?"; python3 -c "import json; r=json.load(open('$OUT/ratio.json')); print(json.dumps({k: {x: v[x] for x in ['ratio','ratio_min','ratio_max','cpu_seconds']} for k, v in r['inputs'].items()}))"
for wf in 1:8 16:64 4:16; do w=${wf%:*}; f=${wf#*:}
  echo "== scaling $w workers, $f files x $F records, $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
  timeout 170 python3 benchmarks/bench_scaling.py --workers $w --files $f --records $F --json $OUT/scaling_${w}w.json 2>&1 | grep -v "Async instruction" | cut -c1-400 | tail -8
done
echo "== done $(date -u +%T)"
