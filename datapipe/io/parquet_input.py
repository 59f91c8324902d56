"""Parquet document sets (FineWeb and the like) -> ReadItems, by row group.

Rows are mapped to document rows by a field mapping (``datapipe.io.textdocs``; default preset
``fineweb``); only the columns the mapping reads are loaded. Every row ends in exactly one place:
a document, or ``errored`` ``read:missing_text`` (``detail`` = ``row N: why``, N the 0-based row
index in the file). A file of 0 bytes is one ``errored`` item ``read:empty_file``; a file whose
footer cannot be read is one ``errored`` item ``read:unreadable_parquet``; a row group that cannot
be decoded makes each of its rows not yet read an ``errored`` item ``read:corrupt_row_group`` (the
footer says how many), and reading goes on with the next row group.

A file can be read by row-group range (``part=(first, stop)``); ``row_group_ranges`` plans them.
"""
from __future__ import annotations

from typing import Iterator

import pyarrow.parquet as pq

from datapipe.io.paths import open_input
from datapipe.io.readers import ReadItem, file_row
from datapipe.io.textdocs import base_row, resolve_fields, text_item, top_level

_BATCH_ROWS = 1024


def read_parquet_docs(path: str, storage_options: dict | None = None, fields: dict | None = None,
                      part: tuple[int, int] | None = None) -> Iterator[ReadItem]:
    """Every row of a Parquet file (or of row groups ``part`` = ``[first, stop)``) as a ReadItem.

    ``fields``: a resolved field mapping (default: the ``fineweb`` preset).
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
                for batch in pf.iter_batches(batch_size=_BATCH_ROWS, row_groups=[rg], columns=cols):
                    for obj in batch.to_pylist():
                        item = text_item(obj, fields, path, base + done, None)
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
