"""Reading WARC/WET files into records, tolerant of the damage found in real crawls.

Two readers share one output type (``WarcRecord``):

* the fast path, FastWARC 2.x (``fastwarc.warc.ArchiveIterator``), used while the file is
  well formed;
* a strict, tolerant fallback of ours, used for the whole file as soon as FastWARC raises or
  yields a record it could not parse (FastWARC silently returns an empty payload for a record
  whose gzip member is cut (case B01), and stops at a header line without a colon (B07) or a
  wrong Content-Length (B02); warcio loses B01 and B07 as well). The fallback splits gzip
  members itself with ``zlib`` (so a truncated or corrupt member costs one record, and its
  offset is known), parses headers leniently, and resynchronises on the next ``WARC/1.`` line.
  WARC-zstd files (``.warc.zst``, with or without a dictionary frame) are split into frames the
  same way (``datapipe.io.warc_zstd``); they always take this path (FastWARC 2.0.1 fails on them).

Every record of the file comes out exactly once, either parsed or with ``error`` set, so the
ledger can account for it. Offsets are byte offsets in the file as stored (compressed).
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

from datapipe.io.http import HttpResponse, parse_http_response
from datapipe.io.warc_zstd import is_zstd, zstd_frames

GZIP_MAGIC = b"\x1f\x8b"
_WARC_START = re.compile(rb"(?:^|\r?\n)WARC/\d\.\d+\r?\n")
_READ_CHUNK = 1 << 20


class FallbackNeeded(Exception):
    """The fast path met something it cannot represent faithfully; re-read with the tolerant parser."""


@dataclass
class WarcRecord:
    """One WARC record. ``headers`` keys are lower-cased WARC header names.

    ``block`` is the record's content block (bytes); for ``response`` records ``http`` holds the
    parsed HTTP response (status, headers, body with transfer/content coding removed).
    ``error`` is a short reason when the record could not be read; ``warnings`` lists recoverable
    problems (e.g. ``content_length_mismatch``).
    """

    offset: int
    headers: dict[str, str] = field(default_factory=dict)
    block: bytes = b""
    http: HttpResponse | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def record_type(self) -> str:
        return self.headers.get("warc-type", "unknown").strip().lower() or "unknown"

    @property
    def url(self) -> str | None:
        u = self.headers.get("warc-target-uri")
        return u.strip().strip("<>") if u else None

    @property
    def record_id(self) -> str | None:
        return self.headers.get("warc-record-id")


# ---------------------------------------------------------------- tolerant parser

def _gzip_members(data_iter: Iterator[bytes]) -> Iterator[tuple[int, bytes, str | None]]:
    """Yield ``(compressed_offset, member_bytes, error)`` for each gzip member of a stream.

    A member cut short yields its partial bytes with ``error='truncated_gzip_member'``; a corrupt
    one yields ``error='corrupt_gzip_member'`` and reading resumes at the next gzip magic number.
    """
    buf = b""
    offset = 0
    exhausted = False

    def fill() -> bool:
        nonlocal buf, exhausted
        if exhausted:
            return False
        chunk = next(data_iter, b"")
        if not chunk:
            exhausted = True
            return False
        buf += chunk
        return True

    while True:
        if not buf and not fill():
            return
        if len(buf) < 2 and not exhausted:
            fill()
            continue
        if not buf.startswith(GZIP_MAGIC):
            # Garbage between members: skip to the next magic, or stop.
            j = buf.find(GZIP_MAGIC, 1)
            while j < 0 and fill():
                j = buf.find(GZIP_MAGIC, 1)
            if j < 0:
                if buf.strip(b"\x00\r\n \t"):
                    yield offset, b"", "garbage_after_last_member"
                return
            yield offset, b"", "garbage_between_members"
            offset += j
            buf = buf[j:]
            continue
        d = zlib.decompressobj(31)
        out = []
        pos = 0
        err = None
        while True:
            if pos >= len(buf):
                if not fill():
                    err = "truncated_gzip_member"
                    break
            try:
                out.append(d.decompress(buf[pos:]))
            except zlib.error:
                err = "corrupt_gzip_member"
                break
            if d.eof:
                used = len(buf) - len(d.unused_data)
                break
            pos = len(buf)
        if err == "corrupt_gzip_member":
            yield offset, b"".join(out), err
            j = buf.find(GZIP_MAGIC, 2)
            while j < 0 and fill():
                j = buf.find(GZIP_MAGIC, 2)
            if j < 0:
                return
            offset += j
            buf = buf[j:]
            continue
        if err:
            yield offset, b"".join(out), err
            return
        yield offset, b"".join(out), None
        offset += used
        buf = buf[used:]


def _parse_header_block(raw: bytes) -> tuple[dict[str, str], list[str]]:
    """Lenient ``Name: value`` parsing. Returns headers and the malformed lines found."""
    headers: dict[str, str] = {}
    bad = []
    for line in raw.split(b"\n")[1:]:  # first line is the version
        line = line.rstrip(b"\r")
        if not line:
            continue
        if line[:1] in (b" ", b"\t") and headers:  # folded continuation line
            last = next(reversed(headers))
            headers[last] += " " + line.strip().decode("utf-8", "replace")
            continue
        name, sep, value = line.partition(b":")
        if not sep:
            bad.append(line.decode("utf-8", "replace"))
            continue
        headers.setdefault(name.strip().decode("utf-8", "replace").lower(), value.strip().decode("utf-8", "replace"))
    return headers, bad


def _find_record_start(buf: bytes, start: int) -> int:
    """Offset of the next ``WARC/x.y`` version line at or after ``start`` (-1 if none)."""
    m = _WARC_START.search(buf, start)
    if not m:
        return -1
    s = m.start()
    return s if buf[s:s + 5] == b"WARC/" else buf.index(b"WARC/", s)


def _records_in(buf: bytes, base_offset: int, per_member: bool) -> Iterator[WarcRecord]:
    """Parse the records in one decompressed buffer (a gzip member, or a whole plain file)."""
    pos = 0
    n = len(buf)
    while pos < n:
        # Skip the blank lines that separate records.
        while pos < n and buf[pos:pos + 1] in (b"\r", b"\n", b" ", b"\t", b"\x00"):
            pos += 1
        if pos >= n:
            return
        rec_off = base_offset if per_member else base_offset + pos
        if buf[pos:pos + 5] != b"WARC/":
            nxt = _find_record_start(buf, pos)
            yield WarcRecord(rec_off, error="no_warc_version_line")
            if nxt < 0:
                return
            pos = nxt
            continue
        hdr_end = buf.find(b"\r\n\r\n", pos)
        sep_len = 4
        alt = buf.find(b"\n\n", pos)
        if hdr_end < 0 or (0 <= alt < hdr_end):
            hdr_end, sep_len = alt, 2
        if hdr_end < 0:
            yield WarcRecord(rec_off, error="truncated_warc_header")
            return
        headers, bad = _parse_header_block(buf[pos:hdr_end])
        body_start = hdr_end + sep_len
        rec = WarcRecord(rec_off, headers)
        cl_raw = headers.get("content-length")
        cl = int(cl_raw) if cl_raw is not None and cl_raw.strip().isdigit() else None
        if bad or cl is None:
            rec.error = ("malformed_warc_header" if bad else
                         "missing_content_length" if cl_raw is None else "invalid_content_length")
            nxt = _find_record_start(buf, body_start)
            yield rec
            if nxt < 0:
                return
            pos = nxt
            continue
        end = body_start + cl
        if end > n:
            rec.block = buf[body_start:]
            rec.error = "truncated_record"
            yield rec
            return
        # A well-formed record is followed by CRLF CRLF and the next record (or the end).
        after = buf[end:end + 4]
        if after.strip(b"\r\n") == b"" or (per_member and end == n):
            rec.block = buf[body_start:end]
            pos = end
        else:
            nxt = _find_record_start(buf, end)
            prev = buf.rfind(b"WARC/", body_start, end)
            if nxt < 0 and per_member:
                nxt = n
            if nxt >= 0 and (nxt - end) < 64:
                # Content-Length a few bytes short: keep the bytes up to the separator.
                rec.block = buf[body_start:nxt].rstrip(b"\r\n")
                rec.warnings.append("content_length_mismatch")
                pos = nxt
            elif prev > body_start and buf[prev - 1:prev] == b"\n":
                # Content-Length too long: it swallowed the next record; cut at its start.
                rec.block = buf[body_start:prev].rstrip(b"\r\n")
                rec.warnings.append("content_length_mismatch")
                pos = prev
            else:
                rec.block = buf[body_start:end]
                rec.warnings.append("missing_record_separator")
                pos = end if nxt < 0 else nxt
        yield rec


def iter_records_tolerant(fh: BinaryIO) -> Iterator[WarcRecord]:
    """Yield every record of a WARC/WET stream (plain, gzip or WARC-zstd; per-record or whole-file members)."""
    head = fh.read(4)
    chunks = _chunks(fh, head)
    if head[:2] == GZIP_MAGIC or is_zstd(head):
        members = _gzip_members(chunks) if head[:2] == GZIP_MAGIC else zstd_frames(chunks)
        for off, member, err in members:
            if err and not member.strip():
                yield WarcRecord(off, error=err)
                continue
            got_any = False
            for rec in _records_in(member, off, per_member=True):
                got_any = True
                if err and rec.error is None:
                    # Part of a damaged member: never emit a partial page as if it were whole.
                    rec.error = err
                yield rec
            if err and not got_any:
                yield WarcRecord(off, error=err)
    else:
        data = b"".join(chunks)
        yield from _records_in(data, 0, per_member=False)


def _chunks(fh: BinaryIO, head: bytes) -> Iterator[bytes]:
    if head:
        yield head
    while True:
        c = fh.read(_READ_CHUNK)
        if not c:
            return
        yield c


def finish_record(rec: WarcRecord) -> WarcRecord:
    """Parse the HTTP part of response records (in place); damaged HTTP becomes ``rec.error``."""
    # Parse by content, not URI scheme: some crawls use non-http target URIs for HTTP payloads.
    if rec.error is None and rec.record_type == "response" and (
            rec.block[:5] == b"HTTP/" or (rec.url or "").startswith(("http:", "https:"))):
        rec.http = parse_http_response(rec.block)
        if rec.http.error:
            rec.error = rec.http.error
    return rec


# ---------------------------------------------------------------- fast path

def iter_records_fast(fh: BinaryIO) -> Iterator[WarcRecord]:
    """FastWARC iteration. Raises ``FallbackNeeded`` on anything it cannot represent faithfully."""
    from fastwarc.warc import ArchiveIterator

    if is_zstd(fh.read(4)):
        raise FallbackNeeded("WARC-zstd")  # FastWARC 2.0.1 cannot read it (OverflowError)
    fh.seek(0)
    try:
        for r in ArchiveIterator(fh, parse_http=False, auto_decode="none"):
            headers = {k.lower(): v for k, v in r.headers.items()}
            cl = headers.get("content-length", "")
            if not cl.strip().isdigit():
                raise FallbackNeeded("content-length")
            block = r.reader.read()
            if len(block) != int(cl):
                raise FallbackNeeded("short block")
            yield WarcRecord(r.stream_pos, headers, block)
    except FallbackNeeded:
        raise
    except Exception as e:  # FastWARC raises OSError/ValueError on damaged input
        raise FallbackNeeded(str(e)) from e


def iter_records(open_stream, prefer_fast: bool = True) -> Iterator[WarcRecord]:
    """Yield every record of the file that ``open_stream()`` opens (a fresh binary stream per call).

    The fast path holds back one record: if it has to give up after some records, the tolerant parser
    re-reads the file and the records already yielded are skipped by offset, so each record is
    yielded once.
    """
    done: set[int] = set()
    if prefer_fast:
        held = None  # one record held back: damage is often noticed only at the next record (B02)
        try:
            with open_stream() as fh:
                for rec in iter_records_fast(fh):
                    if held is not None:
                        done.add(held.offset)
                        yield finish_record(held)
                    held = rec
            if held is not None:
                yield finish_record(held)
            return
        except FallbackNeeded:
            pass
    with open_stream() as fh:
        for rec in iter_records_tolerant(fh):
            if rec.offset in done and rec.error is None:
                continue
            yield finish_record(rec)
