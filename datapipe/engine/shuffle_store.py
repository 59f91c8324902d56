"""Run-directory I/O for phase 2 (fsspec: local paths and object stores alike) and its shuffle.

The shuffle writes **one file per task and step** (a *run*): a map task appends its rows as
Arrow IPC segments, each holding rows of one target partition, then an index (partition,
offset, length of every segment) and a fixed 16-byte trailer. A reduce task lists the step's
folder once and reads only the byte ranges of its partition's segments, one segment at a time,
so a step writes S + P files (not S x P) and no process holds a whole partition unless the
reducer wants to. Writes are atomic (temporary name, then rename); a retried task rewrites the
same name. A writer flushes every ``flush_rows`` rows, which bounds a task's buffer whatever
the size of a cluster or bucket.
"""
from __future__ import annotations

import io
import json
import posixpath
import struct
import uuid
from collections.abc import Iterator

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from datapipe.io.parquet import write_table_atomic

U64 = np.uint64
RUN_EXT = ".run"
_MAGIC = b"DPRUN001"
_INDEX = pa.schema([("part", pa.int64()), ("offset", pa.int64()), ("length", pa.int64())])
_IPC = pa.ipc.IpcWriteOptions(compression="lz4")
#: Rows buffered by a RunWriter before it writes segments (bounds a task's shuffle buffer).
FLUSH_ROWS = 1 << 20


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
        """Remove a file or a whole folder in one recursive delete (the filesystem's own)."""
        if self.exists(rel):
            self.fs.rm(self.path(rel), recursive=True)

    # -- shuffle ---------------------------------------------------------------------------
    def writer(self, step: str, tag: str, nparts: int, schema: pa.Schema,
               flush_rows: int = FLUSH_ROWS) -> "RunWriter":
        return RunWriter(self, f"{step}/{tag}{RUN_EXT}", nparts, schema, flush_rows)

    def scatter(self, step: str, table: pa.Table, parts: np.ndarray, tag: str) -> None:
        """Write ``table``'s rows to the run ``step/<tag>.run``, row i to partition ``parts[i]``."""
        with self.writer(step, tag, 0, table.schema) as w:
            w.add(table, parts)

    def runs(self, step: str) -> list[tuple[str, int]]:
        """(path, size) of every finished run of ``step``, sorted by name (one listing)."""
        try:
            entries = self.fs.ls(self.path(step), detail=True)
        except FileNotFoundError:
            return []
        return sorted((e["name"], int(e["size"])) for e in entries
                      if e["name"].endswith(RUN_EXT) and e.get("type") != "directory")

    def segments(self, step: str, k: int, schema: pa.Schema) -> Iterator[pa.Table]:
        """Partition ``k`` of ``step``: one table (``schema``) per segment, in run-name order."""
        for path, size in self.runs(step):
            for off, length in _segments_of(self.fs, path, size, k):
                t = pa.ipc.open_stream(self.fs.cat_file(path, start=off, end=off + length)).read_all()
                yield t.select(schema.names).cast(schema)

    def read_step(self, step: str, schema: pa.Schema) -> pa.Table:
        """Every row of every partition of ``step`` (for tests and evaluation on small runs)."""
        parts = [pa.ipc.open_stream(self.fs.cat_file(path, start=off, end=off + n)).read_all()
                 .select(schema.names).cast(schema)
                 for path, size in self.runs(step) for off, n in _all_segments(self.fs, path, size)]
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def gather(self, step: str, k: int, schema: pa.Schema) -> pa.Table:
        """All of partition ``k`` of ``step`` in one table (for partitions bounded by a shard's size)."""
        parts = list(self.segments(step, k, schema))
        return pa.concat_tables(parts) if parts else schema.empty_table()


def _index(fs, path: str, size: int) -> pa.Table:
    tail = min(size, 1 << 16)   # the index of a run is usually inside its last 64 KiB: one read
    buf = fs.cat_file(path, start=size - tail, end=size)
    ilen, magic = struct.unpack("<q8s", buf[-16:])
    if magic != _MAGIC:
        raise ValueError(f"{path}: not a shuffle run (bad trailer)")
    if ilen + 16 > tail:
        buf = fs.cat_file(path, start=size - 16 - ilen, end=size)
    return pa.ipc.open_stream(buf[len(buf) - 16 - ilen: len(buf) - 16]).read_all()


def _all_segments(fs, path: str, size: int) -> list[tuple[int, int]]:
    idx = _index(fs, path, size)
    return list(zip(idx.column("offset").to_pylist(), idx.column("length").to_pylist()))


def _segments_of(fs, path: str, size: int, k: int) -> list[tuple[int, int]]:
    idx = _index(fs, path, size)
    part = idx.column("part").to_numpy()
    lo, hi = np.searchsorted(part, k, "left"), np.searchsorted(part, k, "right")
    return list(zip(idx.column("offset").to_numpy()[lo:hi].tolist(), idx.column("length").to_numpy()[lo:hi].tolist()))


class RunWriter:
    """Streams rows into one run file (see module docstring). ``add(table, parts)`` buffers;
    every ``flush_rows`` rows the buffer is sorted by partition and written as segments. Closing
    writes the index and renames the file into place; an exception leaves no file."""

    def __init__(self, store: Store, rel: str, nparts: int, schema: pa.Schema, flush_rows: int):
        self.store, self.final = store, store.path(rel)
        self.schema, self.flush_rows = schema, flush_rows
        store.fs.makedirs(posixpath.dirname(self.final), exist_ok=True)
        self.tmp = f"{self.final}.tmp-{uuid.uuid4().hex[:8]}"
        self.fh = store.fs.open(self.tmp, "wb")
        self.index: list[tuple[int, int, int]] = []  # (partition, offset, length) per written segment
        self.buf: list[tuple[pa.Table, np.ndarray]] = []  # (rows, their partitions) not yet written
        self.pos, self.nbuf, self.rows = 0, 0, 0

    def add(self, table: pa.Table, parts: np.ndarray) -> None:
        if table.num_rows:
            self.buf.append((table.select(self.schema.names).cast(self.schema), np.asarray(parts, np.int64)))
            self.nbuf += table.num_rows
            if self.nbuf >= self.flush_rows:
                self._flush()

    def _flush(self) -> None:
        if not self.buf:
            return
        t = pa.concat_tables([b[0] for b in self.buf])
        parts = np.concatenate([b[1] for b in self.buf])
        self.buf, self.nbuf = [], 0
        order = np.argsort(parts, kind="stable")
        sp = parts[order]
        cuts = np.flatnonzero(np.diff(sp)) + 1
        t = t.take(pa.array(order))
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(sp)]):
            self._segment(int(sp[lo]), t.slice(int(lo), int(hi - lo)))
        self.rows += len(sp)

    def _segment(self, k: int, t: pa.Table) -> None:
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, t.schema, options=_IPC) as w:
            w.write_table(t)
        data = sink.getvalue()
        self.fh.write(data)
        self.index.append((k, self.pos, len(data)))
        self.pos += len(data)

    def close(self) -> int:
        """Finish the run; returns the rows written."""
        self._flush()
        idx = sorted(self.index)  # by partition, then offset: reducers read segments in write order
        sink = io.BytesIO()
        cols = list(zip(*idx)) if idx else ([], [], [])
        with pa.ipc.new_stream(sink, _INDEX) as w:
            w.write_table(pa.table([pa.array(c, pa.int64()) for c in cols], schema=_INDEX))
        data = sink.getvalue()
        self.fh.write(data + struct.pack("<q8s", len(data), _MAGIC))
        self.fh.close()
        self.store.fs.mv(self.tmp, self.final)
        return self.rows

    def abort(self) -> None:
        self.fh.close()
        if self.store.fs.exists(self.tmp):
            self.store.fs.rm(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.close()
        else:
            self.abort()
