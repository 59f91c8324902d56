"""Shared helpers of the phase-3 tests: a run directory of real Common Crawl text (dolma samples)."""
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from datapipe.env import shared_data


def cc_docs() -> list[dict]:
    """The 30 real documents of shared_data()/cc_text, in file order: id (sha1 of URL), url, host, text."""
    docs = []
    for f in sorted((shared_data() / "cc_text").glob("*.jsonl.gz")):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                d = json.loads(line)
                url = d["id"]
                docs.append({"id": hashlib.sha1(url.encode()).hexdigest()[:32], "url": url,
                             "host": urlsplit(url).hostname, "source": f.name, "text": d["text"], "lang": "en"})
    return docs


def make_run_dir(root: Path, docs: list[dict], n_files: int = 3) -> Path:
    """Write ``docs`` round-robin into ``n_files`` documents shards under ``root/documents``."""
    (root / "documents").mkdir(parents=True, exist_ok=True)
    for i in range(n_files):
        part = docs[i::n_files]
        pq.write_table(pa.Table.from_pylist(part), root / "documents" / f"part-{i:05d}.parquet")
    return root
