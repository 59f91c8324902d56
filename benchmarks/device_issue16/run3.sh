# Device call: issue 16's phase-1 ratio (core 0) and scaling at 16 workers on longer runs, bare machine.
#   carry: models, .dev16, .dev16w   (README.md here)      run: bash benchmarks/device_issue16/run3.sh
# Scaling: 1 worker on 4 files x 600 records (the per-worker rate), 16 workers on 64 files x 600
# records and on 4 Common-Crawl-sized files (40,000 records each, one gzip member per record) cut
# into byte-range tasks (--split-bytes). Efficiency = rate(16) / (16 x rate(1)), from the JSONs.
END=$(( $(date +%s) + 570 ))
source benchmarks/device_issue16/setup.sh || exit 1
python3 .dev16/warcpack.py unpack .dev16w/realpages.pack /tmp/shared/data/warc/realpages-1171.warc.gz || exit 1
left() { echo $(( END - $(date +%s) )); }
echo "== ratio $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
timeout 150 taskset -c 0 python3 benchmarks/bench_phase1.py --part ratio --reps 3 --cc-records 0 > $OUT/ratio.json 2> $OUT/ratio.err; echo "rc=$?"
python3 -c "import json; r=json.load(open('$OUT/ratio.json')); print(json.dumps({k: {x: v[x] for x in ['ratio','ratio_min','ratio_max','cpu_seconds','stage_seconds']} for k, v in r['inputs'].items()}))"
run() {  # workers files records [extra args]
  local w=$1 f=$2 n=$3; shift 3
  echo "== scaling $w workers, $f files x $n records $*, $(date -u +%T), left $(left) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
  timeout $(left) python3 benchmarks/bench_scaling.py --workers $w --files $f --records $n "$@" \
    --json $OUT/scaling_${w}w_${f}x${n}.json 2>&1 | grep -v "Async instruction" | cut -c1-600 | tail -4
}
run 1 4 600
run 16 64 600
run 16 4 40000 --split-bytes 16000000
python3 - $OUT <<'PY'
import json, sys, glob
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/scaling_*.json")):
    r = json.load(open(f))["runs"][0]; rows[f.split("scaling_")[1][:-5]] = r
one = rows.get("1w_4x600")
for k, r in rows.items():
    eff = r["records_per_s"] / (r["workers"] * one["records_per_s"]) if one else None
    print(k, "records/s", r["records_per_s"], "efficiency vs 1 worker", None if eff is None else round(eff, 3),
          "stage s", round(sum(r["stage_seconds"].values()), 1), "wall", r["seconds"])
PY
echo "== done $(date -u +%T)"
