# Device call 2 (short, warm machine): ratio on core 0, then a short scaling pair; hard deadline 165 s.
END=$(( $(date +%s) + 165 ))
if [ -d /tmp/site/dask ] && command -v datapipe >/dev/null; then echo "== reuse warm setup"; export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 DATAPIPE_SHARED_DATA=/tmp/shared/data DATAPIPE_MODELS=$PWD/models; else source .dev16/setup.sh || exit 1; fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null 2>&1
python3 .dev16/warcpack.py unpack .dev16w/realpages.pack /tmp/shared/data/warc/realpages-1171.warc.gz || exit 1
left() { echo $(( END - $(date +%s) )); }
echo "== ratio $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
timeout $(( $(left) - 45 )) taskset -c 0 python3 benchmarks/bench_phase1.py --part ratio --reps 3 --cc-records 0 > $OUT/ratio.json 2> $OUT/ratio.err; echo "rc=$?"
python3 -c "import json; r=json.load(open('$OUT/ratio.json')); print(json.dumps({k: {x: v[x] for x in ['ratio','ratio_min','ratio_max','cpu_seconds','stage_seconds']} for k, v in r['inputs'].items()}))"
for wf in 1:2 16:32; do w=${wf%:*}; f=${wf#*:}; [ $(left) -gt 8 ] || break
  echo "== scaling $w workers, $f files x 300, $(date -u +%T), left $(left) s"
  timeout $(left) python3 benchmarks/bench_scaling.py --workers $w --files $f --records 300 --json $OUT/scaling_${w}w.json 2>&1 | grep -v "Async instruction" | cut -c1-600 | tail -4
done
echo "== done $(date -u +%T)"
