"""The token-shard format of phase 3: its Arrow schema, list arrays of ids, and the atomic Parquet
writer that cuts row groups by token counts.

Token shard rows (``token_schema``): ``doc_id`` string, ``domain`` string, ``copy`` int32 (0 for
the first repetition of a document), ``num_tokens`` int32 (incl. BOS/EOS), ``input_ids``
list<uint16|uint32>.
"""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)


def token_schema(dtype) -> pa.Schema:
    """Arrow schema of a token shard for ids of numpy ``dtype`` (uint16 or uint32)."""
    return pa.schema([
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("copy", pa.int32(), nullable=False),
        pa.field("num_tokens", pa.int32(), nullable=False),
        pa.field("input_ids", pa.list_(pa.from_numpy_dtype(np.dtype(dtype))), nullable=False),
    ])


def ids_array(ids: np.ndarray, lengths: np.ndarray) -> pa.ListArray:
    """Arrow list array [len(lengths)] over flat ``ids`` (type kept: uint16 stays uint16)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids))


class AtomicParquetWriter:
    """Streaming zstd Parquet writer to fsspec ``fs``: writes ``path.tmp-*``, renames on clean exit.

    Each ``write(table)`` becomes row groups of at most ``row_group_rows`` rows, or, with
    ``row_group_tokens``, groups cut where the running ``num_tokens`` crosses a multiple of it
    (documents never split). No timestamps are written: equal tables give equal bytes. On an
    exception the temporary file is removed and the target left untouched.
    """

    def __init__(self, path: str, fs, schema: pa.Schema, *, compression_level: int = 3,
                 row_group_tokens: int | None = None, row_group_rows: int = 65536):
        import pyarrow.parquet as pq

        self.path, self.fs = path, fs
        self.tmp = f"{path}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
        self.row_group_tokens, self.row_group_rows = row_group_tokens, row_group_rows
        self.row_group_sizes: list[int] = []  # tokens (or rows) of each group written
        self._fh = fs.open(self.tmp, "wb")
        self._w = pq.ParquetWriter(self._fh, schema, compression="zstd", compression_level=compression_level,
                                   write_statistics=True)

    def write(self, table: pa.Table) -> None:
        for start, stop in _row_groups(table, self.row_group_tokens, self.row_group_rows):
            part = table.slice(start, stop - start)
            self._w.write_table(part, row_group_size=max(1, part.num_rows))
            self.row_group_sizes.append(int(pa.compute.sum(part.column("num_tokens")).as_py() or 0)
                                        if self.row_group_tokens else part.num_rows)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc_info):
        self._w.close()
        self._fh.close()
        if exc_type is None:
            self.fs.mv(self.tmp, self.path)
        else:
            self.fs.rm(self.tmp)
        return False


def _row_groups(table: pa.Table, row_group_tokens: int | None, rows: int) -> list[tuple[int, int]]:
    n = table.num_rows
    if n == 0:
        return []
    if not row_group_tokens:
        return [(s, min(n, s + rows)) for s in range(0, n, rows)]
    ntok = table.column("num_tokens").to_numpy()
    starts = np.concatenate([[0], np.cumsum(ntok)[:-1]])
    cuts = np.flatnonzero(np.diff(starts // row_group_tokens)) + 1
    bounds = [0, *cuts.tolist(), n]
    return list(zip(bounds[:-1], bounds[1:]))
