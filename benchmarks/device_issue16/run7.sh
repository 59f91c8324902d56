# Device call (session 7): 16-worker efficiency against one worker on one core (its threads and
# sandbox child pinned: the "1p" run) and against a free 1-worker run, in turn (1, 1p, 16; the first also takes a fresh machine's first-use costs),
# 64 files x 600 records split into 16 tasks per worker.
#   carry: models, .dev16, .dev16w   (README.md here)      run: bash benchmarks/device_issue16/run7.sh
END=$(( $(date +%s) + 200 ))
source benchmarks/device_issue16/setup.sh || exit 1
realpages || exit 1
timeout $(( $(left) - 5 )) python3 benchmarks/bench_scaling.py --workers 1,1p,16 --files 64 --records 600 --reps 1 --baseline-files 4 \
  --split-bytes 5500000 --json $OUT/scaling_pinned.json > $OUT/scaling_pinned.log 2>&1; echo "rc=$?"
grep -v "Async instruction" $OUT/scaling_pinned.log | tail -16 | cut -c1-300
echo "== done $(date -u +%T) left $(left) s"
