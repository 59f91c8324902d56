"""Readers for the public extraction evaluation sets in ../shared/data/extraction (used by the
extraction-quality tests and ``benchmarks/bench_extraction.py``)."""
from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path


def trafilatura_eval_pages(path: Path) -> list[tuple[bytes, list[str], list[str]]]:
    """``(html bytes, "with" strings, "without" strings)`` per page of trafilatura's evaluation set.

    ``path`` is ``trafilatura_eval.tar.xz`` (990 pages + ``evaldata.json``), read in one sequential
    pass because an xz stream cannot seek back cheaply.
    """
    blobs: dict[str, bytes] = {}
    meta = None
    with tarfile.open(path, "r:xz") as tf:
        for m in tf:
            if not m.isfile():
                continue
            p = Path(m.name)
            if p.name == "evaldata.json":
                meta = json.load(tf.extractfile(m))
            elif p.parent.name in ("eval", "cache"):
                blobs.setdefault(p.name, tf.extractfile(m).read())
    if meta is None:
        raise ValueError(f"{path}: no evaldata.json inside")
    return [(blobs[e["file"]], e.get("with", []), e.get("without", [])) for e in meta.values() if e["file"] in blobs]


def aeb_pages(root: Path) -> list[tuple[bytes, str]]:
    """``(html bytes, ground-truth article body)`` per page of the Article Extraction Benchmark."""
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    return [(gzip.decompress((root / "html" / f"{key}.html.gz").read_bytes()), item.get("articleBody") or "")
            for key, item in sorted(truth.items())]
