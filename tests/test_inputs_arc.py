"""ARC inputs (datapipe/io/arc.py): hand-built ARC v1/v2 files, plain and gzip, their offsets
against warcio's ARC reader, damage that costs only what it touches, and a run through the chain."""
from __future__ import annotations

import gzip
import json

import pyarrow.parquet as pq
import pytest

from datapipe.engine import runner
from datapipe.engine.ledger import Ledger
from datapipe.io.arc import parse_header
from datapipe.io.readers import detect_format, read_input
from datapipe.manifest.load import load_manifest

PAGES = [f"<html><body><p>Page {i} of the archive has a sentence with enough words in it.</p></body></html>"
         for i in range(3)]


def _record(url: str, date: str, body: bytes, ctype: str = "text/html") -> bytes:
    return f"{url} 1.2.3.4 {date} {ctype} {len(body)}\n".encode() + body + b"\n"


def _http(html: str) -> bytes:
    b = html.encode()
    return b"HTTP/1.0 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n" % len(b) + b


def _parts() -> list[bytes]:
    info = b"1 0 Test\nURL IP-address Archive-date Content-type Archive-length\n"
    head = f"filedesc://t.arc 0.0.0.0 20000101000000 text/plain {len(info)}\n".encode() + info + b"\n"
    return [head] + [_record(f"http://example.com/{i}", f"2000010112000{i}", _http(p)) for i, p in enumerate(PAGES)]


@pytest.fixture
def arcs(tmp_path):
    parts = _parts()
    plain, gz = tmp_path / "t.arc", tmp_path / "t.arc.gz"
    plain.write_bytes(b"".join(parts))
    gz.write_bytes(b"".join(gzip.compress(p, mtime=0) for p in parts))
    return plain, gz


def _warcio_offsets(path) -> list[int]:
    from warcio.archiveiterator import ArchiveIterator

    with open(path, "rb") as fh:
        it = ArchiveIterator(fh, arc2warc=True)
        out = []
        for _ in it:
            out.append(it.get_record_offset())
        return out


def test_arc_records_read_as_documents(arcs):
    for path in arcs:
        assert detect_format(str(path)) == "arc"
        items = list(read_input(str(path)))
        assert [(it.status, it.reason) for it in items] == [("rejected", "non_document:warcinfo")] + \
            [("document", None)] * 3
        docs = [it.row for it in items[1:]]
        assert [d["url"] for d in docs] == [f"http://example.com/{i}" for i in range(3)]
        assert [d["warc_date"] for d in docs] == [f"2000-01-01T12:00:0{i}Z" for i in range(3)]
        assert [d["payload"] for d in docs] == [p.encode() for p in PAGES]  # the body, HTTP headers parsed off
        assert {(d["http_status"], d["charset"], d["content_type"]) for d in docs} == {(200, "utf-8", "text/html")}
        # offsets as an independent ARC reader (warcio) reports them: the header line's byte, or its member's
        assert [it.row["warc_offset"] for it in items] == _warcio_offsets(path)
        assert [it.row["id"] for it in read_input(str(path))] == [it.row["id"] for it in items]  # stable
        assert len({it.row["id"] for it in items}) == 4
        # inspect --doc --raw finds the page again from the stored offset
        from datapipe.inspect.reader import raw_html

        raw = raw_html(str(path), items[2].row["warc_offset"])
        assert (raw["url"], raw["http_status"], raw["html"]) == ("http://example.com/1", 200, PAGES[1])


def test_arc_version_2_header_and_urls_with_spaces():
    v2 = b"http://a.org/x 10.0.0.1 19960923142103 text/html 200 fd5a8c9a http://a.org/ 1234 IA-001.arc 512"
    assert parse_header(v2) == {"url": "http://a.org/x", "ip": "10.0.0.1", "date": "19960923142103",
                                "content_type": "text/html", "length": "512"}
    assert parse_header(b"http://a.org/a b 10.0.0.1 19960923142103 text/html 7")["url"] == "http://a.org/a b"
    for bad in (b"", b"garbage", b"http://a.org/ 1.2.3.4 2000 text/html 7", b"http://a.org/ 1.2.3.4 20000101000000 text/html x",
                b"noscheme 1.2.3.4 20000101000000 text/html 7"):
        assert parse_header(bad) is None


def test_damage_costs_only_what_it_touches(tmp_path):
    parts = _parts()
    # plain: a line that is no header between records 0 and 1, and record 2 cut short
    p = tmp_path / "d.arc"
    p.write_bytes(parts[0] + parts[1] + b"#### not an ARC header ####\nmore junk\n" + parts[2] + parts[3][:-40])
    got = [(it.status, it.reason, it.row.get("url")) for it in read_input(str(p))]
    assert got == [("rejected", "non_document:warcinfo", "filedesc://t.arc"),
                   ("document", None, "http://example.com/0"),
                   ("errored", "read:arc_bad_header", None),
                   ("document", None, "http://example.com/1"),
                   ("errored", "read:truncated_record", None)]
    bad = list(read_input(str(p)))[2]
    assert "38 bytes" in bad.detail  # the two junk lines: 28 + 10 bytes
    # gzip: member 2 corrupted in its deflate data, the members after it still read
    members = [gzip.compress(x, mtime=0) for x in parts]
    m = bytearray(members[2])
    m[20:30] = b"\xff" * 10
    g = tmp_path / "d.arc.gz"
    g.write_bytes(members[0] + members[1] + bytes(m) + members[3])
    got = [(it.status, it.reason) for it in read_input(str(g))]
    assert got[:2] == [("rejected", "non_document:warcinfo"), ("document", None)]
    assert got[2][0] == "errored" and got[2][1].startswith("read:")
    assert got[-1] == ("document", None) and [it.row.get("url") for it in read_input(str(g))][-1] == "http://example.com/2"
    # a record over the size cap is skipped, not held, and the next one reads
    big = tmp_path / "big.arc"
    big.write_bytes(parts[0] + _record("http://example.com/big", "20000101120009", _http("x" * 5000)) + parts[1])
    got = [(it.status, it.reason) for it in read_input(str(big), max_record_bytes=1024)]
    assert got == [("rejected", "non_document:warcinfo"), ("errored", "read:record_too_large"), ("document", None)]
    empty = tmp_path / "e.arc"
    empty.write_bytes(b"")
    assert [(it.status, it.reason) for it in read_input(str(empty))] == [("errored", "read:empty_file")]


def test_arc_through_the_chain(arcs, tmp_path, lid_model, warm_client):
    """Every ARC record ends in one place through a run (ledger in = kept + rejected + errored)."""
    out = tmp_path / "run"
    m = tmp_path / "m.yaml"
    m.write_text(json.dumps({"name": "arc", "inputs": {"paths": [str(arcs[1])]}, "output": str(out),
                             "cluster": {"workers": 1, "dashboard_address": "127.0.0.1:0"},
                             "stages": [{"extract": {}}, {"langid": {}}]}))
    runner.run(load_manifest(m), client=warm_client)
    led = Ledger.from_dict(json.loads((out / "ledger.json").read_text()))
    led.check()
    assert led.stages["read"].n_in == 4 and led.stages["read"].n_rejected == 1  # the version block
    kept = pq.read_table(out / "documents").to_pylist()
    assert sorted(r["url"] for r in kept) == [f"http://example.com/{i}" for i in range(3)]
    assert all(f"Page {r['url'][-1]} of the archive" in r["text"] for r in kept)
