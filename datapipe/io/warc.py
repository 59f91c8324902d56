"""Reading WARC/WET files into records, tolerant of the damage found in real crawls.

Two readers share one output type (``WarcRecord``, ``datapipe.io.warc_record``):

* the fast path, FastWARC 2.x (``fastwarc.warc.ArchiveIterator``), for gzip files with one
  record a member (as Common Crawl and wget write them), while the file is well formed;
* a streaming, tolerant parser of ours (``iter_records_tolerant``, ``datapipe.io.warc_tolerant``:
  damaged members, lenient headers, bounded memory), which takes over from the last record the
  fast path gave (``iter_records``). FastWARC silently returns an empty payload for a
  record whose gzip member is cut (case B01), stops at a header line without a colon (B07) or a
  wrong Content-Length (B02), and, worst, ends its iteration without an error at a zero-length
  gzip member or at a member cut within its first ~63 bytes, so the records after it would vanish.
  The fast path's end is therefore never trusted: the tolerant parser re-reads the last record
  the fast path saw and everything after it, so whatever FastWARC skipped at the end is read.
  Plain (uncompressed) files always take the tolerant parser: there FastWARC merges a header cut
  short with the next record's header, losing a record without an error. WARC-zstd files
  (``.warc.zst``) always take it too (FastWARC 2.0.1 fails on them).

Every record of the file comes out exactly once, either parsed or with ``error`` set (see
``datapipe.io.warc_tolerant`` for how damage is accounted for).
"""
from __future__ import annotations

import zlib
from typing import BinaryIO, Callable, ContextManager, Iterator

from datapipe.io.members import BLANK, MAX_RECORD_BYTES, sniff
from datapipe.io.warc_record import (
    CHUNK,
    NEXT_RECORD,
    WarcRecord,
    finish_record,
    parse_header_block,
)
from datapipe.io.warc_tolerant import (
    MAX_HEADER_BYTES,
    SKIP_FACTOR,
    iter_records_tolerant,
)

# Re-exported: callers import these from here.
__all__ = ["MAX_HEADER_BYTES", "MAX_RECORD_BYTES", "SKIP_FACTOR", "FallbackNeeded", "WarcRecord",
           "finish_record", "iter_records", "iter_records_fast", "iter_records_tolerant"]


class FallbackNeeded(Exception):
    """The fast path met something it cannot represent faithfully; the tolerant parser takes over."""


# ---------------------------------------------------------------- fast path

def iter_records_fast(fh: BinaryIO, max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[WarcRecord]:
    """FastWARC iteration. Raises ``FallbackNeeded`` on anything it cannot represent faithfully,
    and at a record whose Content-Length exceeds ``max_record_bytes`` (its block is never read).

    The end of this iteration proves nothing (FastWARC stops silently at some damage): use
    ``iter_records``, which checks it.
    """
    from fastwarc.warc import ArchiveIterator

    if sniff(fh.read(4)) == "zstd":
        raise FallbackNeeded("WARC-zstd")  # FastWARC 2.0.1 cannot read it (OverflowError)
    fh.seek(0)
    try:
        for r in ArchiveIterator(fh, parse_http=False, auto_decode="none"):
            items = r.headers.items()
            headers = {k.lower(): v for k, v in items}
            if len(headers) < len(items) and _repeated_unique(items):
                raise FallbackNeeded("repeated header")  # a cut header merged with the next record's
            cl = headers.get("content-length", "")
            if not cl.strip().isdigit():
                raise FallbackNeeded("content-length")
            if int(cl) > max_record_bytes:
                raise FallbackNeeded("record_too_large")
            block = r.reader.read()
            if len(block) != int(cl):
                raise FallbackNeeded("short block")
            if b"WARC/" in block and NEXT_RECORD.search(block):
                raise FallbackNeeded("record start inside block")  # a cut record swallowing the next
            yield WarcRecord(r.stream_pos, headers, block)
    except FallbackNeeded:
        raise
    except Exception as e:  # FastWARC raises OSError/ValueError on damaged input
        raise FallbackNeeded(str(e)) from e


_UNIQUE = frozenset({"warc-record-id", "warc-type", "content-length", "warc-date"})


def _repeated_unique(items) -> bool:
    """True if a header the WARC spec allows once per record occurs twice."""
    seen = set()
    for k, _ in items:
        k = k.lower()
        if k in _UNIQUE and k in seen:
            return True
        seen.add(k)
    return False


def _same_record(a: WarcRecord, b: WarcRecord) -> bool:
    return a.offset == b.offset and (a.record_id or "").strip() == (b.record_id or "").strip()


def iter_records(open_stream: Callable[[], ContextManager[BinaryIO]], prefer_fast: bool = True,
                 max_record_bytes: int = MAX_RECORD_BYTES, compression: str | None = None) -> Iterator[WarcRecord]:
    """Yield every record of the file that ``open_stream()`` opens (a seekable binary stream).

    The fast path (gzip files whose members hold one record each) holds back the last record it
    read; when it ends, for whatever reason, the tolerant parser reads from that record's offset
    to the end of the file, so a record FastWARC skipped at the end, or damage it could not see,
    is still read or reported. Where the held offset is not a member start (records sharing one
    gzip member), the tolerant parser reads the whole file and the records the fast path already
    gave are skipped, in order.
    ``compression``: see ``iter_records_tolerant``. A file of 0 bytes is one ``empty_file`` record;
    a file whose bytes hold no record at all (empty gzip members, padding) one ``no_records`` record.
    """
    with open_stream() as fh:
        head = fh.read(64)
        if not head:
            yield WarcRecord(0, error="empty_file", detail="the file has 0 bytes")
            return
        kind = sniff(head)
        fh.seek(0)
        emitted: list[str | None] = []
        last_offset = 0
        held = None  # damage is often noticed only at the next record (B02)
        # Plain files take the tolerant parser: FastWARC merges a cut header with the next record's.
        # FastWARC's offsets are member offsets only where each member holds one record.
        if prefer_fast and kind == "gzip" and _one_record_members(fh):
            fh.seek(0)
            try:
                for rec in iter_records_fast(fh, max_record_bytes):
                    if held is not None:
                        if rec.offset <= held.offset:
                            raise FallbackNeeded("records share a member")
                        emitted.append(held.record_id)
                        last_offset = held.offset
                        yield finish_record(held, max_record_bytes)
                    held = rec
            except FallbackNeeded:
                pass
        n = len(emitted)
        for rec in _tolerant_tail(fh, held, emitted, last_offset, max_record_bytes, compression):
            n += 1
            yield finish_record(rec, max_record_bytes)
        if n == 0:  # bytes, but not one record, not even a damaged one: never a silent empty file
            size = fh.seek(0, 2)
            yield WarcRecord(0, error="no_records", detail=f"the file's {size} bytes hold no WARC record "
                             "(only empty compressed members or padding)")


def _tolerant_tail(fh: BinaryIO, held: WarcRecord | None, emitted: list[str | None], last_offset: int,
                   cap: int, compression: str | None) -> Iterator[WarcRecord]:
    """The tolerant parser's records from the fast path's held record on (that one included), or,
    where its offset is not a member start, from the file's start without the records already given."""
    if held is not None:
        fh.seek(held.offset)
        if fh.read(3) == b"\x1f\x8b\x08":
            fh.seek(held.offset)
            tol = iter_records_tolerant(fh, held.offset, cap, compression)
            first = next(tol, None)
            if first is not None and _same_record(first, held):
                yield first
                yield from tol
                return
            tol.close()
    fh.seek(0)
    yield from _skip_emitted(iter_records_tolerant(fh, 0, cap, compression), emitted, last_offset)


def _one_record_members(fh: BinaryIO) -> bool:
    """True unless the first gzip member plainly holds more than its first record (a whole file
    compressed as one member). Reads at most ``CHUNK`` decompressed bytes."""
    d = zlib.decompressobj(31)
    out = bytearray()
    data = b""
    try:
        while not d.eof and len(out) < CHUNK:
            if not data:
                data = fh.read(1 << 16)
                if not data:
                    break
            out += d.decompress(data, CHUNK - len(out))
            data = d.unconsumed_tail
    except zlib.error:
        return True  # damaged: the fast path fails on it and the tolerant parser takes over
    end = out.find(b"\r\n\r\n")
    headers, _ = parse_header_block(bytes(out[:end])) if end >= 0 else ({}, [])
    cl = headers.get("content-length", "").strip()
    if not cl.isdigit():
        return True
    rest = out[end + 4 + int(cl):]
    return not rest.strip(BLANK) if d.eof else end + 4 + int(cl) >= len(out)


def _skip_emitted(records: Iterator[WarcRecord], emitted: list[str | None], last_offset: int) -> Iterator[WarcRecord]:
    """``records`` without its first ``len(emitted)`` (already given, same record ids in order).
    Offsets never go below ``last_offset`` (the last given), so the file order holds."""
    k = 0
    for rec in records:
        if k < len(emitted) and rec.record_id == emitted[k]:
            k += 1
            continue
        k = len(emitted)  # out of step: give everything from here rather than lose a record
        rec.offset = max(rec.offset, last_offset)
        yield rec
