"""Compressed inputs as a sequence of members (gzip members, zstd frames), streamed with bounded memory.

A ``.gz`` file is one or more gzip members (Common Crawl writes one a record); a ``.zst`` file one
or more zstd frames (IIPC WARC-zstd: one a record, after an optional dictionary frame). ``members``
reads them one at a time from a binary stream and knows where each starts and ends in the file as
stored, so damage never ends reading silently:

* a member cut short ends with ``error`` ``truncated_gzip_member`` / ``truncated_zstd_frame``;
* a member that does not decode ends with ``corrupt_gzip_member`` / ``corrupt_zstd_frame``, and
  reading resumes at the next plausible member start (its magic number, a valid header, and first
  bytes that decode), searched from just after the damaged member's start;
* bytes between members that start no member are one ``garbage_between_members`` (zstd:
  ``garbage_between_frames``) member without data; ``garbage_after_last_member`` /
  ``garbage_after_last_frame`` when no member follows. NUL/whitespace padding is not garbage.

Output is bounded: ``Member.read(n)`` returns at most ``n`` decompressed bytes (zlib's
``max_length``; zstd is fed one block at a time and a block decodes to at most 128 KiB), so no
member is ever inflated whole into memory, whatever its compression ratio.
"""
from __future__ import annotations

import struct
import zlib
from typing import BinaryIO, Iterator

import zstandard

#: Default cap on one record's decompressed size, bytes (``inputs.max_record_bytes``; see
#: datapipe.manifest.Inputs for why 32 MiB).
MAX_RECORD_BYTES = 32 * 2**20

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
DICT_MAGIC = 0x184D2A5D
_SKIP_LO, _SKIP_HI = 0x184D2A50, 0x184D2A5F
BLANK = b"\x00\r\n \t"

_CHUNK = 1 << 20        # raw bytes read from the file at a time
_FEED = 1 << 16         # compressed bytes given to zlib at a time
_KEEP_BEHIND = 1 << 20  # compressed bytes kept before the read position, for resync after damage
_PROBE = 4096           # compressed bytes decoded to validate a candidate member start
_MAX_DICT = 16 << 20    # a larger WARC-zstd dictionary frame is not loaded
_MAX_BLOCK = 128 << 10  # zstd Block_Maximum_Size (RFC 8878 section 3.1.1.2.4)


def sniff(head: bytes) -> str | None:
    """``gzip`` / ``zstd`` when ``head`` (the file's first bytes) starts such a member, ``plain``
    for a WARC or JSON start (after blank lines), else None (the caller decides, e.g. by the name)."""
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    if len(head) >= 4 and (head[:4] == ZSTD_MAGIC or _SKIP_LO <= struct.unpack("<I", head[:4])[0] <= _SKIP_HI):
        return "zstd"
    text = head.lstrip(BLANK)
    if text[:4] == b"WARC" or text[:1] in (b"{", b"["):
        return "plain"
    return None


def compression_from_name(path: str) -> str | None:
    """``gzip`` / ``zstd`` from a file name's suffix, else None."""
    name = path.lower()
    if name.endswith(".gz"):
        return "gzip"
    if name.endswith((".zst", ".zstd")):
        return "zstd"
    return None


class RawInput:
    """A forward reader over a binary stream with look-ahead. ``pos`` is the absolute file offset.

    Data before ``pos`` is dropped as reading goes on, except the last ``_KEEP_BEHIND`` bytes after
    ``mark`` (the start of the member being read), which a resync after damage may search again.
    """

    def __init__(self, fh: BinaryIO, offset: int = 0):
        self._fh = fh
        self._buf = bytearray()
        self._i = 0             # index of pos in _buf
        self._base = offset     # file offset of _buf[0]
        self.eof = False
        self.mark = offset

    @property
    def pos(self) -> int:
        return self._base + self._i

    @property
    def kept_from(self) -> int:
        """The first file offset still held (a resync cannot search before it)."""
        return self._base

    def available(self) -> int:
        return len(self._buf) - self._i

    def fill(self, n: int) -> bool:
        """Make at least ``n`` bytes available from ``pos``; False if the stream ends first."""
        while len(self._buf) - self._i < n and not self.eof:
            self._compact()
            data = self._fh.read(max(_CHUNK, n - (len(self._buf) - self._i)))
            if not data:
                self.eof = True
            else:
                self._buf += data
        return len(self._buf) - self._i >= n

    def _compact(self) -> None:
        keep = max(min(self.mark, self.pos), self.pos - _KEEP_BEHIND) - self._base
        if keep >= _CHUNK:
            del self._buf[:keep]
            self._base += keep
            self._i -= keep

    def peek(self, n: int) -> bytes:
        """Up to ``n`` bytes from ``pos`` (fewer at the end of the stream), not consumed."""
        self.fill(n)
        return bytes(self._buf[self._i:self._i + n])

    def advance(self, n: int) -> None:
        self._i += n

    def goto(self, offset: int) -> None:
        """Move ``pos`` to a held offset (``>= kept_from``, at most what has been read)."""
        self._i = offset - self._base

    def discard(self, n: int) -> int:
        """Skip ``n`` bytes without keeping them; returns how many there were."""
        done = 0
        while done < n and self.fill(1):
            k = min(n - done, self.available())
            self._i += k
            done += k
            self._compact()
        return done

    def skip_blank(self) -> None:
        """Skip NUL/whitespace padding."""
        while self.fill(1):
            if self._buf[self._i] not in BLANK:
                return
            view = self._buf[self._i:self._i + _CHUNK]
            rest = view.lstrip(BLANK)
            self._i += len(view) - len(rest)
            if rest:
                return
            self._compact()

    def find(self, sub: bytes, start: int) -> int:
        """File offset of the next ``sub`` at or after file offset ``start``, reading on; -1 at EOF.

        Data before a possible match is dropped (``pos`` moves up to it), so a scan of a long
        damaged stretch holds about one chunk at a time.
        """
        at = max(start, self._base)
        while True:
            k = self._buf.find(sub, at - self._base)
            if k >= 0:
                return self._base + k
            at = max(at, self._base + len(self._buf) - len(sub) + 1)
            self._i = max(self._i, at - self._base)
            self.mark = self.pos
            if not self.fill(self.available() + 1):
                self._i = len(self._buf)
                return -1


class Member:
    """One gzip member or zstd frame being read. ``offset``: its first byte in the file;
    ``end``: the byte after it, set once it has been read (or skipped) to its end; ``error``: why it
    ended early (None if whole); ``declared``: decompressed size its header states (zstd), if any."""

    offset: int
    end: int | None = None
    error: str | None = None
    detail: str | None = None
    declared: int | None = None
    produced: int = 0

    def read(self, n: int) -> bytes:
        raise NotImplementedError

    def discard(self, n: int) -> int:
        """Decompress and drop up to ``n`` bytes; returns how many there were."""
        done = 0
        while done < n:
            got = len(self.read(min(n - done, _CHUNK)))
            if not got:
                break
            done += got
        return done

    def abandon(self) -> None:
        """Stop decompressing: move to where the next member starts (``end``), without inflating."""
        raise NotImplementedError

    @property
    def done(self) -> bool:
        return self.end is not None


class _Gap(Member):
    """Bytes that start no member: no data, an ``error``, ``end`` known."""

    def __init__(self, offset: int, end: int, error: str):
        self.offset, self.end, self.error = offset, end, error
        self.detail = f"{end - offset} bytes that start no member"

    def read(self, n: int) -> bytes:
        return b""

    def abandon(self) -> None:
        pass


def _gzip_start_ok(data: bytes) -> bool:
    """A plausible gzip member start: magic, deflate method, no reserved flag, first bytes decode."""
    if len(data) < 4 or data[:3] != b"\x1f\x8b\x08" or data[3] & 0xE0:
        return False
    d = zlib.decompressobj(31)
    try:
        d.decompress(data, 64)
    except zlib.error:
        return False
    return True


def _zstd_start_ok(data: bytes) -> bool:
    """A plausible zstd frame start: magic and a frame header descriptor without its reserved bit."""
    return len(data) >= 5 and data[:4] == ZSTD_MAGIC and not data[4] & 0x08


class _GzipMember(Member):
    def __init__(self, raw: RawInput):
        self._raw = raw
        self.offset = raw.pos
        raw.mark = self.offset
        self._d = zlib.decompressobj(31)

    def read(self, n: int) -> bytes:
        raw = self._raw
        while self.end is None:
            if not raw.fill(1):
                self._fail("truncated_gzip_member", "the file ends inside the member")
                return b""
            piece = raw.peek(_FEED)
            try:
                out = self._d.decompress(piece, n)
            except zlib.error as e:
                self._fail("corrupt_gzip_member", str(e))
                return b""
            # At the member's end zlib reports the bytes after it as both tail and unused data.
            rest = self._d.unused_data if self._d.eof else self._d.unconsumed_tail
            raw.advance(len(piece) - len(rest))
            if self._d.eof:
                self.end = raw.pos
            if out:
                self.produced += len(out)
                return out
        return b""

    def _fail(self, error: str, why: str) -> None:
        self.error, self.detail = error, why
        self.end = _after_damage(self._raw, self.offset, "gzip", self)

    def abandon(self) -> None:
        if self.end is None:
            self.end = _resync(self._raw, self._raw.pos, "gzip")


class _ZstdFrame(Member):
    """A zstd frame, walked block by block (RFC 8878 section 3.1): the frame's compressed extent is
    known from its block headers, and each block decodes to at most 128 KiB."""

    def __init__(self, raw: RawInput, dctx: zstandard.ZstdDecompressor):
        self._raw = raw
        self.offset = raw.pos
        raw.mark = self.offset
        self._dctx = dctx
        self._d = None
        self._last = False
        self._checksum = False
        self._pending = b""

    def _header(self) -> bool:
        raw = self._raw
        if not raw.fill(5):
            return self._fail("truncated_zstd_frame", "the file ends inside the frame header")
        fhd = raw.peek(5)[4]
        if fhd & 0x08:
            return self._fail("corrupt_zstd_frame", "reserved bit set in the frame header")
        single = fhd >> 5 & 1
        fcs_len = (1 if single else 0, 2, 4, 8)[fhd >> 6]
        n = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3] + fcs_len
        if not raw.fill(n):
            return self._fail("truncated_zstd_frame", "the file ends inside the frame header")
        head = raw.peek(n)
        if fcs_len:
            v = int.from_bytes(head[n - fcs_len:n], "little")
            self.declared = v + 256 if fcs_len == 2 else v
        self._checksum = bool(fhd & 0x04)
        self._d = self._dctx.decompressobj()
        return self._feed(n)

    def _feed(self, n: int) -> bool:
        try:
            out = self._d.decompress(self._raw.peek(n))
        except zstandard.ZstdError as e:
            return self._fail("corrupt_zstd_frame", str(e))
        self._raw.advance(n)
        self._pending += out
        return True

    def _step(self) -> bool:
        """Feed the next unit (header, one block, checksum); False when the frame has ended."""
        raw = self._raw
        if self._d is None:
            return self._header()
        if self._last:
            if self._checksum and not self._feed_exact(4):
                return False
            self.end = raw.pos
            return False
        if not raw.fill(3):
            return self._fail("truncated_zstd_frame", "the file ends inside the frame")
        bh = int.from_bytes(raw.peek(3), "little")
        kind, size = bh >> 1 & 3, bh >> 3
        if kind == 3 or size > _MAX_BLOCK:
            return self._fail("corrupt_zstd_frame", f"block header {bh:06x}: reserved type or size over 128 KiB")
        self._last = bool(bh & 1)
        return self._feed_exact(3 + (1 if kind == 1 else size))

    def _feed_exact(self, n: int) -> bool:
        if not self._raw.fill(n):
            return self._fail("truncated_zstd_frame", "the file ends inside the frame")
        return self._feed(n)

    def read(self, n: int) -> bytes:
        while not self._pending and self.end is None:
            if not self._step() and self.end is None:
                break
        out, self._pending = self._pending[:n], self._pending[n:]
        self.produced += len(out)
        return out

    def _fail(self, error: str, why: str) -> bool:
        self.error, self.detail = error, why
        self.end = _after_damage(self._raw, self.offset, "zstd", self)
        return False

    def abandon(self) -> None:
        # Walk the remaining block headers without decoding: exact and cheap.
        raw = self._raw
        self._pending = b""
        if self._d is None and not self._header():
            return
        while self.end is None:
            if self._last:
                if self._checksum and raw.discard(4) < 4:
                    self._fail("truncated_zstd_frame", "the file ends inside the frame")
                    return
                self.end = raw.pos
                return
            if not raw.fill(3):
                self._fail("truncated_zstd_frame", "the file ends inside the frame")
                return
            bh = int.from_bytes(raw.peek(3), "little")
            kind, size = bh >> 1 & 3, bh >> 3
            if kind == 3 or size > _MAX_BLOCK:
                self._fail("corrupt_zstd_frame", f"block header {bh:06x}: reserved type or size over 128 KiB")
                return
            self._last = bool(bh & 1)
            n = 3 + (1 if kind == 1 else size)
            if raw.discard(n) < n:
                self._fail("truncated_zstd_frame", "the file ends inside the frame")
                return


def _after_damage(raw: RawInput, offset: int, kind: str, m: Member) -> int:
    """Where reading goes on after member ``m`` (starting at ``offset``) failed: the next plausible
    member start after ``offset`` (a cut member glued to the next one fails inside the next one),
    or the end of the file. A member that seems to run to the end of the file while another one
    starts after it was not cut but damaged: its error becomes ``corrupt_*``."""
    nxt = _resync(raw, max(offset + 1, raw.kept_from), kind)
    if m.error.startswith("truncated_") and raw.fill(1):
        m.error = m.error.replace("truncated_", "corrupt_")
        m.detail = f"{m.detail}, but another member starts at byte {nxt}"
    return nxt


def _resync(raw: RawInput, start: int, kind: str) -> int:
    """Move ``raw`` to the next plausible member start at or after ``start``; returns its offset
    (the end of the file when there is none)."""
    magic, ok = (b"\x1f\x8b\x08", _gzip_start_ok) if kind == "gzip" else (ZSTD_MAGIC, _zstd_start_ok)
    if start < raw.pos:
        raw.goto(start)
    at = start
    while True:
        j = raw.find(magic, at)
        if j < 0:
            return raw.pos
        raw.goto(j)
        if ok(raw.peek(_PROBE)):
            return j
        at = j + 1


def members(raw: RawInput, kind: str, dictionary: bool = False) -> Iterator[Member]:
    """Each member of a gzip (``kind='gzip'``) or zstd stream, in order, from ``raw.pos`` on.

    Read (or ``abandon``) each member before asking for the next. ``dictionary``: honour a
    WARC-zstd dictionary frame (skippable frame 0x184D2A5D) before the first data frame; if it
    cannot be loaded, one ``bad_zstd_dictionary`` gap is yielded and later frames fail as corrupt.
    Other skippable frames are extension data and are skipped.
    """
    dctx = zstandard.ZstdDecompressor()
    first = True
    while True:
        raw.skip_blank()
        if not raw.fill(1):
            return
        start = raw.pos
        head = raw.peek(_PROBE)
        if kind == "zstd" and len(head) >= 4 and _SKIP_LO <= struct.unpack("<I", head[:4])[0] <= _SKIP_HI:
            if len(head) < 8:
                raw.discard(len(head))
                yield _Gap(start, raw.pos, "truncated_zstd_frame")
                return
            magic, size = struct.unpack("<II", head[:8])
            raw.advance(8)
            if dictionary and first and magic == DICT_MAGIC and size <= _MAX_DICT and raw.fill(size):
                try:
                    dctx = zstandard.ZstdDecompressor(dict_data=_load_dict(raw.peek(size)))
                except zstandard.ZstdError:
                    raw.advance(size)
                    yield _Gap(start, raw.pos, "bad_zstd_dictionary")
                    first = False
                    continue
            if raw.discard(size) < size:
                yield _Gap(start, raw.pos, "truncated_zstd_frame")
                return
            first = False
            continue
        first = False
        if (kind == "gzip" and _gzip_start_ok(head)) or (kind == "zstd" and _zstd_start_ok(head)):
            m = _GzipMember(raw) if kind == "gzip" else _ZstdFrame(raw, dctx)
            yield m
            if m.end is None:  # the reader stopped early: skip the rest without inflating it
                m.abandon()
            if m.end <= start:  # never loop on one offset, whatever the damage
                m.end = start + 1
            if raw.pos != m.end:
                raw.goto(m.end) if m.end < raw.pos else raw.discard(m.end - raw.pos)
            continue
        if kind == "gzip" and head[:3] == b"\x1f\x8b\x08":
            # A member header that does not decode: one damaged member, reading resumes after it.
            m = _GzipMember(raw)
            m._fail("corrupt_gzip_member", "the member's first bytes do not decode")
            yield m
            continue
        end = _resync(raw, start + 1, kind)
        tail = "member" if kind == "gzip" else "frame"
        if end >= 0 and raw.fill(1):
            yield _Gap(start, end, f"garbage_between_{tail}s")
        else:
            yield _Gap(start, raw.pos, f"garbage_after_last_{tail}")
            return


def _load_dict(payload: bytes) -> zstandard.ZstdCompressionDict:
    if payload[:4] == ZSTD_MAGIC:  # the WARC-zstd spec allows a zstd-compressed dictionary
        payload = zstandard.ZstdDecompressor().decompressobj().decompress(payload)
    return zstandard.ZstdCompressionDict(payload)


class Damage(Exception):
    """A damaged stretch of a compressed stream: ``reason``, file byte range ``[start, end)``, ``detail``."""

    def __init__(self, reason: str, start: int, end: int | None, detail: str | None):
        super().__init__(reason)
        self.reason, self.start, self.end, self.detail = reason, start, end, detail


class Decoded:
    """The decompressed bytes of all members of a stream, one after another (JSONL files: lines
    may cross member boundaries). ``read`` raises ``Damage`` once for each damaged member or gap,
    after the bytes decoded before it, then goes on with the next member."""

    def __init__(self, raw: RawInput, kind: str):
        self._members = members(raw, kind)
        self._cur: Member | None = None
        self.offset = 0   # decompressed bytes returned so far

    def read(self, n: int) -> bytes:
        while True:
            if self._cur is None:
                self._cur = next(self._members, None)
                if self._cur is None:
                    return b""
            m = self._cur
            data = m.read(n)
            if data:
                self.offset += len(data)
                return data
            self._cur = None
            if m.error:
                raise Damage(m.error, m.offset, m.end, m.detail)
