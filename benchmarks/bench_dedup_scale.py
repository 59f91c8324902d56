"""Dedup at scale (issue 17, ``make bench-scale``): the real phase 2 on a synthetic corpus of ~3 KB
documents with planted near-duplicate pairs and giant template clusters. Prints one JSON object.

    python benchmarks/bench_dedup_scale.py --docs 200000 --workers 2 [--docs-per-shard 10000]
    python benchmarks/bench_dedup_scale.py --docs 10000000 --workers 16 --docs-per-shard 31250 \
        --tmp /big/disk --progress-file progress.json      # the device run of docs/benchmarks/dedup-scale.md

Corpus (:mod:`scale_corpus`): per chunk of two shards, unrelated documents, 10% planted copies
(one word in 100 substituted, mirror URL) and ``--giant`` of the documents in ``--giant-clusters``
template clusters that span every shard (one canonical URL each, in shard 0). Measured: wall
time of each step (the phase's own ``seconds_per_step``), peak RSS of every worker process and
of this process (client + scheduler; sampled every 0.2 s with psutil), files written per step,
and pair recall / precision of the planted pairs and the template clusters (a planted pair is
found when both documents end in one group; a rejected document's pair with its survivor is
correct when both come from one planted pair or one template). Per step, from Dask's task
stream: the summed task compute time and the step's *parallel efficiency* (that sum / (workers x
the step's wall time): 1.0 when every worker computes for the whole step; the rest is scheduling,
the first tasks' imports and the step's tail). ``--progress-file``: every 5 s, the elapsed time,
the peak RSS so far and each finished step's marker time (what is known if a run is cut short).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dedup import _RssSampler  # noqa: E402
from scale_corpus import make_corpus, vocabulary  # noqa: E402


def _chunk(args) -> dict:
    """Write shards 2k and 2k+1 (documents of one chunk, split at random) and return the truth."""
    from dedup_fixtures import write_shards

    run, k, per, words, giant, clusters = args
    c = make_corpus(2 * per, seed=100 + k, words=words, giant_fraction=giant, giant_clusters=clusters,
                    prefix=f"c{k}-", vocab=vocabulary(seed=0), template_seed=7, canonical=(k == 0))
    side = np.random.default_rng(k).integers(0, 2, len(c.docs))
    for s in (0, 1):
        write_shards(run, {f"part-{2 * k + s:05d}": [d for d, x in zip(c.docs, side) if x == s]})
    return {"planted": c.planted, "giant": c.giant_ids}


def _quality(run: str, truth: list[dict]) -> dict:
    group: dict[str, int] = {}
    for g, (a, b) in enumerate(p for t in truth for p in t["planted"]):
        group[a] = group[b] = g
    base = len(group)
    for t in truth:   # the same template in every chunk: one cluster per template id
        for j, members in enumerate(t["giant"]):
            for m in members:
                group[m] = base + j
    dup = {}
    for f in sorted(os.listdir(os.path.join(run, "rejected"))):
        t = pq.read_table(os.path.join(run, "rejected", f), columns=["id", "duplicate_of"])
        dup.update(zip(t.column("id").to_pylist(), t.column("duplicate_of").to_pylist()))

    def rep(x):
        while x in dup:
            x = dup[x]
        return x
    planted = [p for t in truth for p in t["planted"]]
    found = sum(rep(a) == rep(b) for a, b in planted)
    correct = sum(group.get(x, -1) == group.get(y, -2) for x, y in dup.items())
    giant = [m for t in truth for ms in t["giant"] for m in ms]
    survivors = {rep(m) for m in giant}
    return {"planted_pairs": len(planted), "planted_recall": round(found / max(1, len(planted)), 5),
            "rejected": len(dup), "pair_precision": round(correct / max(1, len(dup)), 5),
            "template_members": len(giant), "template_survivors": len(survivors)}


class _Progress(threading.Thread):
    """Every ``every`` s, writes {elapsed, stage, peak RSS MiB, finished steps: seconds since start} to ``path``."""

    def __init__(self, path: str, run: str, rss, every: float = 5.0):
        super().__init__(daemon=True)
        self.path, self.done_dir, self.rss, self.every = path, os.path.join(run, "_dedup_work", "done"), rss, every
        self.t0, self.wall0, self.stage, self.stop = time.perf_counter(), time.time(), "start", threading.Event()
        self.done: dict[str, float] = {}

    def snapshot(self) -> None:
        try:   # the work folder (and its markers) goes once the phase ends: keep what was seen
            for f in os.listdir(self.done_dir):
                if f.endswith(".json"):
                    self.done.setdefault(f[:-5], round(os.path.getmtime(os.path.join(self.done_dir, f)) - self.wall0, 1))
        except FileNotFoundError:
            pass
        snap = {"elapsed_s": round(time.perf_counter() - self.t0, 1), "stage": self.stage, "steps_done_at_s": self.done,
                "peak_rss_mb": {k: round(v / 2**20, 1) for k, v in (self.rss.peak if self.rss else {}).items()}}
        with open(self.path + ".tmp", "w") as f:
            json.dump(snap, f, indent=1, sort_keys=True)
        os.replace(self.path + ".tmp", self.path)

    def run(self):
        while not self.stop.wait(self.every):
            self.snapshot()


def _step_efficiency(stream: list[dict], wall: dict[str, float], workers: int) -> dict:
    """Per step: summed task compute seconds and that sum / (workers x step wall seconds)."""
    busy = defaultdict(float)
    for rec in stream:
        key = str(rec.get("key", ""))
        if not key.startswith("dedup-"):
            continue
        step = key[len("dedup-"):].rsplit("-", 2)[0]
        busy[step] += sum(ss["stop"] - ss["start"] for ss in rec.get("startstops", ()) if ss.get("action") == "compute")
    return {s: {"task_compute_s": round(busy[s], 2), "efficiency": round(busy[s] / (workers * w), 3) if w else None}
            for s, w in sorted(wall.items())}


def bench(n: int, per: int, workers: int, words: int, giant: float, clusters: int, keep: bool,
          tmp: str | None = None, progress_file: str | None = None) -> dict:
    from distributed import Client, get_task_stream

    from datapipe.engine.runner import local_cluster
    from datapipe.stages.phases.dedup.config import DedupConfig
    from datapipe.stages.phases.dedup.phase import load_stats, run_dedup

    run = tempfile.mkdtemp(prefix="bench_dedup_scale_", dir=tmp)
    prog = _Progress(progress_file, run, None) if progress_file else None
    if prog:
        prog.stage = "write shards"
        prog.start()
    chunks = max(1, n // (2 * per))
    t = time.perf_counter()
    with ProcessPoolExecutor(workers) as ex:
        truth = list(ex.map(_chunk, [(run, k, per, words, giant, clusters) for k in range(chunks)]))
    write_s = time.perf_counter() - t
    nbytes = sum(os.path.getsize(os.path.join(run, "_filtered", f)) for f in os.listdir(os.path.join(run, "_filtered")))
    # the cluster datapipe run starts (runner.local_cluster), without a memory limit: RSS is measured
    with local_cluster(workers, 1, memory_limit=0, dashboard_address="127.0.0.1:0") as lc, Client(lc) as cl:
        pids = {f"worker-{i}": p for i, p in enumerate(sorted(cl.run(os.getpid).values()))}
        rss = _RssSampler({**pids, "client+scheduler": os.getpid()}, children=False)  # workers are the client's children
        rss.start()
        if prog:
            prog.rss, prog.stage = rss, "phase 2"
        t = time.perf_counter()

        def say(step):
            if prog:
                prog.stage = f"phase 2: {step}"
            print(f"  [{n}] {time.perf_counter() - t:8.1f}s {step}", file=sys.stderr, flush=True)
        with get_task_stream(cl) as ts:
            counts = run_dedup(cl, run, DedupConfig(), progress=say)
        wall = time.perf_counter() - t
        rss.stop.set()
        rss.join()
    if prog:
        prog.stage = "quality"
        prog.snapshot()
    stats = load_stats(run)
    t = time.perf_counter()
    quality = _quality(run, truth)
    quality_s = time.perf_counter() - t
    out = {"docs": chunks * 2 * per, "shards": 2 * chunks, "workers": workers, "source_parquet_mb": round(nbytes / 2**20, 1),
           "write_shards_with_signatures_s": round(write_s, 1), "phase2_wall_s": round(wall, 1),
           "phase2_docs_per_s": round(chunks * 2 * per / wall, 1), "quality_eval_s": round(quality_s, 1),
           "seconds_per_step": stats["seconds_per_step"], "files_per_step": stats["files_per_step"],
           "step_efficiency": _step_efficiency(ts.data, stats["seconds_per_step"], workers),
           "peak_rss_mb": {k: round(v / 2**20, 1) for k, v in rss.peak.items()},
           "near_cluster_largest": max(map(int, stats.get("near_cluster_sizes") or {"0": 0})),
           "cc_iterations": stats.get("cc_iterations"), "candidate_pairs": stats.get("candidate_pairs"),
           "verified_pairs": stats.get("verified_pairs"),
           "counts": {k: v.to_dict() for k, v in counts.items()}, "quality": quality}
    if prog:
        prog.stop.set()
        prog.stage = "done"
        prog.snapshot()
    if not keep:
        shutil.rmtree(run, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", default="200000", help="comma-separated corpus sizes")
    ap.add_argument("--docs-per-shard", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--words", type=int, default=450, help="words per document (450 -> ~3 KB)")
    ap.add_argument("--giant", type=float, default=0.3, help="fraction of documents in template clusters")
    ap.add_argument("--giant-clusters", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--tmp", help="folder for the run directory (default: the system's temporary folder)")
    ap.add_argument("--progress-file", help="write progress (elapsed, finished steps, peak RSS) here every 5 s")
    a = ap.parse_args()
    res = []
    for n in (int(x) for x in a.docs.split(",")):
        res.append(bench(n, a.docs_per_shard, a.workers, a.words, a.giant, a.giant_clusters, a.keep,
                         a.tmp, a.progress_file))
        print(json.dumps(res[-1]), file=sys.stderr, flush=True)
    text = json.dumps(res, indent=2)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
