"""Retuning a late phase-1 threshold versus the full run, on the main manifest's real chain.

Loads ``manifests/cc-2026.yaml`` (every stage, dedup, mix + tokenize; the HTML report off in both
arms, it is drawn the same either way), input ``realpages-1171.warc.gz``. Per repetition: a full
run into an empty directory, then a rerun into it with ``quality_classifier.threshold`` changed
(0.5 -> 0.6, a late stage), which reruns from the stored rows (the first stage that edits text,
``c4``, onwards) and redoes dedup and tokenize. One LocalCluster of 2 workers serves both arms; the
arms alternate. Prints one JSON object: seconds and CPU seconds (this process + the workers) per
arm, per-repetition ratios retune/full of both, their median and spread, the machine's load, and a
check that the retuned output equals a fresh run of the changed manifest.

    .venv/bin/python benchmarks/bench_retune.py [--reps 3] [--input PATH]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _manifest(inputs: list[str], out: Path, threshold: float):
    from datapipe.manifest.load import load_manifest

    m = load_manifest(ROOT / "manifests" / "cc-2026.yaml", {
        "inputs.paths": inputs, "inputs.crawl": None, "output": str(out), "report.enabled": False,
        "cluster.dashboard_address": "127.0.0.1:0"})
    stages = [dict(s) for s in m.stages]
    for s in stages:
        if "quality_classifier" in s:
            s["quality_classifier"] = dict(s["quality_classifier"] or {}, threshold=threshold)
    return load_manifest(ROOT / "manifests" / "cc-2026.yaml", {
        "inputs.paths": inputs, "inputs.crawl": None, "output": str(out), "report.enabled": False,
        "cluster.dashboard_address": "127.0.0.1:0", "stages": stages})


def _digest(out: Path) -> str:
    h = hashlib.sha256()
    for kind in ("documents", "rejected", "tokens"):
        for f in sorted((out / kind).glob("*")):
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def _cpu(client) -> float:
    """CPU seconds used so far by this process and every worker process (robust to a loaded machine)."""
    return time.process_time() + sum(client.run(time.process_time).values())


def main() -> None:
    from datapipe.env import shared_data

    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_REPS", "3")))
    ap.add_argument("--input", default=str(shared_data() / "warc" / "realpages-1171.warc.gz"))
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    from datapipe.engine import runner

    work = Path(tempfile.mkdtemp(prefix="bench-retune-"))
    full_s, retune_s, ratios = [], [], []
    full_cpu, retune_cpu, cpu_ratios = [], [], []
    same = None
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address="127.0.0.1:0") as cluster, \
                Client(cluster) as client:
            runner.run(_manifest([args.input], work / "warmup", 0.5), client=client)  # models loaded once per worker
            for rep in range(args.reps):
                out = work / f"run{rep}"
                t, c = time.perf_counter(), _cpu(client)
                runner.run(_manifest([args.input], out, 0.5), client=client)
                full_s.append(time.perf_counter() - t)
                full_cpu.append(_cpu(client) - c)
                t, c = time.perf_counter(), _cpu(client)
                res = runner.run(_manifest([args.input], out, 0.6), client=client)
                retune_s.append(time.perf_counter() - t)
                retune_cpu.append(_cpu(client) - c)
                cpu_ratios.append(retune_cpu[-1] / full_cpu[-1])
                assert all(r.get("retuned_from") is not None for r in res.tasks), "the retune read the file again"
                ratios.append(retune_s[-1] / full_s[-1])
            fresh = work / "fresh"
            runner.run(_manifest([args.input], fresh, 0.6), client=client)
            same = _digest(fresh) == _digest(work / f"run{args.reps - 1}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({
        "input": Path(args.input).name, "reps": args.reps, "change": "quality_classifier.threshold 0.5 -> 0.6",
        "full_s": [round(x, 2) for x in full_s], "retune_s": [round(x, 2) for x in retune_s],
        "ratio_retune_over_full": {"per_rep": [round(r, 3) for r in ratios], "median": round(statistics.median(ratios), 3),
                                   "min": round(min(ratios), 3), "max": round(max(ratios), 3)},
        "full_cpu_s": [round(x, 2) for x in full_cpu], "retune_cpu_s": [round(x, 2) for x in retune_cpu],
        "cpu_ratio_retune_over_full": {"per_rep": [round(r, 3) for r in cpu_ratios],
                                       "median": round(statistics.median(cpu_ratios), 3),
                                       "min": round(min(cpu_ratios), 3), "max": round(max(cpu_ratios), 3)},
        "load_average_1min": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
        "target": "<= 0.25", "retuned_equals_fresh": same}))


if __name__ == "__main__":
    main()
