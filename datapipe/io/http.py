"""Lenient HTTP/1.x response parsing for WARC ``response`` blocks.

Real crawls carry header names with spaces, tabs before values, duplicate ``charset``
parameters (case B06), chunked bodies stored as sent (B03), and bodies cut short by the crawler
(B10). We keep what is recoverable and record what was odd.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from datapipe.io.members import MAX_RECORD_BYTES


@dataclass
class HttpResponse:
    """Parsed response. ``headers`` keys are lower-cased; the first occurrence of a name wins.

    ``body`` has transfer-coding (chunked) and content-coding (gzip/deflate) removed.
    ``truncated`` is True when the body is shorter than the declared ``Content-Length``.
    """

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    error_detail: str | None = None

    @property
    def mime_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        return charset_from_content_type(self.headers.get("content-type", ""))


def charset_from_content_type(value: str) -> str | None:
    """The first non-empty ``charset=`` parameter of a Content-Type value, case-insensitive."""
    for part in value.split(";")[1:]:
        name, _, v = part.partition("=")
        if name.strip().lower() == "charset":
            v = v.strip().strip("'\"").strip()
            if v:
                return v
    return None


def dechunk(body: bytes) -> tuple[bytes, bool]:
    """Remove chunked transfer coding. Returns ``(data, ok)``; ``ok`` is False if the framing broke."""
    out = []
    pos = 0
    n = len(body)
    while pos < n:
        eol = body.find(b"\r\n", pos)
        if eol < 0:
            return b"".join(out) + body[pos:], False
        size_s = body[pos:eol].split(b";")[0].strip()
        try:
            size = int(size_s, 16)
        except ValueError:
            return b"".join(out) + body[pos:], False
        if size == 0:
            return b"".join(out), True
        start = eol + 2
        out.append(body[start:start + size])
        if start + size > n:
            return b"".join(out), False
        pos = start + size + 2
    return b"".join(out), False


def _inflate(body: bytes, wbits: int, limit: int) -> bytes:
    """Decompress every gzip/zlib member of ``body``; raises ``_TooLarge`` past ``limit`` bytes
    (checked while inflating: a small body can inflate without bound)."""
    out: list[bytes] = []
    total = 0
    data = body
    while data:
        d = zlib.decompressobj(wbits)
        while True:
            piece = d.decompress(data, limit + 1 - total)
            out.append(piece)
            total += len(piece)
            if total > limit:
                raise _TooLarge(total)
            if d.eof or not d.unconsumed_tail:
                break
            data = d.unconsumed_tail
        if not d.eof:
            raise EOFError("compressed body cut short")
        data = d.unused_data
        if wbits != 31 or data[:2] != b"\x1f\x8b":
            break  # only gzip concatenates members; anything else after the end is ignored
    return b"".join(out)


class _TooLarge(Exception):
    pass


def _decode_content(body: bytes, coding: str, limit: int) -> tuple[bytes, str | None]:
    coding = coding.strip().lower()
    if coding in ("", "identity"):
        return body, None
    try:
        if coding in ("gzip", "x-gzip"):
            return _inflate(body, 31, limit), None
        if coding == "deflate":
            try:
                return _inflate(body, 15, limit), None
            except zlib.error:
                return _inflate(body, -15, limit), None
    except (OSError, zlib.error, EOFError):
        # Common Crawl often stores the decoded body but keeps the header: use it as is.
        return body, "content_encoding_not_applied"
    return body, f"unsupported_content_encoding:{coding}"


def parse_http_response(block: bytes, max_body_bytes: int = MAX_RECORD_BYTES) -> HttpResponse:
    """Parse a WARC response block. Never raises; a block without a status line sets ``error``.

    ``max_body_bytes``: the most bytes a body may have once its Content-Encoding is removed
    (default 32 MiB, ``inputs.max_record_bytes``); more sets ``error`` ``record_too_large``.
    """
    resp = HttpResponse()
    end = block.find(b"\r\n\r\n")
    sep = 4
    alt = block.find(b"\n\n")
    if end < 0 or (0 <= alt < end):
        end, sep = alt, 2
    if end < 0:
        if block.startswith(b"HTTP/"):
            resp.error = "truncated_http_header"
        else:
            resp.error = "no_http_status_line"
        return resp
    lines = block[:end].split(b"\n")
    status_line = lines[0].rstrip(b"\r").split()
    if not status_line or not status_line[0].startswith(b"HTTP/"):
        resp.error = "no_http_status_line"
        return resp
    try:
        resp.status = int(status_line[1])
    except (IndexError, ValueError):
        resp.error = "bad_http_status"
        return resp
    for line in lines[1:]:
        line = line.rstrip(b"\r")
        name, colon, value = line.partition(b":")
        if not colon:
            resp.warnings.append("malformed_http_header")
            continue
        key = name.strip().decode("latin-1").lower()
        resp.headers.setdefault(key, value.strip(b" \t").decode("latin-1"))
    body = block[end + sep:]
    if "chunked" in resp.headers.get("transfer-encoding", "").lower():
        body, ok = dechunk(body)
        if not ok:
            resp.warnings.append("bad_chunked_encoding")
    else:
        declared = resp.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > len(body):
            resp.truncated = True
    coding = resp.headers.get("content-encoding", "")
    try:
        body, warn = _decode_content(body, coding, max_body_bytes)
    except _TooLarge as e:
        resp.error = "record_too_large"
        resp.error_detail = (f"HTTP body of {len(body)} bytes with Content-Encoding {coding.strip()} "
                             f"inflates to more than max_record_bytes {max_body_bytes} (stopped at {e.args[0]})")
        return resp
    if warn:
        resp.warnings.append(warn)
    resp.body = body
    return resp
