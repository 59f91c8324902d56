"""Run-directory I/O for phase 2 (fsspec, so local paths and object stores alike) and the
file-based shuffle: map tasks write one Parquet piece per target partition, reduce tasks read
all pieces of their partition. Pieces live on disk, so no process holds a whole shuffle.
"""
from __future__ import annotations

import json
import posixpath
import uuid

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from datapipe.io.parquet import write_table_atomic

U64 = np.uint64


def mix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3 64-bit finalizer on uint64 (wrapping): spreads keys before ``% partitions``."""
    x = x ^ (x >> U64(33))
    x = x * U64(0xFF51AFD7ED558CCD)
    x = x ^ (x >> U64(33))
    x = x * U64(0xC4CEB9FE1A85EC53)
    return x ^ (x >> U64(33))


def partition_of(keys: np.ndarray, nparts: int) -> np.ndarray:
    """Partition index (int64, in [0, nparts)) of uint64 ``keys`` by hash."""
    return (mix64(keys.astype(U64)) % U64(nparts)).astype(np.int64)


class Store:
    """Files under ``root`` on the fsspec filesystem of ``url`` (``storage_options`` passed to it).

    Picklable (re-created from url/options on Dask workers). Writes are atomic: a temporary name
    in the same folder, then a rename.
    """

    def __init__(self, url: str, storage_options: dict | None = None):
        self.url, self.options = url, dict(storage_options or {})
        self.fs, self.root = fsspec.core.url_to_fs(url, **self.options)

    def __reduce__(self):
        return (Store, (self.url, self.options))

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def exists(self, rel: str) -> bool:
        return self.fs.exists(self.path(rel))

    def glob(self, pattern: str) -> list[str]:
        """Sorted paths relative to root matching ``pattern`` (relative)."""
        base = self.root.rstrip("/") + "/"
        return sorted(p[len(base):] if p.startswith(base) else p for p in self.fs.glob(self.path(pattern)))

    def read(self, rel: str, columns: list[str] | None = None) -> pa.Table:
        return pq.read_table(self.path(rel), columns=columns, filesystem=self.fs)

    def schema(self, rel: str) -> pa.Schema:
        return pq.read_schema(self.path(rel), filesystem=self.fs)

    def write(self, rel: str, table: pa.Table) -> None:
        # the engine's atomic writer: bytes depend only on the rows (reruns write identical files)
        write_table_atomic(self.path(rel), table, fs=self.fs)

    def read_json(self, rel: str):
        with self.fs.open(self.path(rel), "r") as f:
            return json.load(f)

    def write_json(self, rel: str, obj) -> None:
        final = self.path(rel)
        self.fs.makedirs(posixpath.dirname(final), exist_ok=True)
        tmp = f"{final}.tmp-{uuid.uuid4().hex[:8]}"
        with self.fs.open(tmp, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
        self.fs.mv(tmp, final)

    def rm(self, rel: str) -> None:
        if self.exists(rel):
            self.fs.rm(self.path(rel), recursive=True)

    # -- shuffle ---------------------------------------------------------------------------
    def scatter(self, step: str, table: pa.Table, parts: np.ndarray, tag: str) -> None:
        """Write rows of ``table`` to ``step/p<k>/<tag>.parquet`` for each partition k in ``parts``
        (int array, one entry per row). Empty partitions get no file.
        """
        if table.num_rows == 0:
            return
        order = np.argsort(parts, kind="stable")
        sorted_parts = parts[order]
        cuts = np.flatnonzero(np.diff(sorted_parts)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(order)]):
            k = int(sorted_parts[lo])
            self.write(f"{step}/p{k:05d}/{tag}.parquet", table.take(pa.array(order[lo:hi])))

    def gather(self, step: str, k: int, schema: pa.Schema) -> pa.Table:
        """All pieces of partition ``k`` of ``step`` concatenated (an empty ``schema`` table if none)."""
        files = self.glob(f"{step}/p{k:05d}/*.parquet")
        if not files:
            return schema.empty_table()
        return pa.concat_tables([self.read(f).select(schema.names).cast(schema) for f in files])
