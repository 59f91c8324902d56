"""ARC files (the Internet Archive's format before WARC, versions 1 and 2), plain or gzip, as WarcRecords.

An ARC file is a ``filedesc://`` version block followed by records, each a header line and that
many bytes of content (for HTTP, the response as received: status line, headers, body), then a
newline. Header lines (Internet Archive, "ARC file format", 1996 and its version 2):

* version 1: ``URL IP-address Archive-date Content-type Archive-length``;
* version 2: ``URL IP-address Archive-date Content-type Result-code Checksum Location Offset
  Filename Archive-length``.

Archive-date is 14 digits (``YYYYMMDDhhmmss``), Archive-length the content's size in bytes, always
the last field. ``.arc.gz`` files hold one record a gzip member (``datapipe.io.members`` reads them).

Each record becomes a ``WarcRecord`` the WARC readers' classification takes
(``datapipe.io.readers.warc_items``): the version block a ``warcinfo`` record, the others
``response`` records with ``warc-target-uri``, ``warc-date`` (ISO 8601), ``content-type`` and
``warc-ip-address``, the HTTP part parsed by ``finish_record``. ARC records have no record id, so
the document id is made from the file and the record's offset, as for a WARC record without one:
the offset of the header line in the file (in a gzip file, its member's first byte; a later record
in the same member adds its position in the member's decompressed bytes).

Damage costs what it touches, never the rest of the file, each errored with a reason:
``arc_bad_header`` (bytes that are no header line, up to the next line that is one),
``truncated_record`` (content shorter than its Archive-length), ``record_too_large`` (over
``max_record_bytes``: skipped, never held), a damaged gzip member (its reason from
``datapipe.io.members``), ``empty_file`` for a file of 0 bytes.
"""
from __future__ import annotations

import io
from typing import BinaryIO, Callable, ContextManager, Iterator

from datapipe.io.members import MAX_RECORD_BYTES, RawInput, members, sniff
from datapipe.io.warc_record import WarcRecord, finish_record

#: A longer line is not a header line (ARC header lines are a URL and a few short fields).
MAX_HEADER_LINE = 64 * 1024
_CHUNK = 1 << 20


def parse_header(line: bytes) -> dict[str, str] | None:
    """The fields of an ARC header line (without its newline), or None if it is not one.

    Returns ``url``, ``ip``, ``date`` (14 digits), ``content_type`` and ``length`` (digits); a URL
    with spaces in it (seen in old crawls) keeps them.
    """
    parts = line.rstrip(b"\r").split(b" ")
    if len(parts) < 5 or not parts[-1].isdigit():
        return None
    for n_after, url_end in ((7, -9), (2, -4)):  # version 2 first: its date sits 8 fields from the end
        i = -(n_after + 1)
        if len(parts) >= -url_end + 1 and len(parts[i]) == 14 and parts[i].isdigit():
            url = b" ".join(parts[:url_end])
            if b":" not in url:
                continue
            dec = [p.decode("utf-8", "replace") for p in (url, parts[url_end], parts[i], parts[i + 1])]
            return {"url": dec[0], "ip": dec[1], "date": dec[2], "content_type": dec[3],
                    "length": parts[-1].decode()}
    return None


def _iso(date: str) -> str:
    return f"{date[:4]}-{date[4:6]}-{date[6:8]}T{date[8:10]}:{date[10:12]}:{date[12:14]}Z"


def _record(offset: int, head: dict[str, str], content: bytes, max_record_bytes: int) -> WarcRecord:
    kind = "warcinfo" if head["url"].startswith("filedesc:") else "response"
    headers = {"warc-type": kind, "warc-target-uri": head["url"], "warc-date": _iso(head["date"]),
               "content-type": head["content_type"], "warc-ip-address": head["ip"]}
    return finish_record(WarcRecord(offset, headers=headers, block=content), max_record_bytes)


def parse_records(stream: BinaryIO, at: Callable[[int], int] = lambda p: p,
                  max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[WarcRecord]:
    """Records of a plain ARC byte stream (``readline`` and ``read``) from its current position;
    ``at(pos)`` maps a position in the stream to the record offset reported."""
    pos, pending = 0, None  # pending: a header line found while skipping damage, not yet handled
    while True:
        if pending is None:
            start = pos
            line = stream.readline(MAX_HEADER_LINE)
            pos += len(line)
        else:
            start, line, pending = pending[0], pending[1], None
        if not line:
            return
        if not line.strip():  # the newline after each record, and padding
            continue
        head = parse_header(line.rstrip(b"\n")) if line.endswith(b"\n") else None
        if head is None:
            # Skip to the next line that is a header line; the bytes skipped are one errored record.
            while True:
                mark = pos
                nxt = stream.readline(MAX_HEADER_LINE)
                pos += len(nxt)
                if not nxt or (nxt.endswith(b"\n") and parse_header(nxt.rstrip(b"\n")) is not None):
                    break
            yield WarcRecord(at(start), error="arc_bad_header",
                             detail=f"{mark - start} bytes from offset {at(start)} that are no ARC header line "
                                    f"(it begins {line[:80]!r})")
            if nxt:
                pending = (mark, nxt)
            continue
        length = int(head["length"])
        if length > max_record_bytes:
            left = length
            while left > 0:
                got = len(stream.read(min(left, _CHUNK)))
                if not got:
                    break
                left -= got
            pos += length - left
            yield WarcRecord(at(start), error="record_too_large",
                             detail=f"Archive-length {length} bytes > max_record_bytes {max_record_bytes} "
                                    f"({head['url'][:200]})")
            continue
        content = stream.read(length)
        pos += len(content)
        if len(content) < length:
            yield WarcRecord(at(start), error="truncated_record",
                             detail=f"{len(content)} of {length} content bytes before the end ({head['url'][:200]})")
            return
        yield _record(at(start), head, content, max_record_bytes)


def iter_arc_records(open_stream: Callable[[], ContextManager[BinaryIO]],
                     max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[WarcRecord]:
    """Every record of the ARC file ``open_stream()`` opens, plain or gzip (from its first bytes)."""
    with open_stream() as fh:
        head = fh.read(4)
        if not head:
            yield WarcRecord(0, error="empty_file", detail="the file has 0 bytes")
            return
        fh.seek(0)
        if sniff(head) != "gzip":
            stream = io.BufferedReader(fh, _CHUNK) if isinstance(fh, io.RawIOBase) else fh  # readline, buffered
            yield from parse_records(stream, lambda p: p, max_record_bytes)
            return
        for m in members(RawInput(fh), "gzip"):
            cap = max_record_bytes + MAX_HEADER_LINE
            data = bytearray()
            while len(data) <= cap:
                got = m.read(_CHUNK)
                if not got:
                    break
                data += got
            if len(data) > cap:
                m.abandon()
                yield WarcRecord(m.offset, error="record_too_large",
                                 detail=f"a gzip member inflating past {cap} bytes at offset {m.offset}")
                continue
            if m.error:
                yield WarcRecord(m.offset, error=m.error, detail=m.detail)
                continue
            base = m.offset
            yield from parse_records(io.BytesIO(bytes(data)), lambda p, b=base: b + p, max_record_bytes)
