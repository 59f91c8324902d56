"""Atomic Parquet shard writing: write under a temporary name, rename when complete.

A reader never sees a half-written shard: a task that dies leaves only ``*.tmp-*`` files, which
the next run ignores and overwrites. Works on any fsspec filesystem (rename = ``fs.mv``).
"""
from __future__ import annotations

import json
import uuid

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

COMPRESSION = "zstd"


def fs_and_path(url: str, storage_options: dict | None = None):
    return fsspec.core.url_to_fs(url, **(storage_options or {}))


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/")] + [p.strip("/") for p in parts])


class ShardWriter:
    """Stream record batches into ``path`` atomically. Rows are written only on ``commit()``.

    ``schema`` is the run's fixed Arrow schema; every table written must conform to it.
    Nothing is created if no row was written (``commit`` returns False then).
    """

    def __init__(self, path: str, schema: pa.Schema, storage_options: dict | None = None,
                 row_group_size: int = 50_000):
        self.path = path
        self.schema = schema
        self.fs, self._final = fs_and_path(path, storage_options)
        self._tmp = f"{self._final}.tmp-{uuid.uuid4().hex[:8]}"
        self._writer: pq.ParquetWriter | None = None
        self._fh = None
        self.rows = 0
        self.row_group_size = row_group_size

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self._writer is None:
            self.fs.makedirs(self._final.rsplit("/", 1)[0], exist_ok=True)
            self._fh = self.fs.open(self._tmp, "wb")
            self._writer = pq.ParquetWriter(self._fh, self.schema, compression=COMPRESSION)
        self._writer.write_table(table, row_group_size=self.row_group_size)
        self.rows += table.num_rows

    def commit(self) -> bool:
        """Close and rename into place. Returns True if a file was written."""
        if self._writer is None:
            if self.fs.exists(self._final):  # a rerun produced no rows: drop the stale shard
                self.fs.rm(self._final)
            return False
        self._writer.close()
        self._fh.close()
        self.fs.mv(self._tmp, self._final)
        self._writer = None
        return True

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
                self._fh.close()
            finally:
                if self.fs.exists(self._tmp):
                    self.fs.rm(self._tmp)
            self._writer = None


def write_table_atomic(url: str, table: pa.Table, storage_options: dict | None = None,
                       row_group_size: int = 50_000) -> None:
    """Write ``table`` as one Parquet file at ``url`` in one call (temporary name, then rename).

    The bytes depend only on the table's content and ``row_group_size`` (chunks are combined
    first), so two runs that compute the same rows write identical files.
    """
    fs, final = fs_and_path(url, storage_options)
    fs.makedirs(final.rsplit("/", 1)[0], exist_ok=True)
    tmp = f"{final}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        with fs.open(tmp, "wb") as fh:
            pq.write_table(table.combine_chunks(), fh, compression=COMPRESSION, row_group_size=row_group_size)
        fs.mv(tmp, final)
    except BaseException:
        if fs.exists(tmp):
            fs.rm(tmp)
        raise


def remove_file(url: str, storage_options: dict | None = None) -> bool:
    """Delete ``url`` if it exists; True if something was deleted."""
    fs, path = fs_and_path(url, storage_options)
    try:
        if fs.exists(path):
            fs.rm(path)
            return True
    except FileNotFoundError:
        pass
    return False


def write_json_atomic(url: str, obj, storage_options: dict | None = None) -> None:
    """Write JSON to ``url`` via a temporary name and a rename."""
    fs, path = fs_and_path(url, storage_options)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    with fs.open(tmp, "w") as fh:
        json.dump(obj, fh, indent=2)  # key order matters: stages are in chain order
    fs.mv(tmp, path)


def read_json(url: str, storage_options: dict | None = None):
    """Parsed JSON at ``url``, or None if the file does not exist."""
    fs, path = fs_and_path(url, storage_options)
    if not fs.exists(path):
        return None
    with fs.open(path, "r") as fh:
        return json.load(fh)
