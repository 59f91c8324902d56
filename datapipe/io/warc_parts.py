"""A gzip WARC file read as several tasks: byte ranges cut at gzip member (= record) boundaries.

Common Crawl compresses every record as its own gzip member, so a file can be cut wherever a
member starts. A part ``(start, stop)`` is a *nominal* byte range (``warc_byte_ranges``, like
the JSONL ranges); the part owns the records whose member starts in ``[sync(start), sync(stop))``,
where ``sync(x)`` is the first member start at or after ``x`` that opens a WARC record (``0`` for
``x = 0``; the file size when there is none). Neighbouring parts compute the same ``sync`` of
their shared boundary, so the windows tile the file: every record is read by exactly one part,
with the offset (``warc_offset``), record id and document id a whole-file read gives it. A file
whose members hold many records (one gzip stream for the whole file) has one member start, so
its first part reads it all and the others are empty.

Inside a window the ordinary reader (``datapipe.io.warc.iter_records``: FastWARC, with the
tolerant parser behind it) runs on a view of those bytes; offsets are shifted back to the file's,
the record's and those its ``detail`` names (``bytes A-B``, ``byte N``) alike.
"""
from __future__ import annotations

import io
import re
import zlib
from typing import BinaryIO, Iterator

from datapipe.io.members import MAX_RECORD_BYTES
from datapipe.io.warc import WarcRecord, iter_records

#: What a byte-range part's records look like, for lineage (``datapipe.engine.task_plan``): 2, error
#: details name file bytes, not the window's. Parts stored by an older version are read again.
VERSION = 2
_GZIP_MAGIC = b"\x1f\x8b\x08"
#: A byte position (or range) in a reader's detail: ``bytes 12-40``, ``bytes 12-?``, ``byte 7``.
_POSITION = re.compile(r"\b(bytes? )(\d+)(-(\d+))?")
_SCAN = 1 << 20  # bytes read at a time while looking for a member start


def warc_byte_ranges(path: str, size: int, split_bytes: int) -> list[tuple[int, int]] | None:
    """Nominal ranges ``[(start, stop), ...]`` of ``split_bytes`` covering a gzip WARC of ``size`` bytes.

    None (one task) when ``split_bytes`` is 0, the file is not larger, or the name does not end
    in ``.gz`` (plain and zstd WARC files are read whole).
    """
    if split_bytes <= 0 or size <= split_bytes or not path.lower().endswith(".gz"):
        return None
    return [(s, min(s + split_bytes, size)) for s in range(0, size, split_bytes)]


def _opens_record(fh: BinaryIO, pos: int) -> bool:
    """True if a gzip member starting at ``pos`` inflates to something beginning with ``WARC/``."""
    fh.seek(pos)
    data = fh.read(1 << 14)
    try:
        head = zlib.decompressobj(31).decompress(data, 16)
    except zlib.error:
        return False
    return head.startswith(b"WARC/")


def sync(fh: BinaryIO, x: int, size: int) -> int:
    """The first offset ``>= x`` where a gzip member holding a WARC record starts (``size`` if none).

    ``x <= 0`` gives 0, so the first part always starts at the file's first byte (damage before
    the first record is reported by that part, as a whole-file read reports it).
    """
    if x <= 0:
        return 0
    pos = x
    while pos < size:
        fh.seek(pos)
        chunk = fh.read(_SCAN + 2)
        if not chunk:
            break
        i = chunk.find(_GZIP_MAGIC)
        while i >= 0 and i < _SCAN:
            if _opens_record(fh, pos + i):
                return pos + i
            i = chunk.find(_GZIP_MAGIC, i + 1)
        pos += _SCAN
    return size


class Window(io.RawIOBase):
    """Read-only, seekable view of bytes ``[start, stop)`` of ``fh``; positions are relative to ``start``."""

    def __init__(self, fh: BinaryIO, start: int, stop: int):
        super().__init__()
        self._fh, self._start, self._len, self._pos = fh, start, stop - start, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._len}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        left = self._len - self._pos
        if left <= 0:
            return b""
        n = left if n is None or n < 0 else min(n, left)
        self._fh.seek(self._start + self._pos)
        data = self._fh.read(n)
        self._pos += len(data)
        return data

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


def part_records(open_stream, size: int, part: tuple[int, int], max_record_bytes: int = MAX_RECORD_BYTES,
                 compression: str | None = "gzip") -> Iterator[WarcRecord]:
    """The records of ``part`` (module doc), offsets in the file's coordinates.

    ``open_stream()`` opens the whole file (a seekable binary stream); ``size`` is its length.
    """
    with open_stream() as fh:
        start, stop = sync(fh, part[0], size), sync(fh, part[1], size) if part[1] < size else size
    if start >= stop:
        return

    class _Opened:
        def __enter__(self):
            self._cm = open_stream()
            return Window(self._cm.__enter__(), start, stop)

        def __exit__(self, *exc):
            return self._cm.__exit__(*exc)

    for rec in iter_records(_Opened, max_record_bytes=max_record_bytes, compression=compression):
        rec.offset += start
        if rec.detail and start:
            rec.detail = _shift_positions(rec.detail, start)
        yield rec


def _shift_positions(detail: str, by: int) -> str:
    """``detail`` with each window position it names moved by ``by`` bytes (into the file's coordinates)."""
    def move(m: re.Match) -> str:
        end = f"-{int(m.group(4)) + by}" if m.group(4) else ""
        return f"{m.group(1)}{int(m.group(2)) + by}{end}"
    return _POSITION.sub(move, detail)
