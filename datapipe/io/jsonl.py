"""JSONL documents (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``; Dolma's ``.json.gz`` too) -> ReadItems.

One JSON object a line, mapped to document rows by a field mapping (``datapipe.io.textdocs``).
Every line ends in exactly one place: a document; ``rejected`` ``non_document:blank_line`` for an
empty line; ``errored`` ``read:invalid_json`` / ``read:not_an_object`` / ``read:missing_text``
with ``detail`` = ``line N: why`` (1-based line number in the decompressed file); and reading
goes on with the next line. A compressed stream that breaks (corrupt or cut short) ends in one
``errored`` item ``read:corrupt_stream`` that stands for the unreadable rest of the file.

Compression is detected from the first bytes (gzip, zstd), not the name. Plain files can be read
by byte range (``part=(start, stop)``): a line belongs to the range that holds its first byte, so
the ranges of a file together yield every line exactly once.
"""
from __future__ import annotations

import gzip
import io
import json
import zlib
from typing import Iterator

import zstandard

from datapipe.io.paths import open_input
from datapipe.io.readers import ReadItem
from datapipe.io.textdocs import base_row, resolve_fields, text_item

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_COUNT_CHUNK = 1 << 22


def _decompressed(raw: io.BufferedReader) -> tuple[io.BufferedIOBase, bool]:
    """``(stream, compressed)``: a line-readable stream over ``raw`` with gzip/zstd removed."""
    head = raw.peek(4)[:4]
    if head[:2] == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb"), True
    if head == ZSTD_MAGIC:
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        return io.BufferedReader(reader, buffer_size=1 << 20), True
    return raw, False


def _lines_before(path: str, storage_options: dict | None, start: int) -> int:
    """Number of newlines in bytes [0, start) of a plain file (to report absolute line numbers)."""
    n = 0
    with open_input(path, storage_options) as fh:
        left = start
        while left > 0:
            chunk = fh.read(min(_COUNT_CHUNK, left))
            if not chunk:
                break
            n += chunk.count(b"\n")
            left -= len(chunk)
    return n


def read_jsonl(path: str, storage_options: dict | None = None, fields: dict | None = None,
               part: tuple[int, int] | None = None) -> Iterator[ReadItem]:
    """Every line of a JSONL file (or of byte range ``part`` = ``[start, stop)`` of a plain one) as a ReadItem.

    ``fields``: a resolved field mapping (default: the ``dolma`` preset). Raises ValueError if
    ``part`` is given for a compressed file (a compressed stream cannot be entered mid-way).
    """
    fields = fields or resolve_fields("auto", None, "jsonl")
    with open_input(path, storage_options) as fh:
        raw = io.BufferedReader(fh, buffer_size=1 << 20)
        stream, compressed = _decompressed(raw)
        start, stop = part if part else (0, None)
        if compressed and part:
            raise ValueError(f"{path}: a compressed JSONL file cannot be read by byte range {part}")
        pos = 0
        if start > 0:
            # The line holding byte start-1 started in the previous range (or ends exactly there).
            stream.seek(start - 1)
            pos = start - 1 + len(stream.readline())
        first = pos
        line_base: int | None = 0 if first == 0 else None  # lines before `first`, counted on demand
        k = 0  # lines read in this range
        while stop is None or pos < stop:
            try:
                line = stream.readline()
            except (OSError, EOFError, zlib.error, zstandard.ZstdError) as e:
                yield ReadItem(base_row(path, pos), "errored", "read:corrupt_stream",
                               f"after line {k}: {type(e).__name__}: {e}")
                return
            if not line:
                return
            k += 1
            item = _item(line, fields, path, pos)
            if item.status == "errored":
                if line_base is None:
                    line_base = _lines_before(path, storage_options, first)
                item.detail = f"line {line_base + k}: {item.detail}"
            yield item
            pos += len(line)


def _item(line: bytes, fields: dict, path: str, pos: int) -> ReadItem:
    """One line (bytes at offset ``pos``) -> ReadItem; an errored item's ``detail`` says why, not where."""
    body = line.strip()
    if not body:
        return ReadItem(base_row(path, pos, len(line)), "rejected", "non_document:blank_line")
    warnings = None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text, warnings = body.decode("utf-8", errors="replace"), ["invalid_utf8"]
    try:
        obj = json.loads(text)
    except ValueError as e:
        return ReadItem(base_row(path, pos, len(line)), "errored", "read:invalid_json", str(e))
    item = text_item(obj, fields, path, pos, len(line))
    if warnings:
        item.row["warnings"] = warnings
    return item


def byte_ranges(path: str, size: int, split_bytes: int) -> list[tuple[int, int]] | None:
    """Byte ranges ``[(start, stop), ...]`` of about ``split_bytes`` covering a plain JSONL file of ``size`` bytes.

    None when the file is one range: ``split_bytes`` is 0, the file is small, or the name says it
    is compressed (``.gz``, ``.zst``, ``.zstd``: a compressed stream cannot be split).
    """
    if split_bytes <= 0 or size <= split_bytes or path.lower().endswith((".gz", ".zst", ".zstd")):
        return None
    return [(s, min(s + split_bytes, size)) for s in range(0, size, split_bytes)]
