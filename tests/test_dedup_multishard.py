"""Phase-2 dedup over several shards of real text vs an independent brute-force reference
(exact Jaccard of all pairs + union-find), chains across shards, the representative rule,
resume after simulated crashes, config fingerprint, and incremental dedup against a reference run."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from dedup_fixtures import write_shards

from datapipe.env import shared_data
from datapipe.stages.lib.minhash import shingles
from datapipe.stages.lib.normalize import normalize_text
from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.phases.dedup.phase import STATS_FILE, WORK, load_stats, run_dedup


@pytest.fixture(scope="module")
def client(warm_client):
    """conftest's 2-process LocalCluster (set up once for the session)."""
    return warm_client


def _bases() -> list[list[str]]:
    words = []
    for f in sorted((shared_data() / "cc_text").glob("*.jsonl.gz")):
        with gzip.open(f, "rt") as fh:
            for line in fh:
                w = json.loads(line)["text"].split()
                if len(w) >= 320:
                    words.append(w[:300])
    return words


def _corpus() -> list[dict]:
    """Base docs, chains of one-word edits, re-cased/re-spaced exact copies; dates not in id order."""
    rng = np.random.default_rng(11)
    docs = []
    for b, w in enumerate(_bases()[:12]):
        docs.append({"id": f"b{b:02d}-0", "text": " ".join(w)})
        if b % 3 == 0:       # chain: each step replaces one more word
            cur = list(w)
            for step, pos in enumerate((40, 150, 260), start=1):
                cur[pos] = f"edit{b}x{step}"
                docs.append({"id": f"b{b:02d}-c{step}", "text": " ".join(cur)})
        if b % 2 == 0:       # exact duplicate after normalization
            docs.append({"id": f"b{b:02d}-x", "text": "  " + " ".join(w).upper().replace(" ", "\n ")})
    for d in docs:
        d["warc_date"] = f"2024-01-{int(rng.integers(1, 28)):02d}T00:00:00Z"
    return docs


def _reference(docs: list[dict], threshold: float = 0.8) -> dict[str, tuple[str, str | None]]:
    """Independent expectation: id -> (reject reason or 'kept', duplicate_of)."""
    sets = [set(shingles(normalize_text(d["text"]), 5)) for d in docs]
    parent = list(range(len(docs)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(docs)):
        for j in range(i + 1, len(docs)):
            jac = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
            assert jac >= 0.85 or jac <= 0.5, "corpus must avoid borderline pairs"
            if jac >= threshold:
                parent[find(i)] = find(j)
    key = {d["id"]: (d["warc_date"], d["id"]) for d in docs}
    norm = {d["id"]: normalize_text(d["text"]) for d in docs}
    comps, exact = {}, {}
    for i, d in enumerate(docs):
        comps.setdefault(find(i), []).append(d["id"])
        exact.setdefault(norm[d["id"]], []).append(d["id"])
    out = {}
    for members in comps.values():
        rep = min(members, key=key.get)
        for m in members:
            ex_rep = min(exact[norm[m]], key=key.get)
            out[m] = ("kept", None) if m == rep else ("dedup:exact", ex_rep) if m != ex_rep else ("dedup:near", rep)
    return out


def _state(run) -> dict[str, tuple[str, str | None]]:
    out = {}
    for sub in ("documents", "rejected"):
        for f in sorted((run / sub).glob("*.parquet")):
            for r in pq.read_table(f, columns=["id", "reject_reason", "duplicate_of"]).to_pylist():
                assert r["id"] not in out
                out[r["id"]] = (r["reject_reason"] or "kept", r["duplicate_of"])
    return out


def _c(counts) -> dict:
    """Counts without the timing."""
    return {k: (v.n_in, v.kept, dict(v.rejected), v.bytes_in, v.bytes_out) for k, v in counts.items()}


def _write(run, docs, nshards=4, seed=5):
    rng = np.random.default_rng(seed)
    shard = rng.integers(0, nshards, len(docs))
    write_shards(str(run), {f"part-{k}": [d for d, s in zip(docs, shard) if s == k] for k in range(nshards)})


def test_multishard_matches_bruteforce(client, tmp_path):
    docs = _corpus()
    expected = _reference(docs)
    assert sum(v[0] == "dedup:near" for v in expected.values()) >= 8
    assert sum(v[0] == "dedup:exact" for v in expected.values()) >= 5
    _write(tmp_path, docs)
    counts = run_dedup(client, str(tmp_path), DedupConfig(partitions=3))
    assert _state(tmp_path) == expected
    assert counts["dedup_exact"].n_in == len(docs)
    assert counts["dedup_near"].kept == sum(v[0] == "kept" for v in expected.values())
    assert counts["dedup_exact"].kept == counts["dedup_near"].n_in
    stats = load_stats(str(tmp_path))
    assert stats["cc_iterations"] >= 1 and not (tmp_path / WORK).exists()
    # every rejected doc points at a kept doc
    kept = {k for k, v in expected.items() if v[0] == "kept"}
    assert all(v[1] in kept for v in expected.values() if v[0] == "dedup:near")


def _shard_bytes(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.glob("*.parquet")}


def _first_run(client, run):
    """``_corpus()`` written to ``run`` and deduplicated once, work kept: (docs, config, counts, state)."""
    docs = _corpus()
    _write(run, docs)
    cfg = DedupConfig(keep_work=True)
    return docs, cfg, _c(run_dedup(client, str(run), cfg)), _state(run)


def test_resume_and_fingerprint(client, tmp_path):
    docs, cfg, first, final = _first_run(client, tmp_path)
    docs_bytes = _shard_bytes(tmp_path / "documents")
    assert _c(run_dedup(client, str(tmp_path), cfg)) == first                      # plan and applies resumed
    assert _shard_bytes(tmp_path / "documents") == docs_bytes
    # another config recomputes from the untouched sources, as a fresh run with it would
    other = DedupConfig(minhash={"threshold": 0.7})
    changed = _c(run_dedup(client, str(tmp_path), other))
    fresh = tmp_path / "fresh"
    _write(fresh, docs)
    assert changed == _c(run_dedup(client, str(fresh), other)) and _state(tmp_path) == _state(fresh)
    # back to the first config, then a crash after a shard's write but before its applied marker
    assert _c(run_dedup(client, str(tmp_path), cfg)) == first and _state(tmp_path) == final
    (tmp_path / STATS_FILE).unlink()
    (tmp_path / WORK / "applied" / "s0.json").unlink()
    assert _c(run_dedup(client, str(tmp_path), cfg)) == first and _state(tmp_path) == final


def test_resume_before_rename(client, tmp_path):
    _, cfg, first, final = _first_run(client, tmp_path)
    sources = _shard_bytes(tmp_path / "_filtered")
    # crash after rejected/ was written but before documents/part-1 was written
    (tmp_path / STATS_FILE).unlink()
    (tmp_path / WORK / "applied" / "s1.json").unlink()
    (tmp_path / "documents" / "part-1.parquet").unlink()
    assert _c(run_dedup(client, str(tmp_path), cfg)) == first and _state(tmp_path) == final
    assert _shard_bytes(tmp_path / "_filtered") == sources  # never modified


def test_incremental_against_reference_run(client, tmp_path):
    docs = _corpus()
    old = [d for d in docs if d["id"].endswith("-0")]
    new = [d for d in docs if not d["id"].endswith("-0")]
    run1, run2 = tmp_path / "r1", tmp_path / "r2"
    _write(run1, old, nshards=2)
    run_dedup(client, str(run1), DedupConfig())
    before = _shard_bytes(run1 / "documents")
    _write(run2, new, nshards=2)
    run_dedup(client, str(run2), DedupConfig(reference_dirs=[str(run1 / "documents")]))  # a finished run's output
    got = _state(run2)
    # every new doc derives from an old base: rejected, pointing at its base, which always wins
    assert all(v[0] in ("dedup:exact", "dedup:near") and v[1].endswith("-0") for v in got.values()), got
    assert {k: v[1][:3] for k, v in got.items()} == {k: k[:3] for k in got}
    assert _shard_bytes(run1 / "documents") == before
