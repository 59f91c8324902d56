#!/usr/bin/env bash
# One device call of the performance benchmarks: bash benchmarks/device/run.sh PART
#   fixed-cost      a 20-record first run, then bench_fixed_cost.py at 16 and 2 workers   carry: models .bench-device .bench-device-report
#   ratio           bench_phase1.py --part ratio on core 0 (the bound, the models' floor)   carry: models .bench-device .bench-device-warc
#   scaling         bench_scaling.py 1 and 16 workers alternated, 64 files x 600 records    carry: as ratio
#   scaling-split   the same, files cut into 16 tasks per worker (--split-bytes 5500000)    carry: as ratio
#   scaling-cc      16 workers on 4 Common-Crawl-sized files (40,000 records) cut into byte ranges
#   scaling-cpu     scaling-split with the host's topology and its clock rate sampled
#   scaling-pinned  1 worker free, 1 worker on one core (1p), 16 workers, in turn
#   contention      the ratio bench alone on core 0, then 16 pinned copies at once
# Results land in $OUT (JSON of each bench, its stderr in *.log); each part keeps within the
# device's 600 s per command (END). Copy the JSON to benchmarks/results/<benchmark>/.
set -u
PART=${1:?usage: run.sh fixed-cost|ratio|scaling|scaling-split|scaling-cc|scaling-cpu|scaling-pinned|contention}
END=$(( $(date +%s) + ${DEADLINE_S:-570} ))
source benchmarks/device/setup.sh || exit 1
quiet() { grep -v "Async instruction" "$@" | cut -c1-300; }
scaling() {  # tag, then bench_scaling.py arguments
  local tag=$1; shift
  echo "== scaling $tag: $* ($(date -u +%T), left $(left) s, load $(cut -d' ' -f1-3 /proc/loadavg))"
  timeout $(( $(left) - 10 )) python3 benchmarks/bench_scaling.py "$@" --json $OUT/scaling_$tag.json > $OUT/scaling_$tag.log 2>&1
  echo "rc=$?"; quiet $OUT/scaling_$tag.log | tail -14
}
ratio() {  # output name, repetitions
  timeout $(( $(left) - 20 )) taskset -c 0 python3 benchmarks/bench_phase1.py --part ratio --reps $2 --cc-records 0 \
    > $OUT/$1.json 2> $OUT/$1.log; echo "rc=$?"
}
case $PART in
  fixed-cost)
    cp .bench-device/rp20.warc.gz /tmp/shared/data/warc/realpages-1171.warc.gz || exit 1   # the first 20 records
    # A user's first run: it fills the check cache and numba's kernel cache, which later runs reuse.
    timeout 150 datapipe run manifests/cc-2026.yaml --input /tmp/shared/data/warc/realpages-1171.warc.gz \
      --output /tmp/runs/smoke --no-progress --dashboard 127.0.0.1:0 > $OUT/smoke.log 2>&1 || { tail -5 $OUT/smoke.log; exit 1; }
    for wr in 16:5 2:3; do w=${wr%:*}; reps=${wr#*:}
      echo "== fixed cost, $w workers, $reps repetitions, $(date -u +%T)"
      timeout $(( w == 16 ? 300 : 150 )) python3 benchmarks/bench_fixed_cost.py --reps $reps --workers $w \
        > $OUT/fixed_cost_${w}w.json 2> $OUT/fixed_cost_${w}w.log; echo "rc=$?"
      quiet $OUT/fixed_cost_${w}w.log | grep "fixed cost"
    done ;;
  ratio)
    realpages || exit 1; ratio ratio 3
    python3 -c "
import json; r=json.load(open('$OUT/ratio.json'))
for k, v in r['inputs'].items():
    print(k, {x: v.get(x) for x in ['ratio','ratio_min','ratio_max','floor_ratio','floor_ratio_with_our_extraction','ours_share_of_floor']})
    print('stage s', v['stage_seconds'])" ;;
  scaling)
    realpages || exit 1; scaling reps --workers 1,16 --files 64 --records 600 --reps 3 --baseline-files 4 ;;
  scaling-split)
    realpages || exit 1; scaling split --workers 1,16 --files 64 --records 600 --reps 3 --baseline-files 4 --split-bytes 5500000 ;;
  scaling-cc)
    realpages || exit 1; scaling cc --workers 1,16 --files 4 --records 40000 --reps 1 --baseline-files 4 --split-bytes 16000000 ;;
  scaling-cpu)
    realpages || exit 1
    lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|L2|L3|MHz|Hypervisor" | tr -s ' '
    ( while true; do echo "$(date +%T) $(awk '/MHz/{s+=$4;n++} END{printf "%.0f", s/n}' /proc/cpuinfo) MHz load $(cut -d' ' -f1 /proc/loadavg)"; sleep 3; done ) > $OUT/mhz.log 2>&1 &
    MON=$!
    scaling cpu --workers 1,16 --files 64 --records 600 --reps 2 --baseline-files 4 --split-bytes 5500000
    kill $MON; awk '{print $2}' $OUT/mhz.log | sort -n | uniq -c | sort -k2 -n | tail -8 ;;
  scaling-pinned)
    realpages || exit 1; scaling pinned --workers 1,1p,16 --files 64 --records 600 --reps 1 --baseline-files 4 --split-bytes 5500000 ;;
  contention)
    realpages || exit 1
    echo "== alone $(date -u +%T)"; ratio alone 2
    echo "== 16 copies $(date -u +%T)"
    for i in $(seq 0 15); do
      timeout 300 taskset -c $i python3 benchmarks/bench_phase1.py --part ratio --reps 2 --cc-records 0 > $OUT/full_$i.json 2> $OUT/full_$i.log &
    done; wait
    python3 benchmarks/device/contention_summary.py $OUT ;;
  *) echo "unknown part $PART"; exit 2 ;;
esac
echo "== done $(date -u +%T), left $(left) s"
