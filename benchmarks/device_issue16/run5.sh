# Device call (session 7): scaling with the 1- and 16-worker runs alternated (bench_scaling --reps),
# 64 files x 600 records cut into byte-range tasks of ~5.5 MB (4 per file: 16 tasks per worker, as
# 64 Common-Crawl-sized files under the default split_bytes give), bare or warm machine.
#   carry: models, .dev16, .dev16w   (README.md here)      run: bash benchmarks/device_issue16/run5.sh
END=$(( $(date +%s) + 560 ))
source benchmarks/device_issue16/setup.sh || exit 1
realpages || exit 1
echo "== scaling 1,16 x3 split $(date -u +%T) left $(left) s load $(cut -d' ' -f1-3 /proc/loadavg)"
timeout $(( $(left) - 10 )) python3 benchmarks/bench_scaling.py --workers 1,16 --files 64 --records 600 --reps 3 --baseline-files 4 \
  --split-bytes 5500000 --json $OUT/scaling_split.json > $OUT/scaling_split.log 2>&1; echo "rc=$?"
grep -v "Async instruction" $OUT/scaling_split.log | tail -10 | cut -c1-300
python3 -c "
import json; d=json.load(open('$OUT/scaling_split.json'))
for r in d['runs']:
    ss=sum(r['stage_seconds'].values()); print(r['rep'], r['workers'], r['seconds'], 'stage s/1k', round(1000*ss/r['records'],2), 'busy', round(ss/(r['workers']*r['seconds']),3))
"
echo "== done $(date -u +%T) left $(left) s"
