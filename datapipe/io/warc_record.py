"""The WARC record both WARC readers yield, and what they share to build it.

``WarcRecord`` is the output of the fast path (``datapipe.io.warc``) and of the tolerant parser
(``datapipe.io.warc_tolerant``); ``parse_header_block`` is the lenient WARC header parsing both
use, and ``finish_record`` parses the HTTP part of a response record once it is read. A module of
its own so that both readers import it without importing each other.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from datapipe.io.http import HttpResponse, parse_http_response
from datapipe.io.members import MAX_RECORD_BYTES

#: A WARC version line followed by a header name: a record start (inside a block, a swallowed record).
NEXT_RECORD = re.compile(rb"WARC/\d\.\d+\r?\n[A-Za-z][\w-]*:")
#: Bytes decompressed per read.
CHUNK = 1 << 20


@dataclass
class WarcRecord:
    """One WARC record. ``headers`` keys are lower-cased WARC header names.

    ``block`` is the record's content block (bytes); for ``response`` records ``http`` holds the
    parsed HTTP response (status, headers, body with transfer/content coding removed).
    ``error`` is a short reason when the record could not be read, ``detail`` says where (byte
    range) and why; ``warnings`` lists recoverable problems (e.g. ``content_length_mismatch``).
    """

    offset: int
    headers: dict[str, str] = field(default_factory=dict)
    block: bytes = b""
    http: HttpResponse | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    detail: str | None = None

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


def parse_header_block(raw: bytes) -> tuple[dict[str, str], list[str]]:
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


def finish_record(rec: WarcRecord, max_body_bytes: int = MAX_RECORD_BYTES) -> WarcRecord:
    """Parse the HTTP part of response records (in place); damaged HTTP becomes ``rec.error``.

    ``max_body_bytes`` caps the body once its Content-Encoding is removed (gzip inside a record
    can inflate without bound): over it the record is ``record_too_large``.
    """
    # Parse by content, not URI scheme: some crawls use non-http target URIs for HTTP payloads.
    if rec.error is None and rec.record_type == "response" and (
            rec.block[:5] == b"HTTP/" or (rec.url or "").startswith(("http:", "https:"))):
        rec.http = parse_http_response(rec.block, max_body_bytes)
        if rec.http.error:
            rec.error = rec.http.error
            rec.detail = rec.http.error_detail or f"the HTTP part of a {len(rec.block)}-byte response block"
    return rec
