"""Input readers: turn an input file into document rows, each record accounted for.

A reader yields ``ReadItem``s: a document row (a dict of base-schema fields plus ``payload``), or
a record that is not a document (``rejected`` with a ``non_document:*`` reason: requests,
metadata, non-200 responses, non-HTML content), or a record that could not be read
(``errored`` with a ``read:*`` reason). ``record_type`` is always set so the ledger can count
records by type. New formats register in ``READERS``: WARC/WET/ARC (plain, gzip, WARC-zstd),
JSONL documents (``datapipe.io.jsonl``) and Parquet documents (``datapipe.io.parquet_input``),
the last two with ``record_type="text"`` so the ``extract`` stage passes them through.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from datapipe.io.arc import iter_arc_records
from datapipe.io.items import ReadItem, doc_id, host_of
from datapipe.io.jsonl import read_jsonl
from datapipe.io.members import MAX_RECORD_BYTES, compression_from_name
from datapipe.io.parquet_input import read_parquet_docs
from datapipe.io.paths import open_input
from datapipe.io.warc import WarcRecord, iter_records
from datapipe.io.warc_parts import part_records

HTML_TYPES = {"text/html", "application/xhtml+xml", "application/xml+xhtml"}


def _base_row(rec: WarcRecord, source: str) -> dict:
    rid = rec.record_id
    url = rec.url
    return {
        "id": doc_id(rid or f"{source}:{rec.offset}"),
        "url": url, "host": host_of(url), "source": source,
        "warc_file": os.path.basename(source.rstrip("/")),
        "warc_record_id": rid, "warc_date": rec.headers.get("warc-date"),
        "warc_offset": rec.offset, "record_type": rec.record_type,
        "warnings": list(rec.warnings) or None,
        "truncated": bool(rec.headers.get("warc-truncated")) or None,
    }


def warc_items(rec: WarcRecord, source: str) -> ReadItem:
    """Classify one WARC record as a document, a non-document, or an error."""
    row = _base_row(rec, source)
    if rec.error in ("empty_file", "no_records"):
        row["record_type"] = "file"  # stands for the file, as a whole-file failure does
    if rec.error:
        return ReadItem(row, "errored", f"read:{rec.error}", rec.detail)
    kind = rec.record_type
    if kind == "conversion":  # WET: already text
        row.update(text=rec.block.decode("utf-8", errors="replace"), payload_bytes=len(rec.block),
                   content_type=rec.headers.get("content-type", "text/plain").split(";")[0].strip())
        return ReadItem(row)
    if kind != "response":
        return ReadItem(row, "rejected", f"non_document:{kind}")
    http = rec.http
    if http is None:  # e.g. dns: records
        return ReadItem(row, "rejected", "non_document:not_http")
    row.update(http_status=http.status, content_type=http.mime_type or None, charset=http.charset,
               payload_bytes=len(http.body))
    if http.warnings:
        row["warnings"] = (row["warnings"] or []) + http.warnings
    if http.truncated:
        row["truncated"] = True
    if http.status != 200:
        return ReadItem(row, "rejected", "non_document:http_status")
    mime = http.mime_type
    if mime not in HTML_TYPES and not (not mime and http.body.lstrip()[:200].lower().startswith((b"<!doctype html", b"<html"))):
        return ReadItem(row, "rejected", "non_document:content_type")
    row["payload"] = http.body
    return ReadItem(row)


def read_warc(path: str, storage_options: dict | None = None, fields: dict | None = None,
              part: tuple[int, int] | None = None, max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[ReadItem]:
    """Every record of a WARC/WET file (plain, gzip or WARC-zstd) as a ReadItem.

    ``fields`` is ignored (WARC has one layout). ``part``: a nominal byte range of a gzip file; the
    records whose gzip member starts in it, cut at member boundaries (``datapipe.io.warc_parts``).
    ``max_record_bytes``: records whose Content-Length (or decoded HTTP body) is larger are
    errored ``read:record_too_large`` and skipped while decompressing (see datapipe.io.warc_tolerant).
    """
    def opener():
        return open_input(path, storage_options)
    if part is not None:
        from fsspec.core import url_to_fs

        if compression_from_name(path) != "gzip":
            raise ValueError(f"{path}: only gzip WARC files are split into parts")
        fs, local = url_to_fs(path, **(storage_options or {}))
        records = part_records(opener, fs.size(local), tuple(part), max_record_bytes)
    else:
        records = iter_records(opener, max_record_bytes=max_record_bytes, compression=compression_from_name(path))
    for rec in records:
        yield warc_items(rec, path)


def read_arc(path: str, storage_options: dict | None = None, fields: dict | None = None,
             part: tuple[int, int] | None = None, max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[ReadItem]:
    """Every record of an ARC file (plain or gzip) as a ReadItem: see ``datapipe.io.arc``.
    ``fields`` is ignored; ``part`` must be None (ARC files are read whole)."""
    if part is not None:
        raise ValueError(f"{path}: ARC files are not split into parts")
    for rec in iter_arc_records(lambda: open_input(path, storage_options), max_record_bytes):
        yield warc_items(rec, path)


#: format name -> reader function(path, storage_options, fields=None, part=None, max_record_bytes=...)
#: -> Iterator[ReadItem]. ``fields``: resolved field mapping (text formats); ``part``: (start, stop)
#: byte range or row groups; ``max_record_bytes``: cap on one record's decompressed size.
READERS: dict[str, Callable[..., Iterator[ReadItem]]] = {
    "warc": read_warc, "wet": read_warc, "arc": read_arc, "jsonl": read_jsonl, "parquet": read_parquet_docs}
#: Formats whose records are already text (``record_type="text"``) and take a field mapping.
TEXT_FORMATS = ("jsonl", "parquet")


def detect_format(path: str) -> str:
    """Format from the file name, compression suffix (``.gz``, ``.zst``, ``.zstd``) removed.

    ``.warc``, ``.wet``, ``.wat`` -> ``warc``; ``.arc`` -> ``arc``; ``.jsonl``, ``.json`` (Dolma names
    JSONL ``*.json.gz``), ``.ndjson`` -> ``jsonl``; ``.parquet`` -> ``parquet``; anything else -> ``warc``.
    """
    name = path.lower().rsplit("/", 1)[-1]
    for suffix in (".gz", ".zst", ".zstd"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    ext = name.rsplit(".", 1)[-1] if "." in name else ""
    if ext in ("warc", "wet", "wat"):
        return "warc"
    if ext in ("jsonl", "json", "ndjson"):
        return "jsonl"
    if ext in READERS:
        return ext
    return "warc"


def read_input(path: str, fmt: str = "auto", storage_options: dict | None = None,
               fields: dict | None = None, part: tuple[int, int] | None = None,
               max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[ReadItem]:
    """Read ``path`` (or its ``part``) with the reader for ``fmt`` (``auto`` = from the file name).

    ``max_record_bytes`` (bytes, default 32 MiB: ``inputs.max_record_bytes``) caps one record's
    decompressed size; a larger record is one ``errored`` ``read:record_too_large`` item and is
    never held in memory. A file of 0 bytes is one ``errored`` ``read:empty_file`` item. A file
    that cannot be opened raises (FileNotFoundError, PermissionError, ...): its task fails, is
    retried, and the runner errors the file as a whole (``task:exception:<Type>``, one ledger row,
    listed among the failed files; see datapipe.engine.task_failure). Raises ValueError for an unknown format.
    """
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt not in READERS:
        raise ValueError(f"unknown input format {fmt!r}; known: {', '.join(sorted(READERS))}")
    return READERS[fmt](path, storage_options, fields, part, max_record_bytes=max_record_bytes)
