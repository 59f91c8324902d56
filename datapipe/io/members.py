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
from collections.abc import Iterator

import zstandard

from datapipe.io.member_readers import (
    PROBE,
    Gap,
    GzipMember,
    Member,
    ZstdFrame,
    gzip_start_ok,
    resync_member,
    zstd_start_ok,
)
from datapipe.io.raw_input import (
    BLANK,
    DICT_MAGIC,
    GZIP_MAGIC,
    SKIP_HI,
    SKIP_LO,
    ZSTD_MAGIC,
    RawInput,
    compression_from_name,
    sniff,
)

# The readers' public names stay importable from here.
__all__ = ["BLANK", "DICT_MAGIC", "GZIP_MAGIC", "MAX_RECORD_BYTES", "ZSTD_MAGIC", "Damage", "Decoded", "Member",
           "RawInput", "compression_from_name", "members", "sniff"]

#: Default cap on one record's decompressed size, bytes (``inputs.max_record_bytes``; see
#: datapipe.manifest.load.Inputs for why 32 MiB).
MAX_RECORD_BYTES = 32 * 2**20
_MAX_DICT = 16 << 20    # a larger WARC-zstd dictionary frame is not loaded


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
        head = raw.peek(PROBE)
        if kind == "zstd" and len(head) >= 4 and SKIP_LO <= struct.unpack("<I", head[:4])[0] <= SKIP_HI:
            if len(head) < 8:
                raw.discard(len(head))
                yield Gap(start, raw.pos, "truncated_zstd_frame")
                return
            magic, size = struct.unpack("<II", head[:8])
            raw.advance(8)
            if dictionary and first and magic == DICT_MAGIC and size <= _MAX_DICT and raw.fill(size):
                try:
                    dctx = zstandard.ZstdDecompressor(dict_data=_load_dict(raw.peek(size)))
                except zstandard.ZstdError:
                    raw.advance(size)
                    yield Gap(start, raw.pos, "bad_zstd_dictionary")
                    first = False
                    continue
            if raw.discard(size) < size:
                yield Gap(start, raw.pos, "truncated_zstd_frame")
                return
            first = False
            continue
        first = False
        if (kind == "gzip" and gzip_start_ok(head)) or (kind == "zstd" and zstd_start_ok(head)):
            m = GzipMember(raw) if kind == "gzip" else ZstdFrame(raw, dctx)
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
            m = GzipMember(raw)
            m._fail("corrupt_gzip_member", "the member's first bytes do not decode")
            yield m
            continue
        end = resync_member(raw, start + 1, kind)
        tail = "member" if kind == "gzip" else "frame"
        if end >= 0 and raw.fill(1):
            yield Gap(start, end, f"garbage_between_{tail}s")
        else:
            yield Gap(start, raw.pos, f"garbage_after_last_{tail}")
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
