"""``datapipe classifiers train`` on the pipeline's own outputs (Parquet shards, a run directory,
the Dolma ``.jsonl.zst`` export), and a clear error for a file it cannot read.

Before: a Parquet shard was read as ``lines`` and training died with a raw UnicodeDecodeError.
"""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from phase3_util import cc_docs, make_run_dir

from datapipe.classifiers import data
from datapipe.cli.main import main
from datapipe.env import shared_data


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two run directories as the pipeline writes them: wiki articles (positives), crawled pages."""
    root = tmp_path_factory.mktemp("runs")
    wiki = data.read_source(str(shared_data() / "quality" / "wikitext-2_valid.txt.gz"))[:150]
    good = make_run_dir(root / "good", [{"id": f"w{i}", "url": f"https://en.wikipedia.org/{g}", "text": t}
                                        for i, (g, t) in enumerate(wiki)], n_files=2)
    crawl = make_run_dir(root / "crawl", cc_docs(), n_files=3)
    return good, crawl


def test_parquet_shards_are_read_by_their_text_column(runs):
    good, crawl = runs
    shard = sorted((crawl / "documents").glob("*.parquet"))[0]
    t = pq.read_table(shard)
    want = [(i, piece) for i, text in zip(t.column("id").to_pylist(), t.column("text").to_pylist())
            for piece in data.chunk_words(text, 200)]
    assert data.read_source(str(shard)) == want and len(want) > t.num_rows  # long pages: several chunks
    files = sorted((crawl / "documents").glob("*.parquet"))
    assert data.expand_sources([str(crawl)]) == [f"parquet:{f}" for f in files]
    assert data.read_source(str(crawl)) == [d for f in files for d in data.read_source(str(f))]
    assert sum(1 for _ in data.read_source(str(crawl / "documents"))) == len(data.read_source(str(crawl)))


def test_train_quality_reads_run_directories(runs, tmp_path, capsys, monkeypatch):
    """What ``train`` hands the trainer: every chunk of every shard, sources as the shard files (the
    sidecar hashes each). The trainer itself is replaced: quantising takes ~50 s on 2 cores."""
    from datapipe.classifiers import recipes

    good, crawl = runs
    seen = {}

    def fake_train(pos, neg, out, *a, sources=None, **kw):
        seen.update(pos=pos, neg=neg, sources=sources)
        return {"metrics": {}, "n_train": len(pos) + len(neg)}
    monkeypatch.setattr(recipes, "train_binary", fake_train)
    assert main(["classifiers", "train", "quality", "--positives", str(good), "--negatives", str(crawl / "documents"),
                 "--out", str(tmp_path / "q.ftz")]) == 0
    files = sorted((good / "documents").glob("*.parquet")) + sorted((crawl / "documents").glob("*.parquet"))
    assert seen["sources"] == [f"parquet:{f}" for f in files] and all(f.is_file() for f in files)
    assert seen["pos"] == data.read_source(str(good)) and seen["neg"] == data.read_source(str(crawl))
    assert json.loads(capsys.readouterr().out)["n_train"] == len(seen["pos"]) + len(seen["neg"])


def test_evaluate_on_run_directories(runs, capsys):
    """End to end with the shipped quality model: the counts are the shards' chunks."""
    good, crawl = runs
    assert main(["classifiers", "evaluate", "--model", "quality_wiki_cc.ftz", "--positives", str(good),
                 "--negatives", str(crawl)]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["n_pos"] == len(data.read_source(str(good))) and m["n"] - m["n_pos"] == len(data.read_source(str(crawl)))
    assert m["auc"] > 0.8  # wiki articles vs crawled pages: what the model was trained to tell apart


def test_dolma_export_is_readable(tmp_path):
    docs = cc_docs()[:5]
    path = tmp_path / "part.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress("".join(json.dumps(d) + "\n" for d in docs).encode()))
    got = data.read_source(str(path))
    assert got == [(d["id"], p) for d in docs for p in data.chunk_words(d["text"], 200)]


def test_unreadable_sources_are_clear_errors(runs, tmp_path, capsys):
    good, _ = runs
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    no_text = tmp_path / "no_text.parquet"
    pq.write_table(pa.table({"id": ["a"], "body": ["x"]}), no_text)
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"text": "fine"}\nnot json\n')
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    cases = [(binary, f"cannot read {binary} as a lines source (UnicodeDecodeError"),
             (no_text, f"{no_text}: no 'text' column (columns: id, body)"),
             (bad_json, f"cannot read {bad_json} as a jsonl source (JSONDecodeError"),
             (empty, f"{empty}: a directory without *.parquet files"),
             (tmp_path / "missing.parquet", "not found")]
    for path, message in cases:
        rc = main(["classifiers", "train", "quality", "--positives", str(good), "--negatives", str(path),
                   "--out", str(tmp_path / "m.ftz")])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("error: ") and message in err, (path, err)
        assert "Traceback" not in err
    assert not (tmp_path / "m.ftz").exists()
    assert main(["classifiers", "evaluate", "--model", "quality_wiki_cc.ftz", "--positives", str(binary)]) == 2
    assert "prefix the kind" in capsys.readouterr().err
