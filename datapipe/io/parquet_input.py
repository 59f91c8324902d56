"""Parquet document sets (FineWeb and the like) -> ReadItems, by row group.

Rows are mapped to document rows by a field mapping (``datapipe.io.textdocs``; default preset
``fineweb``); only the columns the mapping reads are loaded. Every row ends in exactly one place:
a document, or ``errored`` ``read:missing_text`` / ``read:record_too_large`` (over
``max_record_bytes``; ``detail`` = ``row N: why``, N the 0-based row index in the file). A file of 0 bytes is one ``errored`` item ``read:empty_file``; a file whose
footer cannot be read is one ``errored`` item ``read:unreadable_parquet``; a row group that cannot
be decoded makes each of its rows not yet read an ``errored`` item ``read:corrupt_row_group`` (the
footer says how many), and reading goes on with the next row group.

A file can be read by row-group range (``part=(first, stop)``); ``row_group_ranges`` plans them.
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datapipe.io.items import ReadItem, file_row
from datapipe.io.members import MAX_RECORD_BYTES
from datapipe.io.paths import open_input
from datapipe.io.textdocs import base_row, resolve_fields, text_item, top_level

_BATCH_ROWS = 1024
_BATCH_BYTES = 64 << 20


def _batch_rows(rg_meta, cols: list[str] | None) -> int:
    """Rows per decoded batch: about ``_BATCH_BYTES`` of the loaded columns (footer sizes), 1..1024."""
    names = set(cols) if cols is not None else None
    size = sum(rg_meta.column(c).total_uncompressed_size for c in range(rg_meta.num_columns)
               if names is None or rg_meta.column(c).path_in_schema.split(".")[0] in names)
    per_row = max(1, size // max(1, rg_meta.num_rows))
    return int(min(_BATCH_ROWS, max(1, _BATCH_BYTES // per_row)))


def _row_bytes(batch: pa.RecordBatch, cap: int) -> list[int] | None:
    """Each row's size in bytes (strings and binaries by length, other columns by their Arrow
    buffers), or None when the whole batch is within ``cap`` (no row can be over it)."""
    if batch.nbytes <= cap:
        return None
    sizes = [0] * batch.num_rows
    for col in batch.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_binary(col.type) \
                or pa.types.is_large_binary(col.type):
            lengths = pc.fill_null(pc.binary_length(col), 0).to_pylist()
        elif col.nbytes > cap // 2:  # a nested column can hold a large value too
            lengths = [col.slice(i, 1).nbytes for i in range(len(col))]
        else:
            continue
        sizes = [a + b for a, b in zip(sizes, lengths)]
    return sizes


def read_parquet_docs(path: str, storage_options: dict | None = None, fields: dict | None = None,
                      part: tuple[int, int] | None = None, max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[ReadItem]:
    """Every row of a Parquet file (or of row groups ``part`` = ``[first, stop)``) as a ReadItem.

    ``fields``: a resolved field mapping (default: the ``fineweb`` preset). ``max_record_bytes``:
    a row whose loaded cells hold more bytes is ``errored`` ``read:record_too_large`` without being
    converted to Python objects. Rows are decoded in batches of about 64 MiB (footer sizes).
    """
    fields = fields or resolve_fields("auto", None, "parquet")
    with open_input(path, storage_options) as fh:
        if not fh.read(1):
            yield ReadItem(file_row(path), "errored", "read:empty_file", "the file has 0 bytes")
            return
        fh.seek(0)
        try:
            pf = pq.ParquetFile(fh)
            meta = pf.metadata
        except Exception as e:  # noqa: BLE001 - pyarrow raises ArrowInvalid/OSError on a bad footer
            yield ReadItem(base_row(path, 0), "errored", "read:unreadable_parquet", f"{type(e).__name__}: {e}")
            return
        first, stop = part if part else (0, meta.num_row_groups)
        wanted = top_level(fields)
        cols = None if wanted is None else [c for c in pf.schema_arrow.names if c in wanted]
        if cols == []:  # no mapped column at all: read one anyway, so rows are counted (all errored)
            cols = pf.schema_arrow.names[:1]
        base = sum(meta.row_group(i).num_rows for i in range(first))  # row index of the range's first row
        for rg in range(first, stop):
            n = meta.row_group(rg).num_rows
            done = 0
            try:
                for batch in pf.iter_batches(batch_size=_batch_rows(meta.row_group(rg), cols), row_groups=[rg],
                                             columns=cols):
                    sizes = _row_bytes(batch, max_record_bytes)
                    big = [i for i, b in enumerate(sizes) if b > max_record_bytes] if sizes else []
                    # Rows over the cap are never turned into Python objects (a 400 MiB cell stays one
                    # Arrow buffer); the others are, in order.
                    small = batch if not big else batch.filter(pa.array([b <= max_record_bytes for b in sizes]))
                    objs = iter(small.to_pylist())
                    big_set = set(big)
                    for i in range(batch.num_rows):
                        if i in big_set:
                            item = ReadItem(base_row(path, base + done, sizes[i]), "errored", "read:record_too_large",
                                            f"row {base + done}: {sizes[i]} bytes > max_record_bytes {max_record_bytes}")
                        else:
                            item = text_item(next(objs), fields, path, base + done, None)
                            if item.status == "errored":
                                item.detail = f"row {base + done}: {item.detail}"
                        yield item
                        done += 1
            except Exception as e:  # noqa: BLE001 - a damaged row group costs its rows, not the file
                why = f"row group {rg}: {type(e).__name__}: {e}"
                for j in range(done, n):
                    yield ReadItem(base_row(path, base + j), "errored", "read:corrupt_row_group", why)
            base += n


def row_group_ranges(path: str, storage_options: dict | None, split_bytes: int) -> list[tuple[int, int]] | None:
    """Consecutive row-group ranges ``[(first, stop), ...]`` of about ``split_bytes`` compressed bytes each.

    A range holds at least one row group. None when the file is one range (``split_bytes`` 0, a
    small file, or a footer that cannot be read: the reader then reports it as errored).
    """
    if split_bytes <= 0:
        return None
    try:
        with open_input(path, storage_options) as fh:
            meta = pq.ParquetFile(fh).metadata
    except Exception:  # noqa: BLE001 - reported by read_parquet_docs as read:unreadable_parquet
        return None
    ranges, first, acc = [], 0, 0
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        acc += sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
        if acc >= split_bytes:
            ranges.append((first, i + 1))
            first, acc = i + 1, 0
    if first < meta.num_row_groups:
        ranges.append((first, meta.num_row_groups))
    return ranges if len(ranges) > 1 else None
