"""Decompression bombs and the per-record cap (``inputs.max_record_bytes``, issue 14).

Each bomb is built here, a few MB on disk, one record that inflates to 1 GiB or more, between
good records. It is read in a fresh process through ``read_input`` (as a worker reads it), whose
peak RSS must stay within the cap plus a margin of the same process reading a small file: the
cap is enforced while inflating, never after. The bomb is one errored ``read:record_too_large``
row with its declared and observed sizes; the records after it are read.
"""
from __future__ import annotations

import gzip
import json
import re
import struct
import subprocess
import sys
import zlib

import pytest
import zstandard

from datapipe.io.members import MAX_RECORD_BYTES
from datapipe.io.readers import read_input

GIB = 2**30
MIB = 2**20
#: RSS a reader may add over reading a small file: the cap (one record held) plus a few buffers.
MARGIN = 48 * MIB

_READ = """
import json, resource, sys
from datapipe.io.readers import read_input
kw = {"max_record_bytes": int(sys.argv[2])} if len(sys.argv) > 2 else {}
items = [(i.status, i.reason, i.detail, i.row.get("warc_record_id"), i.row.get("warc_offset"))
         for i in read_input(sys.argv[1], **kw)]
print(json.dumps({"items": items, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def read_in_subprocess(path, cap: int | None = None) -> tuple[list, int]:
    """``(items, peak RSS in bytes)`` of a fresh Python process reading ``path``."""
    args = [sys.executable, "-c", _READ, str(path)] + ([str(cap)] if cap else [])
    res = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return out["items"], out["peak_kib"] * 1024


def gzip_repeated(prefix: bytes, unit: bytes, count: int, suffix: bytes) -> bytes:
    """A gzip member of ``prefix + unit * count + suffix`` built without holding its inflated data:
    after a full flush zlib starts afresh, so every further ``unit`` compresses to the same bytes."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    one = c.compress(unit) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(unit) + c.flush(zlib.Z_FULL_FLUSH) == one  # two units emitted so far
    tail = c.compress(suffix) + c.flush()
    crc = zlib.crc32(prefix)
    for _ in range(count):
        crc = zlib.crc32(unit, crc)
    crc = zlib.crc32(suffix, crc)
    size = len(prefix) + count * len(unit) + len(suffix)
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + head + one * count + tail
            + struct.pack("<II", crc, size & 0xFFFFFFFF))


def warc_record(i: int, body: bytes | None = None, declared: int | None = None) -> bytes:
    """A response record; ``declared`` overrides its Content-Length (the block is then only the
    first bytes of the record, for the caller to complete)."""
    if body is None:
        text = f"<html><body><p>good page {i} about the river valley and the bakery</p></body></html>".encode()
        body = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(text) + text
    n = len(body) if declared is None else declared
    head = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://example.com/{i}\r\n"
            f"WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{i:012d}>\r\nWARC-Date: 2024-01-01T00:00:00Z\r\n"
            f"Content-Type: application/http; msgtype=response\r\nContent-Length: {n}\r\n\r\n").encode()
    return head + body + (b"\r\n\r\n" if declared is None else b"")


HTTP_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html><body>"


def honest_bomb(i: int, zeros_mib: int) -> bytes:
    """A gzip member: one record whose Content-Length says the truth, ``zeros_mib`` MiB of zeros."""
    block = len(HTTP_HEAD) + zeros_mib * MIB
    return gzip_repeated(warc_record(i, HTTP_HEAD, declared=block), bytes(MIB), zeros_mib, b"\r\n\r\n")


def lying_bomb(i: int, zeros_mib: int) -> bytes:
    """A gzip member: a small whole record, then ``zeros_mib`` MiB of zeros in the same member."""
    return gzip_repeated(warc_record(i), bytes(MIB), zeros_mib, b"")


def _ids(items, status="document"):
    return [rid for s, _, _, rid, _ in items if s == status]


@pytest.fixture(scope="module")
def baseline_rss(tmp_path_factory):
    p = tmp_path_factory.mktemp("base") / "small.warc.gz"
    p.write_bytes(b"".join(gzip.compress(warc_record(i)) for i in range(4)))
    items, peak = read_in_subprocess(p)
    assert len(_ids(items)) == 4
    return peak


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["honest", "lying"])
def test_gzip_bomb_is_one_errored_record_and_memory_stays_bounded(tmp_path, baseline_rss, kind):
    bomb = honest_bomb(1, 1024) if kind == "honest" else lying_bomb(1, 1024)  # 1 GiB of zeros
    path = tmp_path / f"bomb-{kind}.warc.gz"
    path.write_bytes(gzip.compress(warc_record(0)) + bomb + b"".join(gzip.compress(warc_record(i)) for i in (2, 3)))
    assert path.stat().st_size < 4 * MIB
    items, peak = read_in_subprocess(path)
    print(f"{kind} gzip bomb: file {path.stat().st_size} bytes, peak RSS {peak / MIB:.1f} MiB "
          f"(small file: {baseline_rss / MIB:.1f} MiB)")
    assert peak < baseline_rss + MAX_RECORD_BYTES + MARGIN
    assert [(s, r) for s, r, *_ in items] == [("document", None), ("errored", "read:record_too_large"),
                                             ("document", None), ("document", None)]
    (err,) = [it for it in items if it[0] == "errored"]
    assert err[3] == "<urn:uuid:00000000-0000-0000-0000-000000000001>" and err[4] == len(gzip.compress(warc_record(0)))
    if kind == "honest":
        assert f"declared Content-Length {len(HTTP_HEAD) + GIB} bytes" in err[2] and "bytes inflated" in err[2]
    else:
        assert "inflates to more than" in err[2]
    assert _ids(items) == [f"<urn:uuid:00000000-0000-0000-0000-{i:012d}>" for i in (0, 2, 3)]


@pytest.mark.timeout(120)
def test_warc_zst_bomb(tmp_path, baseline_rss):
    cctx = zstandard.ZstdCompressor(level=1)
    head = warc_record(1, HTTP_HEAD, declared=len(HTTP_HEAD) + GIB)
    cobj = cctx.compressobj(size=len(head) + GIB + 4)
    zero = bytes(MIB)
    bomb = cobj.compress(head) + b"".join(cobj.compress(zero) for _ in range(1024)) + cobj.compress(b"\r\n\r\n")
    bomb += cobj.flush()
    path = tmp_path / "bomb.warc.zst"
    path.write_bytes(cctx.compress(warc_record(0)) + bomb + cctx.compress(warc_record(2)))
    items, peak = read_in_subprocess(path)
    print(f"zstd bomb: file {path.stat().st_size} bytes, peak RSS {peak / MIB:.1f} MiB")
    assert peak < baseline_rss + MAX_RECORD_BYTES + MARGIN
    assert [(s, r) for s, r, *_ in items] == [("document", None), ("errored", "read:record_too_large"),
                                             ("document", None)]
    assert f"declared Content-Length {len(HTTP_HEAD) + GIB} bytes" in items[1][2]


@pytest.mark.timeout(120)
def test_jsonl_gz_bomb_line(tmp_path, baseline_rss):
    good = [json.dumps({"id": f"d{i}", "text": f"document {i} about the river valley"}).encode() + b"\n"
            for i in range(4)]
    bomb = gzip_repeated(b'{"id": "bomb", "text": "', b"a" * MIB, 1024, b'"}\n')
    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(gzip.compress(b"".join(good[:2])) + bomb + gzip.compress(b"".join(good[2:])))
    items, peak = read_in_subprocess(path)
    print(f"jsonl.gz bomb: file {path.stat().st_size} bytes, peak RSS {peak / MIB:.1f} MiB")
    assert peak < baseline_rss + MAX_RECORD_BYTES + MARGIN
    assert [(s, r) for s, r, *_ in items] == [("document", None)] * 2 + [("errored", "read:record_too_large")] \
        + [("document", None)] * 2
    assert f"{GIB + 27} bytes > max_record_bytes" in items[2][2]


def test_record_over_a_small_cap_and_the_next_ones(tmp_path):
    """A small cap (in process): a 200 KB record is too large, the ones after it are read; a
    gzip-encoded HTTP body that inflates past the cap is caught while inflating it."""
    big_text = b"<html><body>" + b"word " * 40_000 + b"</body></html>"
    big = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + big_text
    encoded = gzip.compress(big_text)
    enc = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n"
           b"Content-Length: %d\r\n\r\n" % len(encoded) + encoded)
    recs = [warc_record(0), warc_record(1, big), warc_record(2), warc_record(3, enc), warc_record(4)]
    for name, data in (("cap.warc.gz", b"".join(gzip.compress(r) for r in recs)), ("cap.warc", b"".join(recs)),
                       ("cap.warc.zst", b"".join(zstandard.ZstdCompressor().compress(r) for r in recs))):
        p = tmp_path / name
        p.write_bytes(data)
        items = list(read_input(str(p), max_record_bytes=64 * 1024))
        assert [(i.status, i.reason) for i in items] == [
            ("document", None), ("errored", "read:record_too_large"), ("document", None),
            ("errored", "read:record_too_large"), ("document", None)], name
        assert "declared Content-Length" in items[1].detail and "65536" in items[1].detail
        assert "Content-Encoding gzip inflates to more than max_record_bytes 65536" in items[3].detail
        # Under the default cap the same records are documents.
        assert [i.status for i in read_input(str(p))] == ["document"] * 5, name


def test_content_length_lie_over_the_cap_resumes_at_the_next_record(tmp_path):
    """A Content-Length far over the cap (10^12) on a whole record: the records after it are read
    (found while skipping the declared block), in a plain file, a whole-file gzip member and a
    zstd frame; with one gzip member per record the member's end already bounded it. Before, the
    plain and whole-member files lost every later record into the errored one (3 items for 48)."""
    good = [warc_record(i) for i in range(6)]
    head_end = good[1].index(b"\r\n\r\n") + 4
    lied = re.sub(rb"Content-Length: \d+", b"Content-Length: 1000000000000", good[1][:head_end]) + good[1][head_end:]
    recs = [good[0], lied, *good[2:]]
    for name, data in (("lie.warc", b"".join(recs)), ("lie_one_member.warc.gz", gzip.compress(b"".join(recs))),
                       ("lie.warc.zst", zstandard.ZstdCompressor().compress(b"".join(recs))),
                       ("lie.warc.gz", b"".join(gzip.compress(r) for r in recs))):
        p = tmp_path / name
        p.write_bytes(data)
        items = list(read_input(str(p), max_record_bytes=64 * 1024))
        assert [(i.status, i.reason) for i in items] == [("document", None), ("errored", "read:record_too_large")] + [
            ("document", None)] * 4, name
        assert "declared Content-Length 1000000000000 bytes" in items[1].detail, name
        assert [i.row["warc_record_id"] for i in items if i.status == "document"] == [
            f"<urn:uuid:00000000-0000-0000-0000-{k:012d}>" for k in (0, 2, 3, 4, 5)], name


def test_jsonl_line_over_a_small_cap(tmp_path):
    lines = [json.dumps({"id": f"d{i}", "text": "x" * (50 if i != 2 else 5000)}).encode() + b"\n" for i in range(5)]
    for name, data in (("cap.jsonl", b"".join(lines)), ("cap.jsonl.gz", gzip.compress(b"".join(lines))),
                       ("cap.jsonl.zst", zstandard.ZstdCompressor().compress(b"".join(lines)))):
        p = tmp_path / name
        p.write_bytes(data)
        items = list(read_input(str(p), max_record_bytes=1024))
        assert [(i.status, i.reason) for i in items] == [("document", None)] * 2 + [
            ("errored", "read:record_too_large")] + [("document", None)] * 2, name
        assert items[2].detail == f"line 3: {len(lines[2])} bytes > max_record_bytes 1024"
        assert [i.row["warc_offset"] for i in items] == [sum(len(x) for x in lines[:k]) for k in range(5)]


# ------------------------------------------------------------------ zero-byte and missing inputs

@pytest.mark.parametrize("name", ["empty.warc.gz", "empty.warc", "empty.warc.zst", "empty.wet.gz",
                                  "empty.jsonl", "empty.jsonl.gz", "empty.jsonl.zst", "empty.parquet"])
def test_zero_byte_input_is_one_errored_item(tmp_path, name):
    p = tmp_path / name
    p.write_bytes(b"")
    (item,) = list(read_input(str(p)))
    assert (item.status, item.reason) == ("errored", "read:empty_file")
    assert item.row["warc_offset"] == 0 and item.row["source"] == str(p) and item.row["warc_file"] == name
    assert item.row["record_type"] == "file" and item.row["id"] and item.detail


@pytest.mark.parametrize("name,data", [("empty_members.warc.gz", gzip.compress(b"") * 3),
                                       ("padding.warc", b"\n\n\x00\x00 \r\n"),
                                       ("empty_frame.warc.zst", zstandard.ZstdCompressor().compress(b""))])
def test_bytes_without_a_record_are_one_errored_item(tmp_path, name, data):
    """A WARC file with bytes but not one record in them (empty gzip members, padding): one errored
    ``read:no_records`` item naming the size, as a 0-byte file is one ``read:empty_file``; before,
    it read as 0 records with no error (found by an attack run)."""
    p = tmp_path / name
    p.write_bytes(data)
    (item,) = list(read_input(str(p)))
    assert (item.status, item.reason, item.row["record_type"]) == ("errored", "read:no_records", "file")
    assert f"{len(data)} bytes" in item.detail
    # One record after the empty members: read, and nothing errored.
    p.write_bytes(data + gzip.compress(warc_record(0)) if name.endswith(".gz") else data + warc_record(0))
    if not name.endswith(".zst"):
        assert [(i.status, i.reason) for i in read_input(str(p))] == [("document", None)]


def test_missing_input_raises_so_the_task_errors_the_whole_file(tmp_path):
    """A file that cannot be opened is not a record: the task fails (and is retried), and the
    runner errors the file as a whole (tests/test_task_failures.py)."""
    with pytest.raises(FileNotFoundError):
        list(read_input(str(tmp_path / "missing.jsonl.gz")))
