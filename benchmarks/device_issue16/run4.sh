# Device call (session 7): issue 16's phase-1 ratio with its floor (core 0), then scaling with the
# 1- and 16-worker runs alternated in one call (bench_scaling --reps), bare machine.
#   carry: models, .dev16, .dev16w   (README.md here)      run: bash benchmarks/device_issue16/run4.sh
END=$(( $(date +%s) + 575 ))
source benchmarks/device_issue16/setup.sh || exit 1
realpages || exit 1
echo "== ratio $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
timeout 200 taskset -c 0 python3 benchmarks/bench_phase1.py --part ratio --reps 3 --cc-records 0 > $OUT/ratio.json 2> $OUT/ratio.err; echo "rc=$?"
python3 -c "
import json; r=json.load(open('$OUT/ratio.json'))
for k, v in r['inputs'].items():
    print(k, {x: v[x] for x in ['ratio','ratio_min','ratio_max','cpu_seconds','floor_ratio','floor_ratio_with_our_extraction','ours_share_of_floor','model_inputs']})
    print('stage s', v['stage_seconds'])"
echo "== scaling 1,16 x3 $(date -u +%T) left $(left) s load $(cut -d' ' -f1-3 /proc/loadavg)"
timeout $(( $(left) - 20 )) python3 benchmarks/bench_scaling.py --workers 1,16 --files 64 --records 600 --reps 3 --baseline-files 4 \
  --json $OUT/scaling_reps.json > $OUT/scaling_reps.log 2>&1; echo "rc=$?"
grep -v "Async instruction" $OUT/scaling_reps.log | tail -12 | cut -c1-400
echo "== done $(date -u +%T) left $(left) s"
