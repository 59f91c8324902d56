"""Fixed cost of a run (issue 16): the main manifest on a one-record WARC, cluster start vs the rest.

    .venv/bin/python benchmarks/bench_fixed_cost.py [--reps 3] [--workers N] [--record 1]

Each repetition is a fresh process (as a user's ``datapipe run`` is), taken in turn:

* ``timeline``: a child that does what ``datapipe run`` does (``load_manifest`` of
  ``manifests/cc-2026.yaml`` with ``--input``/``--output`` overrides, ``check_before_work``,
  ``runner.run``), but starts the cluster itself (``runner.dask_client`` + ``wait_for_workers``)
  and hands the client to ``runner.run``, so cluster start is timed apart; phase starts come
  from ``on_plan``/``on_phase``. Printed per step: imports, checks, cluster start, phase 1,
  each later phase, verify + ledger, cluster shutdown.
* ``cli``: ``datapipe run manifests/cc-2026.yaml --input ONE --output DIR --no-progress``, wall
  clock of the whole command (cluster start included), the end-to-end figure a user sees.

The fixed cost is the timeline's wall clock from process start to exit minus its cluster
start; the goal is <= 8 s. Beside it, the CPU seconds of the whole process tree (the child, its
workers and their sandbox children, from ``RUSAGE_CHILDREN``): on a shared machine wall time
grows with the load average (printed), CPU time much less. The input is record ``--record`` (default 1: an English news page that
every stage keeps, so every phase has work) of ``realpages-1171.warc.gz``, cut out at its gzip
member. Prints one JSON object: per repetition and step the seconds, their median and min-max.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MANIFEST = ROOT / "manifests" / "cc-2026.yaml"
GOAL_S = 8.0

CHILD = r"""
import json, sys, time
T0 = time.time()
marks = []
def mark(name):
    marks.append((name, time.time()))
from datapipe.engine import runner
from datapipe.manifest.load import load_manifest
mark("imports")
inp, out, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
ov = {"inputs.paths": [inp], "inputs.crawl": None, "output": out, "cluster.dashboard_address": "127.0.0.1:0"}
if sys.argv[5:] == ["before"]:
    ov["report.histograms"] = True
if workers:
    ov["cluster.workers"] = workers
m = load_manifest(sys.argv[4], ov)
inputs = runner.check_before_work(m)
mark("checks")
with runner.dask_client(m) as client:
    client.wait_for_workers(m.cluster.workers or __import__("os").cpu_count() or 1)
    mark("cluster start")
    seen = []
    def on_phase(phase, step):
        if not seen or seen[-1] != phase:
            mark("phase 1" if not seen else seen[-1])
            seen.append(phase)
    res = runner.run(m, inputs, client=client, on_phase=on_phase)
    mark(seen[-1] + " + verify" if seen else "phase 1 + verify")
mark("cluster shutdown")
stage_s = {k: round(c.seconds, 3) for k, c in res.ledger.stages.items()}
print(json.dumps({"t0": T0, "marks": marks, "kept": res.ledger.totals()["kept"], "report": res.report,
                  "stage_s": stage_s}))
"""


def one_record(record: int, dest: Path) -> Path:
    """The ``record``-th gzip member of realpages-1171 as its own WARC file."""
    from make_input import record_spans, source_path

    src = source_path()
    a, b = record_spans(src)[record]
    with open(src, "rb") as fh:
        fh.seek(a)
        dest.write_bytes(fh.read(b - a))
    return dest


def _tree_cpu() -> float:
    """User + system CPU seconds of every reaped descendant (the child, its Dask nannies' workers,
    their sandbox children): the run's CPU, which load on a shared machine does not inflate as it
    does wall time."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def cold_cache(dest: Path) -> Path:
    """A copy of the derived-file cache without the remembered checks and the UT1 urls list: a run
    with it as ``DATAPIPE_CACHE`` loads every model on the client and reads the UT1 tarball twice,
    as runs did before issue 16's changes (the UT1 hash array stays: it predates them)."""
    from datapipe.env import cache_dir

    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    src = cache_dir()
    for f in (src.iterdir() if src.is_dir() else []):
        if f.is_file() and f.name != "checked-stages.json" and not f.name.startswith("ut1_urls_"):
            os.link(f, dest / f.name) if f.stat().st_dev == dest.stat().st_dev else shutil.copy(f, dest / f.name)
    return dest


def timeline(inp: Path, out: Path, workers: int, before: bool = False) -> dict:
    """One fresh process; ``before``: histograms drawn in the run and a cold check cache (what the
    two largest changes of issue 16 removed), to compare under the same load."""
    env = dict(os.environ)
    if before:
        env["DATAPIPE_CACHE"] = str(cold_cache(out.parent / f"cache-{out.name}"))
    t, c = time.time(), _tree_cpu()
    p = subprocess.run([sys.executable, "-c", CHILD, str(inp), str(out), str(workers), str(MANIFEST)]
                       + (["before"] if before else []), cwd=ROOT, capture_output=True, text=True, check=False,
                       env=env)
    end, cpu = time.time(), _tree_cpu() - c
    if p.returncode:
        raise RuntimeError(f"timeline child failed: {p.stderr.strip()[-2000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    steps, prev = {"interpreter start": r["t0"] - t}, r["t0"]
    for name, ts in r["marks"]:
        steps[name] = ts - prev
        prev = ts
    steps["exit"] = end - prev
    total = end - t
    return {"steps": steps, "total": total, "fixed": total - steps["cluster start"], "kept": r["kept"],
            "report": r["report"], "cpu": cpu, "stage_s": r["stage_s"]}


def cli(inp: Path, out: Path, workers: int) -> float:
    cmd = [str(Path(sys.executable).parent / "datapipe"), "run", str(MANIFEST), "--input", str(inp),
           "--output", str(out), "--no-progress", "--dashboard", "127.0.0.1:0"]
    if workers:
        cmd += ["--workers", str(workers)]
    t = time.time()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if p.returncode:
        raise RuntimeError(f"datapipe run failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return time.time() - t


def spread(xs: list[float]) -> dict:
    return {"median": round(statistics.median(xs), 3), "min": round(min(xs), 3), "max": round(max(xs), 3),
            "runs": [round(x, 3) for x in xs]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workers", type=int, default=0, help="local workers (default: the manifest's, one per core)")
    ap.add_argument("--record", type=int, default=1, help="which record of realpages-1171 is the one page")
    ap.add_argument("--no-cli", action="store_true", help="only the timeline child, not datapipe run")
    ap.add_argument("--compare-before", action="store_true",
                    help="also, in turn, a timeline with the run drawing every histogram and a cold check cache")
    a = ap.parse_args()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="fixed-cost-") as tmp:
        inp = one_record(a.record, Path(tmp) / "one.warc.gz")
        size = inp.stat().st_size
        runs, clis, befores = [], [], []
        for k in range(a.reps):  # taken in turn: both see the same load
            runs.append(timeline(inp, Path(tmp) / f"t{k}", a.workers))
            if a.compare_before:
                befores.append(timeline(inp, Path(tmp) / f"b{k}", a.workers, before=True))
                print(f"[fixed cost] rep {k + 1}, as before: fixed {befores[-1]['fixed']:.1f} s, CPU "
                      f"{befores[-1]['cpu']:.1f} s", file=sys.stderr, flush=True)
            if not a.no_cli:
                clis.append(cli(inp, Path(tmp) / f"c{k}", a.workers))
            print(f"[fixed cost] rep {k + 1}: fixed {runs[-1]['fixed']:.1f} s, cluster start "
                  f"{runs[-1]['steps']['cluster start']:.1f} s, CPU {runs[-1]['cpu']:.1f} s, load "
                  f"{os.getloadavg()[0]:.1f}" + (f", datapipe run {clis[-1]:.1f} s" if clis else ""),
                  file=sys.stderr, flush=True)
    names = list(runs[0]["steps"])
    res = {"input": f"record {a.record} of realpages-1171.warc.gz ({size} B)",
           "workers": a.workers or os.cpu_count(), "kept": runs[-1]["kept"], "goal_s": GOAL_S,
           "fixed_s": spread([r["fixed"] for r in runs]),
           "cluster_start_s": spread([r["steps"]["cluster start"] for r in runs]),
           "total_s": spread([r["total"] for r in runs]),
           "cpu_s_process_tree": spread([r["cpu"] for r in runs]),
           "steps_s": {n: spread([r["steps"].get(n, 0.0) for r in runs]) for n in names},
           "ledger_stage_s": {n: spread([r["stage_s"].get(n, 0.0) for r in runs]) for n in runs[-1]["stage_s"]},
           "loadavg": [load0, os.getloadavg()]}
    if clis:
        res["datapipe_run_s"] = spread(clis)
    if befores:
        res["before"] = {"fixed_s": spread([r["fixed"] for r in befores]),
                         "cpu_s_process_tree": spread([r["cpu"] for r in befores]),
                         "steps_s": {n: spread([r["steps"].get(n, 0.0) for r in befores]) for n in befores[0]["steps"]},
                         "fixed_ratio_runs": [round(b["fixed"] / r["fixed"], 3) for b, r in zip(befores, runs)],
                         "cpu_ratio_runs": [round(b["cpu"] / r["cpu"], 3) for b, r in zip(befores, runs)]}
    res["meets_goal"] = res["fixed_s"]["median"] <= GOAL_S
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
