"""What compression a file has (its magic number or name), and the look-ahead reader over its bytes
that the member reader (``datapipe.io.members``) walks, resynchronising after damage."""
from __future__ import annotations

import struct
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
DICT_MAGIC = 0x184D2A5D
SKIP_LO, SKIP_HI = 0x184D2A50, 0x184D2A5F
BLANK = b"\x00\r\n \t"

CHUNK = 1 << 20        # raw bytes read from the file at a time
_KEEP_BEHIND = 1 << 20  # compressed bytes kept before the read position, for resync after damage


def sniff(head: bytes) -> str | None:
    """``gzip`` / ``zstd`` when ``head`` (the file's first bytes) starts such a member, ``plain``
    for a WARC or JSON start (after blank lines), else None (the caller decides, e.g. by the name)."""
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    if len(head) >= 4 and (head[:4] == ZSTD_MAGIC or SKIP_LO <= struct.unpack("<I", head[:4])[0] <= SKIP_HI):
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
            data = self._fh.read(max(CHUNK, n - (len(self._buf) - self._i)))
            if not data:
                self.eof = True
            else:
                self._buf += data
        return len(self._buf) - self._i >= n

    def _compact(self) -> None:
        keep = max(min(self.mark, self.pos), self.pos - _KEEP_BEHIND) - self._base
        if keep >= CHUNK:
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
            view = self._buf[self._i:self._i + CHUNK]
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
