"""Paragraph- and n-gram-level dedup (issue 17) against a brute-force reference written here on
plain strings (no hashing, no shuffle): repeats inside one document, across documents and
across tasks, every mode and unit, any number of shards and partitions."""
from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import xxhash
from dedup_fixtures import write_shards
from scale_corpus import vocabulary

from datapipe.api.dedup import SyncClient
from datapipe.stages.lib.normalize import normalize_text
from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.phases.dedup.phase import load_stats, run_dedup


def _corpus(seed=0) -> list[dict]:
    rng = np.random.default_rng(seed)
    vocab = vocabulary(2000, seed=1)
    para = [" ".join(vocab[rng.integers(0, len(vocab), int(rng.integers(8, 40)))]) for _ in range(14)]
    variant = para[0].split(" ")
    variant[len(variant) // 2] = "CHANGED"
    para.append(" ".join(variant))       # para[14]: one word off para[0] (shares most 13-grams)
    docs = []
    for d in range(24):
        picks = rng.choice(len(para), int(rng.integers(1, 6)))
        lines = [para[i] for i in picks]
        if d % 5 == 0:
            lines.append(lines[0].upper())                 # a repeat inside the document (same normalized)
        if d % 7 == 0:
            lines.insert(1, "")                            # blank lines are never grams
        docs.append({"id": f"doc{d:02d}", "text": "\n".join(lines) + ("\n" if d % 2 else "")})
    own = " ".join(vocab[rng.integers(0, len(vocab), 30)])
    docs.append({"id": "alone", "text": "\n".join([own, own.upper(), own])})   # repeats only itself
    return docs


def _grams(norm: str, unit: str, n: int) -> set[str]:
    if not norm:
        return set()
    w = norm.split(" ")
    if unit == "paragraph" or len(w) <= n:
        return {norm}
    return {" ".join(w[i:i + n]) for i in range(len(w) - n + 1)}


def reference(docs, unit="ngram", n=13, mode=("paragraph",), thr=0.8, dthr=0.8) -> dict:
    """id -> ("dropped", None) or ("kept", text)."""
    key = {d["id"]: xxhash.xxh3_64_intdigest(d["id"].encode()) >> 1 for d in docs}
    paras = {d["id"]: [(raw, _grams(normalize_text(raw), unit, n)) for raw in d["text"].splitlines(True)]
             for d in docs}
    holders: dict[str, list[str]] = {}
    for i, ps in paras.items():
        for g in set().union(*(g for _, g in ps)):
            holders.setdefault(g, []).append(i)
    keeper = {g: min(h, key=key.get) for g, h in holders.items()}
    out = {}
    for i, ps in paras.items():
        total = set().union(*(g for _, g in ps))
        dup = {g for g in total if keeper[g] != i}
        if "document" in mode and dup and len(dup) >= dthr * len(total):
            out[i] = ("dropped", None)
            continue
        text = "".join(raw for raw, g in ps if not ("paragraph" in mode and g and len(g & dup) >= thr * len(g)))
        out[i] = ("kept", text) if normalize_text(text) else ("dropped", None)
    return out


def _run(tmp_path, docs, nshards, nparts, **ngram):
    rows = {f"s{k}": docs[k::nshards] for k in range(nshards)}
    write_shards(str(tmp_path), rows)
    cfg = DedupConfig(exact=False, minhash={"enabled": False}, partitions=nparts, ngram={"enabled": True, **ngram})
    counts = run_dedup(SyncClient(), str(tmp_path), cfg)
    got = {}
    for f in (tmp_path / "documents").glob("*.parquet"):
        got.update({r["id"]: ("kept", r["text"]) for r in pq.read_table(f, columns=["id", "text"]).to_pylist()})
    for f in (tmp_path / "rejected").glob("*.parquet"):
        for r in pq.read_table(f, columns=["id", "reject_reason"]).to_pylist():
            assert r["reject_reason"] == "dedup:ngram"
            got[r["id"]] = ("dropped", None)
    return got, counts["dedup_ngram"], load_stats(str(tmp_path))


CASES = [dict(unit="paragraph", mode=["paragraph"]), dict(unit="ngram", mode=["paragraph"]),
         dict(unit="ngram", mode=["document"], doc_threshold=0.5),
         dict(unit="paragraph", mode=["document", "paragraph"], doc_threshold=0.6),
         dict(unit="ngram", ngram=5, mode=["paragraph", "document"], threshold=0.5, doc_threshold=0.9)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join([c["unit"], *c["mode"]]))
def test_matches_bruteforce_for_any_layout(tmp_path, case):
    docs = _corpus()
    ref = reference(docs, case["unit"], case.get("ngram", 13), case["mode"], case.get("threshold", 0.8),
                    case.get("doc_threshold", 0.8))
    assert sum(v[0] == "dropped" for v in ref.values()) + sum(
        v[0] == "kept" and v[1] != d["text"] for v, d in zip(ref.values(), docs)) >= 3   # the case does something
    assert ref["alone"] == ("kept", next(d["text"] for d in docs if d["id"] == "alone"))  # never its own duplicate
    results = [_run(tmp_path / f"{s}x{p}", docs, s, p, **case) for s, p in ((1, 1), (3, 2), (5, 7))]
    for got, counts, _ in results:
        assert got == ref
    g0, c0, _ = results[0]
    assert all(c.to_dict() | {"seconds": 0} == c0.to_dict() | {"seconds": 0} for _, c, _ in results)


def test_ledger_counts_modifications_and_drops(tmp_path):
    docs = _corpus()
    case = dict(unit="paragraph", mode=["document", "paragraph"], doc_threshold=0.6)
    ref = reference(docs, "paragraph", 13, case["mode"], 0.8, 0.6)
    got, c, stats = _run(tmp_path, docs, 3, 2, **case)
    dropped = [i for i, v in ref.items() if v[0] == "dropped"]
    src = {d["id"]: d["text"] for d in docs}
    assert c.n_in == len(docs) and c.kept == len(docs) - len(dropped)
    assert dict(c.rejected) == {"dedup:ngram": len(dropped)}
    kept_bytes = sum(len(v[1].encode()) for v in ref.values() if v[0] == "kept")
    assert c.bytes_in == sum(len(t.encode()) for t in src.values())
    assert c.bytes_out == kept_bytes < c.bytes_in - sum(len(src[i].encode()) for i in dropped)  # modified, not only dropped
    assert stats["ngram_paragraphs_removed"] > 0 and 0 < stats["ngram_false_positive_bound"] < 1e-12


def test_bad_ngram_config():
    with pytest.raises(ValueError):
        DedupConfig(ngram={"mode": []})
    with pytest.raises(ValueError):
        DedupConfig(ngram={"threshold": 0})
