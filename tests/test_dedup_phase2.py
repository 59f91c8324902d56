"""Phase-2 global dedup on a 2-process Dask LocalCluster: cases B22/B23/B24/B26, CS336 A4
fixtures, multi-shard runs against an independent brute-force reference, resume/idempotence."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dedup_fixtures import write_shards

from datapipe.env import shared_cases, shared_data
from datapipe.formats.documents import document_schema
from datapipe.stages.dedup_signatures import DedupSignatures
from datapipe.stages.lib.minhash import shingles
from datapipe.stages.lib.normalize import normalize_text
from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.phases.dedup.phase import load_stats, run_dedup

CASES = shared_cases()
CS336 = shared_data() / "golden" / "cs336_a4"
SCHEMA = document_schema([DedupSignatures])


@pytest.fixture(scope="module")
def client(warm_client):
    """conftest's 2-process LocalCluster (set up once for the session)."""
    return warm_client


def _rows(path: Path) -> list[dict]:
    return [{"id": str(d["id"]), "text": d["text"]} for d in map(json.loads, path.read_text().splitlines())]


def _read(run: Path, sub: str) -> dict[str, dict]:
    out = {}
    for f in sorted((run / sub).glob("*.parquet")):
        t = pq.read_table(f)
        assert t.schema.equals(SCHEMA), f
        out.update({r["id"]: r for r in t.to_pylist()})
    return out


def _check_ledger(counts):
    prev = None
    for c in counts.values():
        assert c.n_in == c.kept + c.n_rejected
        assert prev is None or c.n_in == prev.kept
        prev = c


def test_b22_short_docs(client, tmp_path):
    write_shards(str(tmp_path), {"b22": _rows(CASES / "B22.jsonl")})
    counts = run_dedup(client, str(tmp_path), DedupConfig())
    kept, rej = _read(tmp_path, "documents"), _read(tmp_path, "rejected")
    assert sorted(kept) == ["0", "1", "3", "4"]
    assert {k: (r["reject_reason"], r["duplicate_of"], r["reject_stage"]) for k, r in rej.items()} == \
        {"2": ("dedup:exact", "0", "dedup")}
    assert counts["dedup_near"].kept == 4 and counts["dedup_near"].n_rejected == 0
    _check_ledger(counts)


def test_b23_empty_docs_unique(client, tmp_path):
    write_shards(str(tmp_path), {"b23": _rows(CASES / "B23.jsonl")})
    counts = run_dedup(client, str(tmp_path), DedupConfig())
    assert sorted(_read(tmp_path, "documents")) == ["empty", "newline", "normal", "spaces"]
    assert counts["dedup_exact"].n_in == 4 and counts["dedup_near"].kept == 4
    _check_ledger(counts)


def test_b24_cross_shard(client, tmp_path):
    write_shards(str(tmp_path), {"shard0": _rows(CASES / "B24.shard0.jsonl"),
                                 "shard1": _rows(CASES / "B24.shard1.jsonl")})
    counts = run_dedup(client, str(tmp_path), DedupConfig())
    kept, rej = _read(tmp_path, "documents"), _read(tmp_path, "rejected")
    # tie on warc_date (null) -> smallest id wins
    assert sorted(kept) == ["s0-a", "s0-b", "s1-b"] and list(rej) == ["s1-a"]
    assert rej["s1-a"]["duplicate_of"] == "s0-a"
    assert (tmp_path / "rejected" / "dedup-shard1.parquet").exists()
    assert not (tmp_path / "rejected" / "dedup-shard0.parquet").exists()
    _check_ledger(counts)


def test_b24_minhash_only_cross_shard(client, tmp_path):
    write_shards(str(tmp_path), {"shard0": _rows(CASES / "B24.shard0.jsonl"),
                                 "shard1": _rows(CASES / "B24.shard1.jsonl")})
    run_dedup(client, str(tmp_path), DedupConfig(exact=False))
    rej = _read(tmp_path, "rejected")
    assert sorted(_read(tmp_path, "documents")) == ["s0-a", "s0-b", "s1-b"]
    assert {k: (r["reject_reason"], r["duplicate_of"]) for k, r in rej.items()} == {"s1-a": ("dedup:near", "s0-a")}


def test_b26_one_near_cluster(client, tmp_path):
    rows = _rows(CASES / "B26.jsonl")
    write_shards(str(tmp_path), {"b26": rows})
    counts = run_dedup(client, str(tmp_path), DedupConfig(exact=False))
    kept, rej = _read(tmp_path, "documents"), _read(tmp_path, "rejected")
    assert list(kept) == ["fullwidth"]              # smallest id among 6 with null dates
    assert {r["reject_reason"] for r in rej.values()} == {"dedup:near"} and len(rej) == 5
    assert {r["duplicate_of"] for r in rej.values()} == {"fullwidth"}
    assert load_stats(str(tmp_path))["near_cluster_sizes"] == {"6": 1}
    assert counts["dedup_near"].rejected == {"dedup:near": 5}


def test_b26_default_config_keeps_one(client, tmp_path):
    write_shards(str(tmp_path), {"b26": _rows(CASES / "B26.jsonl")})
    run_dedup(client, str(tmp_path), DedupConfig())
    assert list(_read(tmp_path, "documents")) == ["fullwidth"] and len(_read(tmp_path, "rejected")) == 5


def _cs336_rows(folder: str) -> list[dict]:
    return [{"id": f.name, "text": f.read_text()} for f in sorted((CS336 / folder).glob("*.txt"))]


def test_cs336_line_dedup_exact(client, tmp_path):
    rows = _cs336_rows("documents_with_line_duplicates")
    write_shards(str(tmp_path), {"a": rows[:2], "b": rows[2:]})  # duplicates span two shards
    cfg = DedupConfig(exact=False, lines={"enabled": True, "max_count": 1}, minhash={"enabled": False})
    counts = run_dedup(client, str(tmp_path), cfg)
    kept, rej = _read(tmp_path, "documents"), _read(tmp_path, "rejected")
    expected = {f.name: f.read_text() for f in (CS336 / "documents_line_deduplicated").glob("*.txt")}
    assert {k: r["text"] for k, r in kept.items()} == {k: v for k, v in expected.items() if v}
    assert {k: r["reject_reason"] for k, r in rej.items()} == {k: "dedup:lines" for k, v in expected.items() if not v}
    assert counts["dedup_lines"].n_in == 5 and counts["dedup_lines"].kept == 3
    # edited texts carry a fresh hash/signature (doc4 lost two lines)
    fresh = DedupSignatures()(pq.read_table(tmp_path / "documents" / "b.parquet").select(["text"]))
    assert fresh.column("minhash").to_pylist() == [kept[i]["minhash"] for i in ("doc3.txt", "doc4.txt", "doc5.txt")]


def test_cs336_minhash_100_10(client, tmp_path):
    write_shards(str(tmp_path), {"a": _cs336_rows("documents_with_line_duplicates")},
                 DedupSignatures.Config(num_perm=100))
    cfg = DedupConfig(exact=False, minhash={"num_perm": 100, "bands": 10, "ngram": 5, "threshold": 0.8})
    run_dedup(client, str(tmp_path), cfg)
    assert sorted(_read(tmp_path, "documents")) == ["doc1.txt", "doc3.txt", "doc4.txt", "doc5.txt"]


def test_cs336_minhash_fuzzy_500_50(client, tmp_path):
    rows = _cs336_rows("documents_with_fuzzy_duplicates")
    a, b = (set(shingles(normalize_text(r["text"]), 5)) for r in rows[1:])
    assert len(a & b) / len(a | b) > 0.8            # the MIT pair really is above the threshold
    write_shards(str(tmp_path), {"a": rows[:2], "b": rows[2:]}, DedupSignatures.Config(num_perm=500))
    cfg = DedupConfig(minhash={"num_perm": 500, "bands": 50, "threshold": 0.8})
    run_dedup(client, str(tmp_path), cfg)
    assert sorted(_read(tmp_path, "documents")) == ["pytorch_license.txt", "rails_mit_license.txt"]
    assert _read(tmp_path, "rejected")["react_mit_license.txt"]["duplicate_of"] == "rails_mit_license.txt"
