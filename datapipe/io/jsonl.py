"""JSONL documents (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``; Dolma's ``.json.gz`` too) -> ReadItems.

One JSON object a line, mapped to document rows by a field mapping (``datapipe.io.textdocs``).
Every line ends in exactly one place: a document; ``rejected`` ``non_document:blank_line`` for an
empty line; ``errored`` ``read:invalid_json`` (also for nesting deeper than Python's recursion
limit) / ``read:not_an_object`` / ``read:missing_text`` / ``read:bad_id`` (an id that is an object
or a list) with ``detail`` = ``line N: why`` (1-based line number in the decompressed file);
``errored`` ``read:record_too_large`` for a line longer than ``max_record_bytes`` (skipped while
reading, never held); and reading goes on with the next line. A lone surrogate escape
(``"\\ud800"``, valid JSON but not Unicode text) becomes U+FFFD in the document, which carries the
warning ``lone_surrogate`` (bytes that are not UTF-8: U+FFFD and ``invalid_utf8``).

Compressed files are read member by member (``datapipe.io.members``): a damaged gzip member or
zstd frame, or bytes between members that start none, is one ``errored`` ``read:corrupt_stream``
item whose ``detail`` names the damage and its compressed byte range, and reading goes on with
the next member; the line the damage cut is part of that item. A stream cut short ends in such an
item too: never a silent stop. A file of 0 bytes is one ``errored`` ``read:empty_file`` item.

Compression is detected from the first bytes (gzip, zstd), else from the name. Plain files can be
read by byte range (``part=(start, stop)``): a line belongs to the range that holds its first
byte, so the ranges of a file together yield every line exactly once.
"""
from __future__ import annotations

import io
import json
import re
from typing import Iterator

from datapipe.io.items import ReadItem, file_row
from datapipe.io.members import (
    MAX_RECORD_BYTES,
    Damage,
    Decoded,
    RawInput,
    compression_from_name,
    sniff,
)
from datapipe.io.paths import open_input
from datapipe.io.textdocs import base_row, resolve_fields, text_item

_COUNT_CHUNK = 1 << 22
_CHUNK = 1 << 20
# A \\uD800-\\uDFFF escape: json.loads joins pairs but leaves a lone one in the str, which no
# UTF-8 writer (Parquet, zstd JSONL) accepts.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile("[\ud800-\udfff]")


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
               part: tuple[int, int] | None = None, max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[ReadItem]:
    """Every line of a JSONL file (or of byte range ``part`` = ``[start, stop)`` of a plain one) as a ReadItem.

    ``fields``: a resolved field mapping (default: the ``dolma`` preset). ``max_record_bytes``:
    longest line kept, bytes (decompressed). Raises ValueError if ``part`` is given for a
    compressed file (a compressed stream cannot be entered mid-way).
    """
    fields = fields or resolve_fields("auto", None, "jsonl")
    with open_input(path, storage_options) as fh:
        head = fh.read(64)
        fh.seek(0)
        kind = sniff(head) or compression_from_name(path) or "plain"
        if kind in ("gzip", "zstd"):
            if part:
                raise ValueError(f"{path}: a compressed JSONL file cannot be read by byte range {part}")
            if not head:
                yield ReadItem(file_row(path), "errored", "read:empty_file", "the file has 0 bytes")
                return
            yield from _read_compressed(path, Decoded(RawInput(fh), kind), fields, max_record_bytes)
            return
        if not head and not (part and part[0] > 0):
            yield ReadItem(file_row(path), "errored", "read:empty_file", "the file has 0 bytes")
            return
        yield from _read_plain(path, storage_options, io.BufferedReader(fh, buffer_size=1 << 20),
                               fields, part, max_record_bytes)


def _read_plain(path: str, storage_options: dict | None, stream: io.BufferedReader, fields: dict,
                part: tuple[int, int] | None, cap: int) -> Iterator[ReadItem]:
    start, stop = part if part else (0, None)
    pos = 0
    if start > 0:
        # The line holding byte start-1 started in the previous range (or ends exactly there).
        stream.seek(start - 1)
        pos = start - 1 + _skip_line(stream, stream.readline(_CHUNK))
    first = pos
    line_base: int | None = 0 if first == 0 else None  # lines before `first`, counted on demand
    k = 0  # lines read in this range
    while stop is None or pos < stop:
        line = stream.readline(cap + 1)
        if not line:
            return
        k += 1
        if len(line) > cap:
            size = _skip_line(stream, line)
            item = ReadItem(base_row(path, pos, size), "errored", "read:record_too_large",
                            f"{size} bytes > max_record_bytes {cap}")
        else:
            size = len(line)
            item = _item(line, fields, path, pos)
        if item.status == "errored":
            if line_base is None:
                line_base = _lines_before(path, storage_options, first)
            item.detail = f"line {line_base + k}: {item.detail}"
        yield item
        pos += size


def _skip_line(stream: io.BufferedReader, got: bytes) -> int:
    """Read on to the end of the line whose first bytes are ``got``, keeping nothing; its length."""
    size = len(got)
    while got and not got.endswith(b"\n"):
        got = stream.readline(_CHUNK)
        size += len(got)
    return size


def _read_compressed(path: str, dec: Decoded, fields: dict, cap: int) -> Iterator[ReadItem]:
    """Lines of a decompressed stream; damage is one ``read:corrupt_stream`` item, then reading goes on."""
    buf = bytearray()
    pos = 0            # decompressed offset of buf[0]
    k = 0              # lines read
    skipping = 0       # > 0: bytes of an over-cap line seen so far (not kept)
    while True:
        try:
            data = dec.read(_CHUNK)
        except Damage as d:
            lost = skipping + len(buf)
            where = f"compressed bytes {d.start}-{d.end if d.end is not None else '?'}"
            yield ReadItem(base_row(path, pos), "errored", "read:corrupt_stream",
                           f"line {k + 1}: {d.reason} at {where}"
                           + (f" ({d.detail})" if d.detail else "")
                           + (f"; the {lost} bytes of the line before it are part of it" if lost else ""))
            k += 1
            pos += lost
            buf.clear()
            skipping = 0
            continue
        if not data:
            if skipping or buf:
                k += 1
                yield _line_item(bytes(buf), skipping, fields, path, pos, k, cap)
            return
        start = 0
        nl = data.find(b"\n")
        while nl >= 0:
            piece = data[start:nl + 1]
            if skipping:
                skipping += len(piece)
            else:
                buf += piece
            k += 1
            yield _line_item(bytes(buf), skipping, fields, path, pos, k, cap)
            pos += skipping or len(buf)
            buf.clear()
            skipping = 0
            start = nl + 1
            nl = data.find(b"\n", start)
        rest = data[start:]
        if skipping:
            skipping += len(rest)
        else:
            buf += rest
            if len(buf) > cap:  # an over-cap line: count its bytes, keep none
                skipping = len(buf)
                buf.clear()


def _line_item(line: bytes, skipped: int, fields: dict, path: str, pos: int, k: int, cap: int) -> ReadItem:
    if skipped or len(line) > cap:
        size = skipped or len(line)
        return ReadItem(base_row(path, pos, size), "errored", "read:record_too_large",
                        f"line {k}: {size} bytes > max_record_bytes {cap}")
    item = _item(line, fields, path, pos)
    if item.status == "errored":
        item.detail = f"line {k}: {item.detail}"
    return item


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
        if _SURROGATE_ESCAPE.search(body):
            obj, lone = _replace_surrogates(obj)
            if lone:
                warnings = (warnings or []) + ["lone_surrogate"]
        item = text_item(obj, fields, path, pos, len(line))
    except ValueError as e:
        return ReadItem(base_row(path, pos, len(line)), "errored", "read:invalid_json", str(e))
    except RecursionError:  # json's C parser (and our walks) stop at the interpreter's recursion limit
        return ReadItem(base_row(path, pos, len(line)), "errored", "read:invalid_json",
                        "nested deeper than the JSON parser allows")
    if warnings:
        item.row["warnings"] = warnings
    return item


def _replace_surrogates(obj):
    """``obj`` with every lone surrogate in its strings and keys replaced by U+FFFD; (obj, any replaced)."""
    if isinstance(obj, str):
        new, n = _SURROGATE.subn("\ufffd", obj)
        return new, n > 0
    if isinstance(obj, list):
        pairs = [_replace_surrogates(v) for v in obj]
        return [v for v, _ in pairs], any(f for _, f in pairs)
    if isinstance(obj, dict):
        out, hit = {}, False
        for k, v in obj.items():
            (k2, fk), (v2, fv) = _replace_surrogates(k), _replace_surrogates(v)
            out[k2] = v2
            hit = hit or fk or fv
        return out, hit
    return obj, False


def byte_ranges(path: str, size: int, split_bytes: int) -> list[tuple[int, int]] | None:
    """Byte ranges ``[(start, stop), ...]`` of about ``split_bytes`` covering a plain JSONL file of ``size`` bytes.

    None when the file is one range: ``split_bytes`` is 0, the file is small, or the name says it
    is compressed (``.gz``, ``.zst``, ``.zstd``: a compressed stream cannot be split).
    """
    if split_bytes <= 0 or size <= split_bytes or path.lower().endswith((".gz", ".zst", ".zstd")):
        return None
    return [(s, min(s + split_bytes, size)) for s in range(0, size, split_bytes)]
