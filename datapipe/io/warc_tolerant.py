"""The tolerant WARC parser: every record of a damaged or unusual WARC/WET stream, read or reported.

``iter_records_tolerant`` reads plain, gzip and WARC-zstd streams (per-record or whole-file
members). It splits gzip members and zstd frames itself (``datapipe.io.members``: a truncated or
corrupt member costs one record, its byte range is known, reading resumes at the next member),
parses headers leniently, and resynchronises on the next ``WARC/x.y`` line. ``datapipe.io.warc``
uses it for the files FastWARC cannot be trusted with and for the tail after the fast path.

Memory is bounded per record: a record whose Content-Length exceeds ``max_record_bytes`` is never
held; it is ``record_too_large``, its bytes are skipped while decompressing (at most
``SKIP_FACTOR`` x the cap is inflated to find its end; past that the rest of its member is skipped
without inflating it), and reading goes on with the next record. The skipped bytes are searched
for a record start: a Content-Length that lies far past the cap in a plain file or a whole-file
member would otherwise take every later record with it.

Every record of the stream comes out exactly once, either parsed or with ``error`` set, and every
stretch that holds no readable record (garbage, a damaged member) comes out as one record with
``error`` set and its byte range in ``detail``, so the ledger accounts for it. Offsets are byte
offsets in the file as stored (compressed): a gzip member's or zstd frame's first byte.
"""
from __future__ import annotations

import re
from typing import BinaryIO, Iterator

from datapipe.io.members import (
    BLANK,
    MAX_RECORD_BYTES,
    Member,
    RawInput,
    members,
    sniff,
)
from datapipe.io.warc_record import (
    CHUNK,
    NEXT_RECORD,
    WarcRecord,
    parse_header_block,
)

#: Longest WARC header block read (bytes); WARC headers are a few hundred bytes, URLs up to ~64 KiB.
MAX_HEADER_BYTES = 1 << 20
#: A member may inflate this many times ``max_record_bytes`` of bytes that are skipped (an
#: over-cap record, trailing junk) before the rest of it is skipped without inflating.
SKIP_FACTOR = 8
_VERSION = re.compile(rb"WARC/\d\.\d+\r?\n")
_LOOKAHEAD = 80  # bytes after a block inspected for its separator or the next record (B02)
_TAIL = 256  # bytes of a skipped chunk kept for a record start that straddles two chunks


class _PlainSegment(Member):
    """An uncompressed file (from ``raw.pos`` on) seen as one member."""

    def __init__(self, raw: RawInput):
        self._raw = raw
        self.offset = raw.pos

    def read(self, n: int) -> bytes:
        raw = self._raw
        if not raw.fill(1):
            self.end = raw.pos
            return b""
        data = raw.peek(min(n, raw.available()))
        raw.advance(len(data))
        return data

    def discard(self, n: int) -> int:
        return self._raw.discard(n)

    def abandon(self) -> None:
        self._raw.discard(1 << 62)
        self.end = self._raw.pos


class _Parser:
    """Records of one segment: a gzip member or zstd frame (``per_member``: every record in it has
    the member's offset), or a whole plain file (records have their own offsets).

    ``buf[i:]`` is data read from the segment and not yet parsed; ``base`` is the offset of
    ``buf[0]`` in the segment's data (for plain files: in the file). The buffer holds at most one
    header, one block of at most ``cap`` bytes and a little look-ahead.
    """

    def __init__(self, seg: Member, per_member: bool, cap: int):
        self.seg, self.per_member, self.cap = seg, per_member, cap
        self.budget = SKIP_FACTOR * cap if per_member else None  # plain files skip without inflating
        self.buf = bytearray()
        self.i = 0
        self.base = seg.offset if not per_member else 0
        self.eof = False
        self.skipped = 0         # bytes dropped without being part of a record
        self.gave_up = False     # the member's rest was skipped without inflating
        self.attributed = False  # the member's error was given to a record

    # -- buffer

    def more(self) -> bool:
        if self.eof:
            return False
        data = self.seg.read(CHUNK)
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def need(self, k: int) -> bool:
        """At least ``k`` bytes from ``i`` (False if the segment ends first)."""
        while len(self.buf) - self.i < k and self.more():
            pass
        return len(self.buf) - self.i >= k

    def compact(self) -> None:
        if self.i:
            del self.buf[:self.i]
            self.base += self.i
            self.i = 0

    def _drop(self, upto: int) -> bool:
        """Drop ``buf`` before index ``upto`` as skipped bytes; False once the skip budget is spent."""
        self.skipped += upto - self.i
        self.i = upto
        self.compact()
        if self.budget is not None and self.skipped > self.budget:
            self.give_up()
            return False
        return True

    def give_up(self) -> None:
        """Skip the rest of the member without inflating it."""
        self.seg.abandon()
        self.eof = True
        self.gave_up = True
        self.buf.clear()
        self.i = 0

    def skip_blank(self) -> bool:
        """Skip NUL/whitespace (counted as skipped: a member of zeros is a bomb too); True if data follows."""
        while True:
            if self.i < len(self.buf) and self.buf[self.i] not in BLANK:
                return True
            if self.i < len(self.buf):
                view = self.buf[self.i:self.i + CHUNK]
                k = len(view) - len(view.lstrip(BLANK))
                if k < len(view):
                    self.skipped += k
                    self.i += k
                    return True
                if not self._drop(self.i + k):
                    return False
                continue
            if not self.more():
                return False

    def resync(self, start: int) -> bool:
        """Move ``i`` to the next WARC version line at or after index ``start``, dropping what is
        before it; False if the segment ends first (everything dropped)."""
        j = start
        while True:
            m = _VERSION.search(self.buf, j)
            if m:
                self.skipped += m.start() - self.i
                self.i = m.start()
                return True
            keep = max(j, len(self.buf) - 16)  # a version line may straddle the next chunk
            if not self._drop(keep):
                return False
            j = self.i
            if not self.more():
                self.i = len(self.buf)
                return False

    def header_end(self, start: int) -> tuple[int, int]:
        """``(index, separator length)`` of the blank line ending the header at ``start``; -1 if none."""
        j = start
        while True:
            end = self.buf.find(b"\r\n\r\n", j)
            alt = self.buf.find(b"\n\n", j)
            if end >= 0 and not (0 <= alt < end):
                return end, 4
            if alt >= 0:
                return alt, 2
            if len(self.buf) - start > MAX_HEADER_BYTES:
                return -1, 0
            j = max(start, len(self.buf) - 3)
            if not self.more():
                return -1, 0

    # -- records

    def offset_of(self, index: int) -> int:
        return self.seg.offset if self.per_member else self.base + index

    def span(self, start_off: int) -> str:
        if self.per_member:
            end = self.seg.end
            return f"member at bytes {self.seg.offset}-{end if end is not None else '?'}"
        return f"bytes {start_off}-{self.base + self.i}"

    def finish(self, rec: WarcRecord) -> WarcRecord:
        """Give a damaged member's error to the record that reaches its end; set ``detail``."""
        if self.per_member and not self.skip_blank() and self.seg.error:
            own = rec.error
            rec.error = self.seg.error
            self.attributed = True
            why = self.seg.detail or ""
            rec.detail = "; ".join(x for x in (why, f"record: {own}" if own else None) if x)
        if self.gave_up and rec.error is None:
            # A member that inflates far past its record is over the cap as stored, whatever its
            # Content-Length says (a bomb behind a small record).
            rec.error = "record_too_large"
            rec.detail = (f"its member inflates to more than {self.budget} bytes besides the record's "
                          f"{len(rec.block)}-byte block; the rest of the member skipped without inflating")
        if rec.error:
            where = self.span(rec.offset)
            rec.detail = f"{where}: {rec.detail}" if rec.detail else where
        return rec

    def error(self, off: int, reason: str, headers: dict | None = None, detail: str | None = None) -> WarcRecord:
        return self.finish(WarcRecord(off, headers or {}, error=reason, detail=detail))

    def records(self) -> Iterator[WarcRecord]:
        buf = self.buf
        while True:
            self.compact()
            if not self.skip_blank():
                return
            start = self.i
            off = self.offset_of(start)
            self.need(5)
            if buf[start:start + 5] != b"WARC/":
                found = self.resync(start + 1)
                yield self.error(off, "no_warc_version_line")
                if not found:
                    return
                continue
            hdr_end, sep = self.header_end(start)
            limit = hdr_end if hdr_end >= 0 else len(buf)
            emb = _VERSION.search(buf, start + 5, limit)
            if emb:  # a header cut short, the next record glued to it
                self.i = emb.start()
                yield self.error(off, "truncated_warc_header")
                continue
            if hdr_end < 0:
                reason = "truncated_warc_header" if self.eof else "malformed_warc_header"
                found = self.resync(start + 5)
                yield self.error(off, reason, detail=None if self.eof else f"no header end within {MAX_HEADER_BYTES} bytes")
                if not found:
                    return
                continue
            headers, bad = parse_header_block(bytes(buf[start:hdr_end]))
            body = hdr_end + sep
            rec = WarcRecord(off, headers)
            cl_raw = headers.get("content-length")
            cl = int(cl_raw) if cl_raw is not None and cl_raw.strip().isdigit() else None
            if bad or cl is None:
                rec.error = ("malformed_warc_header" if bad else
                             "missing_content_length" if cl_raw is None else "invalid_content_length")
                found = self.resync(body)
                yield self.finish(rec)
                if not found:
                    return
                continue
            if cl > self.cap:
                yield self.too_large(rec, body, cl)
                continue
            self.need(body - start + cl + _LOOKAHEAD)
            n = len(buf)
            end = body + cl
            if end > n:
                rec.block = bytes(buf[body:])
                rec.error = "truncated_record"
                rec.detail = f"Content-Length {cl}, {n - body} bytes present"
                self.i = n
                yield self.finish(rec)
                continue
            glued = None
            if bytes(buf[end:end + 4]).strip(b"\r\n") == b"":
                rest = bytes(buf[end:end + _LOOKAHEAD]).lstrip(BLANK)
                # A separator where Content-Length says is not proof: after it must come a record
                # (or nothing), unless no record starts inside the block either.
                if not rest or rest[:5] == b"WARC/" or not (glued := self.glued(body, end)):
                    rec.block = bytes(buf[body:end])
                    self.i = end
                    yield self.finish(rec)
                    continue
            glued = glued or self.glued(body, end)
            nxt = _VERSION.search(buf, end, end + _LOOKAHEAD)
            nxt_at = nxt.start() if nxt else (n if self.per_member and self.eof and n - end < 64 else -1)
            if glued is None and 0 <= nxt_at and nxt_at - end < 64:
                # Content-Length a few bytes short (B02): keep the bytes up to the separator.
                rec.block = bytes(buf[body:nxt_at]).rstrip(b"\r\n")
                rec.warnings.append("content_length_mismatch")
                self.i = nxt_at
            elif glued:
                q = glued.start()
                rec.block = bytes(buf[body:q])
                if rec.block.endswith((b"\r\n\r\n", b"\n\n")):
                    # Content-Length too long, the record itself whole: cut at the next record.
                    rec.block = rec.block.rstrip(b"\r\n")
                    rec.warnings.append("content_length_mismatch")
                else:
                    # The next record starts inside this block without a separator: this one was cut.
                    rec.error = "truncated_record"
                    rec.detail = f"Content-Length {cl}, the next record starts after {q - body} bytes"
                self.i = q
            else:
                rec.block = bytes(buf[body:end])
                rec.warnings.append("missing_record_separator")
                self.i = end
                if self.per_member:  # the member's rest up to a record start is not a record
                    self.resync(end)
            yield self.finish(rec)

    def glued(self, body: int, end: int):
        """The first record start inside the block ``[body, end)`` (its header line may run past ``end``)."""
        q = self.buf.find(b"WARC/", body, end + 4)
        if q < 0 or q >= end:
            return None
        m = NEXT_RECORD.search(self.buf, q, min(len(self.buf), end + _LOOKAHEAD))
        return m if m and m.start() < end else None

    def too_large(self, rec: WarcRecord, body: int, cl: int) -> WarcRecord:
        """Skip an over-cap block while decompressing it (never held); the record, errored.

        The skipped bytes are searched for a record start (``NEXT_RECORD``), as ``glued`` does
        for a block under the cap: where one appears, the Content-Length overruns the records
        after it (a lie, or a cut record), so reading resumes there instead of losing the rest of
        a plain file or of a whole-file member."""
        have = min(len(self.buf) - body, cl)
        glued = NEXT_RECORD.search(self.buf, body, body + have)
        if glued:
            self.i = glued.start()
            return self._overrun(rec, cl, glued.start() - body)
        tail = bytes(self.buf[max(body, body + have - _TAIL):body + have])  # a start cut by the buffer's end
        self.i = body + have
        self.compact()
        left = cl - have
        room = left if self.budget is None else min(left, self.budget)
        got = 0
        while got < room:
            chunk = self.seg.read(min(CHUNK, room - got))
            if not chunk:
                break
            window = tail + chunk
            m = NEXT_RECORD.search(window)
            if m:  # keep the record start and what follows it: the buffer is empty here
                kept = window[m.start():]
                got += len(chunk) - len(kept)
                if not self.per_member:
                    self.base += got
                self.buf += kept
                return self._overrun(rec, cl, have + got)
            got += len(chunk)
            tail = window[-_TAIL:]
        if not self.per_member:
            self.base += got  # the buffer is empty: the next byte read is the one after the skipped ones
        seen = have + got
        if got < room:
            self.eof = True
            how = f"the {'member' if self.per_member else 'file'} ends after {seen} bytes"
        elif room < left:
            self.give_up()
            how = f"{seen} bytes inflated, the rest of its member skipped without inflating"
        else:
            how = f"{seen} bytes observed"
        rec.error = "record_too_large"
        rec.detail = f"declared Content-Length {cl} bytes > max_record_bytes {self.cap}; {how}"
        return self.finish(rec)

    def _overrun(self, rec: WarcRecord, cl: int, at: int) -> WarcRecord:
        rec.error = "record_too_large"
        rec.detail = (f"declared Content-Length {cl} bytes > max_record_bytes {self.cap}; a record starts "
                      f"{at} bytes into the block, reading resumes there")
        return self.finish(rec)


def iter_records_tolerant(fh: BinaryIO, offset: int = 0, max_record_bytes: int = MAX_RECORD_BYTES,
                          compression: str | None = None) -> Iterator[WarcRecord]:
    """Yield every record of a WARC/WET stream (plain, gzip or WARC-zstd; per-record or whole-file
    members) from its current position, which is byte ``offset`` of the file.

    ``compression`` (``gzip``/``zstd``, e.g. from the file name) is used when the first bytes are
    neither a known magic number nor a WARC version line (a damaged start). Memory is bounded by
    about ``max_record_bytes`` plus a few MiB whatever the input.
    """
    raw = RawInput(fh, offset)
    kind = sniff(raw.peek(64)) or compression or "plain"
    if kind not in ("gzip", "zstd"):
        yield from _Parser(_PlainSegment(raw), False, max_record_bytes).records()
        return
    for m in members(raw, kind, dictionary=kind == "zstd"):
        p = _Parser(m, True, max_record_bytes)
        yield from p.records()
        if m.error and not p.attributed:
            yield WarcRecord(m.offset, error=m.error, detail=f"bytes {m.offset}-{m.end}: {m.detail}")
