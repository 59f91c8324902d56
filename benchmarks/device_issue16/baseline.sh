# Device call: 16-worker efficiency against 1-worker rates measured in the same call, alternated
# (1, 16, 1, 16, 1), after one discarded 1-worker run: the first run on a fresh machine pays
# first-use costs (page cache, bytecode, numba's cache) inside its timed part.
#   carry: models, .dev16, .dev16w   (README.md here)      run: bash benchmarks/device_issue16/baseline.sh
END=$(( $(date +%s) + 330 ))
source benchmarks/device_issue16/setup.sh || exit 1
python3 .dev16/warcpack.py unpack .dev16w/realpages.pack /tmp/shared/data/warc/realpages-1171.warc.gz || exit 1
left() { echo $(( END - $(date +%s) )); }
run() {  # tag workers files records
  echo "== $1 $(date -u +%T) left $(left) s load $(cut -d' ' -f1-3 /proc/loadavg)"
  timeout $(left) python3 benchmarks/bench_scaling.py --workers $2 --files $3 --records $4 --json $OUT/$1.json 2>&1 \
    | grep -v "Async instruction" | tail -2 | head -1
}
run discard 1 2 300
run a1 1 4 600; run a16 16 64 600; run b1 1 4 600; run b16 16 64 600; run c1 1 4 600
python3 - $OUT <<'PY'
import json, sys, glob
r = {f.split("/")[-1][:-5]: json.load(open(f))["runs"][0]["records_per_s"] for f in glob.glob(sys.argv[1] + "/[abc]*.json")}
print(r)
for k in ("a16", "b16"):
    if k in r:
        ones = [v for n, v in r.items() if n.endswith("1")]
        print(k, "efficiency vs each 1-worker run:", [round(r[k] / (16 * v), 3) for v in ones])
PY
