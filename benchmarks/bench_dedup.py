"""Dedup benchmark: MinHash signatures/s on ~3 KB real-text documents (ours vs datasketch vs
rensa) and the whole phase-2 dedup on a 2-worker LocalCluster. Prints one JSON object.

    python benchmarks/bench_dedup.py [--sig-docs 5000] [--docs 20000] [--shards 8]

Documents are 30 random sentences of the shared Common Crawl text, cut at 3,000 chars (synthetic-from-real); for the
phase-2 run 20% of documents are one-word edits of another (near duplicates) and 5% exact copies.
"""
from __future__ import annotations

import argparse
import gzip
import json
import shutil
import resource
import tempfile
import time

import numpy as np

from datapipe.env import shared_data
from datapipe.stages.dedup.minhash import shingles, signatures
from datapipe.stages.dedup.normalize import normalize_text


def _docs(n: int, seed: int = 0) -> list[str]:
    """n documents of ~3 KB, each 30 sentences drawn at random from the shared real text (so
    two documents rarely share more than a sentence: unrelated, like distinct web pages)."""
    sents = []
    for f in sorted((shared_data() / "cc_text").glob("*.jsonl.gz")):
        with gzip.open(f, "rt") as fh:
            sents += [s for line in fh for s in json.loads(line)["text"].replace("\n", " ").split(". ") if 20 < len(s) < 400]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        pick = rng.integers(0, len(sents), 30)
        out.append(". ".join(sents[i] for i in pick)[:3000])
    return out


def _rate(n: int, fn) -> float:
    t = time.perf_counter()
    fn()
    return round(n / (time.perf_counter() - t), 1)


def bench_signatures(n: int) -> dict:
    import rensa
    import xxhash
    from datasketch import MinHash

    docs = _docs(n)
    k = max(n // 5, 200)  # the slow baselines run on a subset
    out = {"docs": n, "avg_chars": round(float(np.mean([len(d) for d in docs])), 1), "num_perm": 128, "ngram": 5}
    out["ours_poly64_incl_normalize_shingle_docs_s"] = _rate(
        n, lambda: signatures([normalize_text(d) for d in docs], 128, 1, 5, hash="poly64"))
    norm = [normalize_text(d) for d in docs]
    out["ours_poly64_signature_only_docs_s"] = _rate(n, lambda: signatures(norm, 128, 1, 5, hash="poly64"))
    out["ours_xxh32_incl_normalize_shingle_docs_s"] = _rate(
        k, lambda: signatures([normalize_text(d) for d in docs[:k]], 128, 1, 5, hash="xxh32"))
    out["normalize_only_docs_s"] = _rate(n, lambda: [normalize_text(d) for d in docs])
    sh = [shingles(t, 5) for t in norm[:k]]

    def ds(hf=None):
        for s in sh:
            m = MinHash(128, seed=1, hashfunc=hf) if hf else MinHash(128, seed=1)
            m.update_batch(s)
    out["datasketch_update_batch_sha1_excl_shingle_docs_s"] = _rate(k, ds)
    out["datasketch_update_batch_xxh32_excl_shingle_docs_s"] = _rate(k, lambda: ds(xxhash.xxh32_intdigest))
    shs = [[x.decode() for x in s] for s in sh]

    def rs():
        for s in shs:
            m = rensa.RMinHash(128, 1)
            m.update(s)
            m.digest()
    out["rensa_rminhash_excl_shingle_docs_s"] = _rate(k, rs)
    out["python_shingling_only_docs_s"] = _rate(k, lambda: [shingles(t, 5) for t in norm[:k]])
    return out


def bench_phase2(n: int, nshards: int) -> dict:
    from distributed import Client, LocalCluster

    from datapipe.stages.dedup import DedupConfig, run_dedup
    from datapipe.stages.dedup.testing import write_shards

    # Cluster first: workers fork from this process, and ru_maxrss is inherited across fork.
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0") as c, \
            Client(c) as cl:
        maxrss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # noqa: E731
        rss0 = cl.run(maxrss)
        rng = np.random.default_rng(1)
        docs = _docs(n, seed=2)
        for i in rng.choice(n, n // 5, replace=False):       # near duplicates: one word changed
            src = docs[int(rng.integers(0, n))].split(" ")
            src[int(rng.integers(0, len(src)))] = "edited"
            docs[i] = " ".join(src)
        for i in rng.choice(n, n // 20, replace=False):      # exact copies
            docs[i] = docs[int(rng.integers(0, n))]
        run = tempfile.mkdtemp(prefix="bench_dedup_")
        per = (n + nshards - 1) // nshards
        t = time.perf_counter()
        write_shards(run, {f"part-{k:03d}": [{"id": f"{k}-{i}", "text": x}
                                             for i, x in enumerate(docs[k * per:(k + 1) * per])]
                           for k in range(nshards)})
        phase1_s = time.perf_counter() - t
        del docs
        t = time.perf_counter()
        counts = run_dedup(cl, run, DedupConfig())
        wall = time.perf_counter() - t
        rss = cl.run(maxrss)
    shutil.rmtree(run, ignore_errors=True)
    return {"docs": n, "shards": nshards, "write_shards_with_signatures_s": round(phase1_s, 2),
            "phase2_wall_s": round(wall, 2), "phase2_docs_s": round(n / wall, 1),
            "peak_rss_mb_per_worker": sorted(round(v / 2**20, 1) for v in rss.values()),
            "worker_rss_mb_at_start": sorted(round(v / 2**20, 1) for v in rss0.values()),
            "counts": {k: v.to_dict() for k, v in counts.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sig-docs", type=int, default=5000)
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--shards", type=int, default=8)
    a = ap.parse_args()
    out = {"signatures": bench_signatures(a.sig_docs)}
    if a.docs:
        out["phase2"] = bench_phase2(a.docs, a.shards)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
