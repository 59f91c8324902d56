"""Dedup benchmark: MinHash signatures/s on ~3 KB real-text documents (ours vs datasketch vs
rensa) and the whole phase-2 dedup on a 2-worker LocalCluster. Prints one JSON object.

    python benchmarks/bench_dedup.py [--sig-docs 5000] [--docs 100000,300000] [--docs-per-shard 12500]
    BENCH_QUICK=1 python benchmarks/bench_dedup.py     # small variant (make bench)

Rates are the median of ``--repeats`` runs with [min, max]. Peak RSS per worker is sampled every
0.2 s from the client (psutil, the worker process and its children), not ru_maxrss (inherited
across fork). Documents are 30 random sentences of the shared Common Crawl text, cut at 3,000 chars (synthetic-from-real); for the
phase-2 run 20% of documents are one-word edits of another (near duplicates) and 5% exact copies.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from functools import lru_cache

import numpy as np

from datapipe.env import shared_data
from datapipe.stages.lib.minhash import shingles, signatures
from datapipe.stages.lib.normalize import normalize_text


@lru_cache(maxsize=1)
def _sentences() -> list[str]:
    sents = []
    for f in sorted((shared_data() / "cc_text").glob("*.jsonl.gz")):
        with gzip.open(f, "rt") as fh:
            sents += [s for line in fh for s in json.loads(line)["text"].replace("\n", " ").split(". ") if 20 < len(s) < 400]
    return sents


def _docs(n: int, seed: int = 0) -> list[str]:
    """n documents of ~3 KB, each 30 sentences drawn at random from the shared real text (so
    two documents rarely share more than a sentence: unrelated, like distinct web pages)."""
    sents = _sentences()
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        pick = rng.integers(0, len(sents), 30)
        out.append(". ".join(sents[i] for i in pick)[:3000])
    return out


def _rate(n: int, fn, repeats: int = 1) -> dict:
    """docs/s of ``fn`` over ``n`` docs: median and [min, max] of ``repeats`` runs."""
    r = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        r.append(n / (time.perf_counter() - t))
    return {"median": round(statistics.median(r), 1), "range": [round(min(r), 1), round(max(r), 1)]}


def bench_signatures(n: int, repeats: int) -> dict:
    import rensa
    import xxhash
    from datasketch import MinHash

    from datapipe.stages.dedup_signatures import signature_columns

    docs = _docs(n)
    k = max(n // 5, 200)  # the slow baselines run on a subset
    t = time.perf_counter()
    signature_columns(docs[:2])  # loads the cached numba kernel (compiles it on a fresh machine)
    out = {"docs": n, "avg_chars": round(float(np.mean([len(d) for d in docs])), 1), "num_perm": 128, "ngram": 5,
           "first_call_s": round(time.perf_counter() - t, 2), "repeats": repeats}
    # The stage's whole work: raw text -> normalized, shingled, hashed, signature + content hash.
    out["ours_stage_signature_columns_docs_s"] = _rate(n, lambda: signature_columns(docs), repeats)
    out["ours_poly64_incl_normalize_shingle_docs_s"] = _rate(
        n, lambda: signatures([normalize_text(d) for d in docs], 128, 1, 5, hash="poly64"), repeats)
    norm = [normalize_text(d) for d in docs]
    out["ours_poly64_signature_only_docs_s"] = _rate(n, lambda: signatures(norm, 128, 1, 5), repeats)
    out["normalize_text_only_docs_s"] = _rate(n, lambda: [normalize_text(d) for d in docs], repeats)
    out["ours_xxh32_incl_normalize_shingle_docs_s"] = _rate(
        k, lambda: signatures([normalize_text(d) for d in docs[:k]], 128, 1, 5, hash="xxh32"))
    sh = [shingles(t, 5) for t in norm[:k]]

    def ds(hf=None):
        for s in sh:
            m = MinHash(128, seed=1, hashfunc=hf) if hf else MinHash(128, seed=1)
            m.update_batch(s)
    out["datasketch_update_batch_sha1_excl_shingle_docs_s"] = _rate(k, ds, repeats)
    out["datasketch_update_batch_xxh32_excl_shingle_docs_s"] = _rate(k, lambda: ds(xxhash.xxh32_intdigest), repeats)
    shs = [[x.decode() for x in s] for s in sh]

    def rs():
        for s in shs:
            m = rensa.RMinHash(128, 1)
            m.update(s)
            m.digest()
    out["rensa_rminhash_excl_shingle_docs_s"] = _rate(k, rs, repeats)
    out["python_shingling_only_docs_s"] = _rate(k, lambda: [shingles(t, 5) for t in norm[:k]], repeats)
    ours = out["ours_stage_signature_columns_docs_s"]["median"]
    out["ratio_ours_stage_vs_datasketch_sha1"] = round(ours / out["datasketch_update_batch_sha1_excl_shingle_docs_s"]["median"], 2)
    out["ratio_ours_stage_vs_rensa"] = round(ours / out["rensa_rminhash_excl_shingle_docs_s"]["median"], 2)
    return out


def bench_quality() -> dict:
    """Pair precision/recall at 0.8 on the evaluation set (see stages/dedup/evaluation.py)."""
    from dedup_evaluation import (
        datasketch_pairs,
        exact_jaccard,
        make_eval_set,
        pipeline_pairs,
        prf,
        real_texts,
    )
    from distributed import Client, LocalCluster

    from datapipe.stages.dedup_signatures import signature_columns
    from datapipe.stages.phases.dedup.config import DedupConfig

    ev = make_eval_set(real_texts(str(shared_data() / "warc" / "realpages-1171.warc.gz")))
    jac = exact_jaccard(ev.texts)
    truth = {p for p, v in jac.items() if v >= 0.8}
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address="127.0.0.1:0") as c, \
            Client(c) as cl:
        edges, rep = pipeline_pairs(cl, ev.texts, DedupConfig())
    comp = {p for p in jac if rep[p[0]] == rep[p[1]]}
    _, sig = signature_columns(ev.texts)
    ds = datasketch_pairs(np.array(sig.to_pylist(), dtype=np.uint32), 0.8, 128)
    r = lambda x: [round(v, 4) for v in x]  # noqa: E731
    return {"docs": len(ev.texts), "true_pairs": len(truth), "ours_edges_precision_recall": r(prf(edges, truth)),
            "ours_components_precision_recall": r(prf(comp, truth)),
            "datasketch_minhashlsh_candidates_precision_recall": r(prf(ds, truth)),
            "datasketch_candidates_exact_verified_precision_recall":
                r(prf({p for p in ds if jac.get(p, 0) >= 0.8}, truth))}


class _RssSampler(threading.Thread):
    """Peak RSS (bytes) of each process (with its children unless ``children=False``), sampled from the client."""

    def __init__(self, pids: dict, every: float = 0.2, children: bool = True):
        super().__init__(daemon=True)
        import psutil

        self.procs = {w: psutil.Process(p) for w, p in pids.items()}
        self.peak = {w: 0 for w in pids}
        self.every, self.children, self.stop = every, children, threading.Event()

    def run(self):
        while not self.stop.is_set():
            for w, p in self.procs.items():
                try:
                    rss = p.memory_info().rss + (sum(c.memory_info().rss for c in p.children(recursive=True))
                                                 if self.children else 0)
                except Exception:  # noqa: BLE001 - a process gone between two samples
                    continue
                self.peak[w] = max(self.peak[w], rss)
            self.stop.wait(self.every)


def bench_phase2(n: int, per_shard: int) -> dict:
    from dedup_fixtures import write_shards
    from distributed import Client, LocalCluster

    from datapipe.stages.phases.dedup.config import DedupConfig
    from datapipe.stages.phases.dedup.phase import run_dedup

    rng = np.random.default_rng(1)
    run = tempfile.mkdtemp(prefix="bench_dedup_")
    nshards = -(-n // per_shard)
    t = time.perf_counter()
    for k in range(nshards):  # one shard at a time: the corpus is never in this process
        docs = _docs(min(per_shard, n - k * per_shard), seed=2 + k)
        m = len(docs)
        for i in rng.choice(m, m // 5, replace=False):       # near duplicates: one word changed
            src = docs[int(rng.integers(0, m))].split(" ")
            src[int(rng.integers(0, len(src)))] = "edited"
            docs[i] = " ".join(src)
        for i in rng.choice(m, m // 20, replace=False):      # exact copies
            docs[i] = docs[int(rng.integers(0, m))]
        write_shards(run, {f"part-{k:04d}": [{"id": f"{k}-{i}", "text": x} for i, x in enumerate(docs)]})
    phase1_s = time.perf_counter() - t
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0") as c, \
            Client(c) as cl:
        sampler = _RssSampler(cl.run(os.getpid))
        base = {w: round(p.memory_info().rss / 2**20, 1) for w, p in sampler.procs.items()}
        sampler.start()
        t = time.perf_counter()
        say = lambda step: print(f"  [{n}] {step}", file=sys.stderr, flush=True)  # noqa: E731
        counts = run_dedup(cl, run, DedupConfig(), progress=say)
        wall = time.perf_counter() - t
        sampler.stop.set()
        sampler.join()
        stats = json.load(open(os.path.join(run, "_phases", "dedup.json")))["stats"]
    shutil.rmtree(run, ignore_errors=True)
    return {"docs": n, "shards": nshards, "write_shards_with_signatures_s": round(phase1_s, 2),
            "phase2_wall_s": round(wall, 2), "phase2_docs_s": round(n / wall, 1),
            "peak_rss_mb_per_worker": sorted(round(v / 2**20, 1) for v in sampler.peak.values()),
            "worker_rss_mb_at_start": sorted(base.values()),
            "stats": {k: stats.get(k) for k in ("candidate_pairs", "unique_candidate_pairs", "verified_pairs", "cc_iterations", "bands", "rows")},
            "counts": {k: v.to_dict() for k, v in counts.items()}}


def main() -> None:
    quick = os.environ.get("BENCH_QUICK") == "1"
    ap = argparse.ArgumentParser()
    ap.add_argument("--sig-docs", type=int, default=2000 if quick else 10000)
    ap.add_argument("--repeats", type=int, default=3 if quick else 5)
    ap.add_argument("--docs", default="5000" if quick else "100000,300000", help="comma-separated sizes; 0 = none")
    ap.add_argument("--docs-per-shard", type=int, default=2500 if quick else 12500)
    ap.add_argument("--no-quality", action="store_true")
    a = ap.parse_args()
    out = {"signatures": bench_signatures(a.sig_docs, a.repeats)}
    if not a.no_quality:
        out["quality_at_0.8"] = bench_quality()
    out["phase2"] = []
    for n in (int(x) for x in a.docs.split(",") if int(x)):
        out["phase2"].append(bench_phase2(n, a.docs_per_shard))
        print(json.dumps(out["phase2"][-1]), file=sys.stderr, flush=True)  # kept if a later size fails
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
