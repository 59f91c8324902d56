"""Atomic writes: every file is written under a temporary name and renamed when complete.

A reader never sees a half-written shard: a task that dies leaves only ``*.tmp-*`` files, which
the phase removes once its writers have returned (``remove_temporaries``), or else the next run. Works on any fsspec filesystem (rename = ``fs.mv``). ``write_table_atomic``
writes whole Parquet files, ``write_json_atomic`` markers and indexes; token shards, which are
streamed with row groups cut by token counts, use ``tokenize.shards.AtomicParquetWriter``.
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


def write_atomic(url: str, write, mode: str = "wb", storage_options: dict | None = None, *, fs=None) -> None:
    """The engine's one atomic writer: ``write(fh)`` fills a temporary file beside ``url``, which is
    then renamed into place; on any error the temporary file is removed and ``url`` left as it
    was. ``fs``: an fsspec filesystem when ``url`` is already a path on it."""
    if fs is None:
        fs, final = fs_and_path(url, storage_options)
    else:
        final = url
    fs.makedirs(final.rsplit("/", 1)[0], exist_ok=True)
    tmp = f"{final}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        with fs.open(tmp, mode) as fh:
            write(fh)
        fs.mv(tmp, final)
    except BaseException:
        if fs.exists(tmp):
            fs.rm(tmp)
        raise


def write_table_atomic(url: str, table: pa.Table, storage_options: dict | None = None,
                       row_group_size: int = 50_000, *, fs=None) -> None:
    """Write ``table`` as one zstd Parquet file at ``url`` in one call (``write_atomic``).

    The bytes depend only on the table's content and ``row_group_size`` (chunks are combined
    first), so two runs that compute the same rows write identical files.
    """
    t = table.combine_chunks()
    write_atomic(url, lambda fh: pq.write_table(t, fh, compression=COMPRESSION, row_group_size=row_group_size),
                 "wb", storage_options, fs=fs)


def remove_temporaries(fs, pattern: str) -> list[str]:
    """Remove the temporary files (``<file>.tmp-*``, as this module's writers and the token-shard
    writer name them) of the files matching the glob ``pattern`` on ``fs``; return the removed paths.

    A worker killed mid-write leaves its temporary file and the retried task writes under a new
    name; call this once every writer of those files has returned (one run holds the output lock)."""
    left = sorted(fs.glob(f"{pattern}.tmp-*"))
    for p in left:
        fs.rm(p)
    return left


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


def write_json_atomic(url: str, obj, storage_options: dict | None = None, *, fs=None,
                      sort_keys: bool = False) -> None:
    """Write ``obj`` as indented JSON to ``url`` (``write_atomic``): markers, ledger, token index.
    Key order is kept (stages are in chain order) unless ``sort_keys``."""
    write_atomic(url, lambda fh: json.dump(obj, fh, indent=2, sort_keys=sort_keys), "w", storage_options, fs=fs)


def read_json(url: str, storage_options: dict | None = None):
    """Parsed JSON at ``url``, or None if the file does not exist."""
    fs, path = fs_and_path(url, storage_options)
    if not fs.exists(path):
        return None
    with fs.open(path, "r") as fh:
        return json.load(fh)
