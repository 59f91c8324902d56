"""Dedup at scale (issue 17, ``make bench-scale``): the real phase 2 on a synthetic corpus of ~3 KB
documents with planted near-duplicate pairs and giant template clusters. Prints one JSON object.

    python benchmarks/bench_dedup_scale.py --docs 200000 --workers 2 [--docs-per-shard 10000]

Corpus (:mod:`scale_corpus`): per chunk of two shards, unrelated documents, 10% planted copies
(one word in 100 substituted, mirror URL) and ``--giant`` of the documents in ``--giant-clusters``
template clusters that span every shard (one canonical URL each, in shard 0). Measured: wall
time of each step (the phase's own ``seconds_per_step``), peak RSS of every worker process and
of this process (client + scheduler; sampled every 0.2 s with psutil), files written per step,
and pair recall / precision of the planted pairs and the template clusters (a planted pair is
found when both documents end in one group; a rejected document's pair with its survivor is
correct when both come from one planted pair or one template).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
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


def bench(n: int, per: int, workers: int, words: int, giant: float, clusters: int, keep: bool) -> dict:
    from distributed import Client, LocalCluster

    from datapipe.stages.phases.dedup import DedupConfig, run_dedup
    from datapipe.stages.phases.dedup.phase import load_stats

    run = tempfile.mkdtemp(prefix="bench_dedup_scale_")
    chunks = max(1, n // (2 * per))
    t = time.perf_counter()
    with ProcessPoolExecutor(workers) as ex:
        truth = list(ex.map(_chunk, [(run, k, per, words, giant, clusters) for k in range(chunks)]))
    write_s = time.perf_counter() - t
    nbytes = sum(os.path.getsize(os.path.join(run, "_filtered", f)) for f in os.listdir(os.path.join(run, "_filtered")))
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                      memory_limit=0) as lc, Client(lc) as cl:
        pids = {f"worker-{i}": p for i, p in enumerate(sorted(cl.run(os.getpid).values()))}
        rss = _RssSampler({**pids, "client+scheduler": os.getpid()}, children=False)  # workers are the client's children
        rss.start()
        t = time.perf_counter()
        say = lambda step: print(f"  [{n}] {time.perf_counter() - t:8.1f}s {step}", file=sys.stderr, flush=True)  # noqa: E731
        counts = run_dedup(cl, run, DedupConfig(), progress=say)
        wall = time.perf_counter() - t
        rss.stop.set()
        rss.join()
    stats = load_stats(run)
    out = {"docs": chunks * 2 * per, "shards": 2 * chunks, "workers": workers, "source_parquet_mb": round(nbytes / 2**20, 1),
           "write_shards_with_signatures_s": round(write_s, 1), "phase2_wall_s": round(wall, 1),
           "phase2_docs_per_s": round(chunks * 2 * per / wall, 1),
           "seconds_per_step": stats["seconds_per_step"], "files_per_step": stats["files_per_step"],
           "peak_rss_mb": {k: round(v / 2**20, 1) for k, v in rss.peak.items()},
           "near_cluster_largest": max(map(int, stats.get("near_cluster_sizes") or {"0": 0})),
           "cc_iterations": stats.get("cc_iterations"), "candidate_pairs": stats.get("candidate_pairs"),
           "verified_pairs": stats.get("verified_pairs"),
           "counts": {k: v.to_dict() for k, v in counts.items()}, "quality": _quality(run, truth)}
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
    a = ap.parse_args()
    res = []
    for n in (int(x) for x in a.docs.split(",")):
        res.append(bench(n, a.docs_per_shard, a.workers, a.words, a.giant, a.giant_clusters, a.keep))
        print(json.dumps(res[-1]), file=sys.stderr, flush=True)
    text = json.dumps(res, indent=2)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
