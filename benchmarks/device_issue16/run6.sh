# Device call (session 7): where the 16-worker per-record slowdown goes. bench_scaling with the CPU
# seconds of workers, sandbox children and the client process (1 and 16 workers alternated, split
# into 16 tasks per worker), the host's topology (lscpu) and its clock rate sampled during the run.
#   carry: models, .dev16, .dev16w   (README.md here)      run: bash benchmarks/device_issue16/run6.sh
END=$(( $(date +%s) + 400 ))
source benchmarks/device_issue16/setup.sh || exit 1
realpages || exit 1
lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|L2|L3|MHz|Hypervisor" | tr -s ' '
( while true; do echo "$(date +%T) $(awk '/MHz/{s+=$4;n++} END{printf "%.0f", s/n}' /proc/cpuinfo) MHz load $(cut -d' ' -f1 /proc/loadavg)"; sleep 3; done ) > $OUT/mhz.log 2>&1 &
MON=$!
timeout $(( $(left) - 10 )) python3 benchmarks/bench_scaling.py --workers 1,16 --files 64 --records 600 --reps 2 --baseline-files 4 \
  --split-bytes 5500000 --json $OUT/scaling_cpu.json > $OUT/scaling_cpu.log 2>&1; echo "rc=$?"
kill $MON
grep -v "Async instruction" $OUT/scaling_cpu.log | tail -14 | cut -c1-300
awk '{print $2}' $OUT/mhz.log | sort -n | uniq -c | sort -k2 -n | tail -8
echo "== done $(date -u +%T) left $(left) s"
