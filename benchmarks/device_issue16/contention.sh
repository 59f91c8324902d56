# Device call: how much of the 16-worker efficiency loss is the host's, not datapipe's (issue 16).
#   carry: models, .dev16, .dev16w   (README.md here)      run: bash benchmarks/device_issue16/contention.sh
# bench_phase1.py --part ratio on realpages-1171 (the bound: FastWARC + resiliparse only, and the
# main chain through run_file_task, CPU seconds each) first alone on core 0, then as 16 copies at
# once, copy i pinned to core i: the same work per process, so CPU seconds per copy at 16 over
# those alone is the per-process slowdown of a full host (clock, shared cache and memory), for
# the bound and for ours. Results: $OUT/alone.json, $OUT/full_<i>.json.
source benchmarks/device_issue16/setup.sh || exit 1
python3 .dev16/warcpack.py unpack .dev16w/realpages.pack /tmp/shared/data/warc/realpages-1171.warc.gz || exit 1
echo "== alone $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
timeout 150 taskset -c 0 python3 benchmarks/bench_phase1.py --part ratio --reps 2 --cc-records 0 > $OUT/alone.json 2> $OUT/alone.err; echo "rc=$?"
echo "== 16 copies $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 0 15); do
  timeout 300 taskset -c $i python3 benchmarks/bench_phase1.py --part ratio --reps 2 --cc-records 0 > $OUT/full_$i.json 2> $OUT/full_$i.err &
done
wait
echo "== done $(date -u +%T)"
python3 - $OUT <<'PY'
import json, sys, glob, statistics as st
d = sys.argv[1]
def cpu(f):
    r = json.load(open(f))["inputs"]["realpages.warc.gz"]["cpu_seconds"]
    return min(r["bound"]), min(r["ours"])
b1, o1 = cpu(d + "/alone.json")
full = [cpu(f) for f in sorted(glob.glob(d + "/full_*.json"))]
bf, of = [b for b, _ in full], [o for _, o in full]
print("alone: bound %.2f ours %.2f CPU s" % (b1, o1))
print("16 at once (%d copies): bound median %.2f (%.2f-%.2f), ours median %.2f (%.2f-%.2f)" % (
    len(full), st.median(bf), min(bf), max(bf), st.median(of), min(of), max(of)))
print("per-process slowdown on a full host: bound %.3f, ours %.3f; efficiency bound %.3f, ours %.3f" % (
    st.median(bf) / b1, st.median(of) / o1, b1 / st.median(bf), o1 / st.median(of)))
PY
