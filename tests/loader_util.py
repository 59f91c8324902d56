"""Small synthetic token shards for the loader tests: every token id occurs once, documents are runs.

Document ``d`` holds the consecutive ids ``starts[d] .. starts[d] + lengths[d] - 1`` (ids from 1; 0 is
EOS/pad), so a token's id tells which document and position it came from.
"""
from __future__ import annotations

import json
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa

from datapipe.formats.tokens import AtomicParquetWriter, ids_array, token_schema


def write_index(folder: Path, n_docs: int = 240, *, shards: int = 3, row_group_tokens: int = 2000,
                max_len: int = 160, dtype: str = "uint16", first_id: int = 1, seed: int = 0) -> tuple[str, np.ndarray]:
    """Write ``shards`` token shards and ``index.json`` under ``folder``; return (index path, lengths [n_docs])."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, max_len, n_docs)
    ids = np.arange(first_id, first_id + int(lengths.sum())).astype(dtype)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    fs, entries = fsspec.filesystem("file"), []
    for s in range(shards):
        lo, hi = n_docs * s // shards, n_docs * (s + 1) // shards
        n = hi - lo
        table = pa.table([pa.array([f"d{i}" for i in range(lo, hi)]), pa.array(["web"] * n),
                          pa.array(np.zeros(n, np.int32)), pa.array(lengths[lo:hi].astype(np.int32)),
                          ids_array(ids[bounds[lo]:bounds[hi]], lengths[lo:hi])], schema=token_schema(np.dtype(dtype)))
        name = f"shard-{s:05d}.parquet"
        with AtomicParquetWriter(str(folder / name), fs, table.schema, row_group_tokens=row_group_tokens) as w:
            w.write(table)
        entries.append({"path": name, "row_group_tokens": w.row_group_sizes, "documents": n})
    index = {"format": "datapipe.tokens/1", "dtype": dtype, "config_fingerprint": f"synthetic-{seed}",
             "tokenizer": {"eos_id": 0, "vocab_size": int(ids.max()) + 1}, "shards": entries}
    (folder / "index.json").write_text(json.dumps(index))
    return str(folder / "index.json"), lengths
