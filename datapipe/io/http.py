"""Lenient HTTP/1.x response parsing for WARC ``response`` blocks.

Real crawls carry header names with spaces, tabs before values, duplicate ``charset``
parameters (case B06), chunked bodies stored as sent (B03), and bodies cut short by the crawler
(B10). We keep what is recoverable and record what was odd.
"""
from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field


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


def _decode_content(body: bytes, coding: str) -> tuple[bytes, str | None]:
    coding = coding.strip().lower()
    if coding in ("", "identity"):
        return body, None
    try:
        if coding in ("gzip", "x-gzip"):
            return gzip.decompress(body), None
        if coding == "deflate":
            try:
                return zlib.decompress(body), None
            except zlib.error:
                return zlib.decompress(body, -15), None
    except (OSError, zlib.error, EOFError):
        # Common Crawl often stores the decoded body but keeps the header: use it as is.
        return body, "content_encoding_not_applied"
    return body, f"unsupported_content_encoding:{coding}"


def parse_http_response(block: bytes) -> HttpResponse:
    """Parse a WARC response block. Never raises; a block without a status line sets ``error``."""
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
    body, warn = _decode_content(body, resp.headers.get("content-encoding", ""))
    if warn:
        resp.warnings.append(warn)
    resp.body = body
    return resp
