"""Frames of a WARC-zstd file (IIPC "Zstandard Compression for WARC Files 1.0"), for the tolerant reader.

A ``.warc.zst`` file is a sequence of zstd frames, one WARC record each, optionally preceded by
a dictionary frame: a skippable frame with magic 0x184D2A5D whose payload is the zstd dictionary
(itself possibly zstd-compressed), used to decompress every later frame. Other skippable frames
(0x184D2A50-0x184D2A5F) are extension data, not records, and are skipped.

``zstd_frames`` mirrors ``warc._gzip_members``: it yields ``(compressed_offset, data, error)``
per frame, so a corrupt or cut frame costs one record, and its offset is known.
"""
from __future__ import annotations

import struct
from typing import Iterator

import zstandard

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
DICT_MAGIC = 0x184D2A5D
_SKIP_LO, _SKIP_HI = 0x184D2A50, 0x184D2A5F
_FEED = 1 << 16  # bytes fed to the decompressor at a time: keeps unused_data (a copy) small


def is_zstd(head: bytes) -> bool:
    """True if ``head`` (the first 4 bytes of a file) starts a zstd frame or a skippable frame."""
    if len(head) < 4:
        return False
    return head[:4] == ZSTD_MAGIC or _SKIP_LO <= struct.unpack("<I", head[:4])[0] <= _SKIP_HI


def _load_dict(payload: bytes) -> zstandard.ZstdCompressionDict:
    if payload[:4] == ZSTD_MAGIC:  # the spec allows a zstd-compressed dictionary
        payload = zstandard.ZstdDecompressor().decompressobj().decompress(payload)
    return zstandard.ZstdCompressionDict(payload)


def zstd_frames(data_iter: Iterator[bytes]) -> Iterator[tuple[int, bytes, str | None]]:
    """Yield ``(compressed_offset, frame_bytes, error)`` for each data frame of a WARC-zstd stream.

    ``data_iter`` yields the file's bytes in chunks. Errors: ``truncated_zstd_frame`` (the file
    ends inside a frame; its partial data is yielded), ``corrupt_zstd_frame`` (reading resumes
    at the next frame magic), ``bad_zstd_dictionary`` (every frame then fails as corrupt),
    ``garbage_between_frames`` / ``garbage_after_last_frame``.
    """
    buf = b""
    offset = 0  # file offset of buf[0]
    exhausted = False
    dctx = zstandard.ZstdDecompressor()

    def fill(need: int) -> bool:
        """Read until len(buf) >= need; False if the stream ends first."""
        nonlocal buf, exhausted
        while len(buf) < need and not exhausted:
            chunk = next(data_iter, b"")
            if chunk:
                buf += chunk
            else:
                exhausted = True
        return len(buf) >= need

    def resync(start: int) -> bool:
        """Drop bytes up to the next frame magic at or after ``start``; False if there is none."""
        nonlocal buf, offset
        j = buf.find(ZSTD_MAGIC, start)
        while j < 0 and not exhausted:
            fill(len(buf) + _FEED)
            j = buf.find(ZSTD_MAGIC, start)
        if j < 0:
            return False
        offset += j
        buf = buf[j:]
        return True

    first = True
    while fill(1):
        if not fill(4):
            yield offset, b"", "truncated_zstd_frame"
            return
        magic = struct.unpack("<I", buf[:4])[0]
        if _SKIP_LO <= magic <= _SKIP_HI:
            size = struct.unpack("<I", buf[4:8])[0] if fill(8) else None
            if size is None or not fill(8 + size):
                yield offset, b"", "truncated_zstd_frame"
                return
            if magic == DICT_MAGIC and first:
                try:
                    dctx = zstandard.ZstdDecompressor(dict_data=_load_dict(buf[8:8 + size]))
                except zstandard.ZstdError:
                    yield offset, b"", "bad_zstd_dictionary"
            offset += 8 + size
            buf = buf[8 + size:]
            first = False
            continue
        first = False
        if buf[:4] != ZSTD_MAGIC:
            here = offset
            found = resync(1)
            if found:
                yield here, b"", "garbage_between_frames"
                continue
            if buf.strip(b"\x00\r\n \t"):
                yield here, b"", "garbage_after_last_frame"
            return
        d = dctx.decompressobj()
        out: list[bytes] = []
        pos, err = 0, None
        while True:
            if pos >= len(buf) and not fill(pos + 1):
                err = "truncated_zstd_frame"
                break
            piece = buf[pos:pos + _FEED]
            try:
                out.append(d.decompress(piece))
            except zstandard.ZstdError:
                err = "corrupt_zstd_frame"
                break
            if d.eof:
                pos += len(piece) - len(d.unused_data)
                break
            pos += len(piece)
        if err == "truncated_zstd_frame":
            yield offset, b"".join(out), err
            return
        if err:
            yield offset, b"".join(out), err
            if not resync(4):
                return
            continue
        yield offset, b"".join(out), None
        offset += pos
        buf = buf[pos:]
