"""One gzip member or zstd frame being decompressed with bounded output, and the resync to the next
plausible member start after damage (error names and rules: the ``datapipe.io.members`` docstring)."""
from __future__ import annotations

import zlib

import zstandard

from datapipe.io.raw_input import CHUNK, ZSTD_MAGIC, RawInput

_FEED = 1 << 16         # compressed bytes given to zlib at a time
PROBE = 4096           # compressed bytes decoded to validate a candidate member start
_MAX_BLOCK = 128 << 10  # zstd Block_Maximum_Size (RFC 8878 section 3.1.1.2.4)


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
            got = len(self.read(min(n - done, CHUNK)))
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


class Gap(Member):
    """Bytes that start no member: no data, an ``error``, ``end`` known."""

    def __init__(self, offset: int, end: int, error: str):
        self.offset, self.end, self.error = offset, end, error
        self.detail = f"{end - offset} bytes that start no member"

    def read(self, n: int) -> bytes:
        return b""

    def abandon(self) -> None:
        pass


def gzip_start_ok(data: bytes) -> bool:
    """A plausible gzip member start: magic, deflate method, no reserved flag, first bytes decode."""
    if len(data) < 4 or data[:3] != b"\x1f\x8b\x08" or data[3] & 0xE0:
        return False
    d = zlib.decompressobj(31)
    try:
        d.decompress(data, 64)
    except zlib.error:
        return False
    return True


def zstd_start_ok(data: bytes) -> bool:
    """A plausible zstd frame start: magic and a frame header descriptor without its reserved bit."""
    return len(data) >= 5 and data[:4] == ZSTD_MAGIC and not data[4] & 0x08


class GzipMember(Member):
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
            self.end = resync_member(self._raw, self._raw.pos, "gzip")


class ZstdFrame(Member):
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
    nxt = resync_member(raw, max(offset + 1, raw.kept_from), kind)
    if m.error.startswith("truncated_") and raw.fill(1):
        m.error = m.error.replace("truncated_", "corrupt_")
        m.detail = f"{m.detail}, but another member starts at byte {nxt}"
    return nxt


def resync_member(raw: RawInput, start: int, kind: str) -> int:
    """Move ``raw`` to the next plausible member start at or after ``start``; returns its offset
    (the end of the file when there is none)."""
    magic, ok = (b"\x1f\x8b\x08", gzip_start_ok) if kind == "gzip" else (ZSTD_MAGIC, zstd_start_ok)
    if start < raw.pos:
        raw.goto(start)
    at = start
    while True:
        j = raw.find(magic, at)
        if j < 0:
            return raw.pos
        raw.goto(j)
        if ok(raw.peek(PROBE)):
            return j
        at = j + 1
