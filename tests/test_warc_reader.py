"""Reading cases from ../shared/cases and the real WARC samples, as each .expect file states."""
from collections import Counter

from pipeline_helpers import extract_rows, read_items

from datapipe.io.warc import iter_records


def _docs(items):
    return [it for it in items if it.status == "document"]


def test_b01_truncated_gzip_member_is_errored(cases_dir):
    items = read_items(cases_dir / "B01.warc.gz")
    assert len(items) == 2
    a, b = items
    assert a.status == "document" and a.row["url"] == "http://example.com/a"
    assert "river valley" in extract_rows([a.row]).column("text")[0].as_py()
    assert b.row["url"] == "http://example.com/b"
    assert b.status == "errored" and "truncated" in b.reason


def test_b02_short_content_length_warns_and_keeps_following(cases_dir):
    items = read_items(cases_dir / "B02.warc")
    assert [it.row["url"] for it in items] == [f"http://example.com/{c}" for c in "abc"]
    assert all(it.status == "document" for it in items)
    assert "content_length_mismatch" in items[0].row["warnings"]
    texts = extract_rows([it.row for it in items]).column("text").to_pylist()
    assert all(t and len(t) > 20 for t in texts)


def test_b03_chunked_body_is_dechunked(cases_dir):
    (doc,) = _docs(read_items(cases_dir / "B03.warc.gz"))
    text = extract_rows([doc.row], main_content=False).column("text")[0].as_py()
    assert "river valley" in text and "bakery on the corner" in text
    lines = {ln.strip() for ln in text.splitlines()}
    assert not lines & {"64", "cd", "0"} and "\r" not in text


def test_b06_lenient_http_headers_utf8(cases_dir):
    (doc,) = _docs(read_items(cases_dir / "B06.warc.gz"))
    text = extract_rows([doc.row], main_content=False).column("text")[0].as_py()
    assert "Café menus" in text and "CafÃ©" not in text


def test_b07_bad_record_errored_reading_continues(cases_dir):
    items = read_items(cases_dir / "B07.warc.gz")
    status = Counter(it.status for it in items)
    assert len(items) == 3 and status == {"document": 2, "errored": 1}
    assert [it.row["url"] for it in items if it.status == "document"] == ["http://example.com/one", "http://example.com/three"]
    assert items[1].reason.startswith("read:")


def test_b08_non_documents_skipped_not_errors(cases_dir):
    items = read_items(cases_dir / "B08.warc.gz")
    docs = _docs(items)
    assert len(docs) == 1 and docs[0].row["url"] == "http://example.com/page"
    assert not [it for it in items if it.status == "errored"]
    text = extract_rows([docs[0].row]).column("text")[0].as_py()
    assert "river valley" in text
    reasons = Counter(it.reason for it in items if it.status == "rejected")
    # warcinfo, request, metadata, revisit, dns response, 404 response
    assert reasons == {"non_document:warcinfo": 1, "non_document:request": 1, "non_document:metadata": 1,
                       "non_document:revisit": 1, "non_document:not_http": 1, "non_document:http_status": 1}


def test_b10_truncated_payload_flagged(cases_dir):
    (doc,) = _docs(read_items(cases_dir / "B10.warc.gz"))
    assert doc.row["truncated"] is True
    text = extract_rows([doc.row], main_content=False).column("text")[0].as_py()
    assert "river valley" in text and "bakery on the corner" in text


def test_clipped_real_warc_is_errored(data_dir):
    items = read_items(data_dir / "warc" / "resiliparse_clipped.warc.gz")
    assert len(items) == 1 and items[0].status == "errored"


def test_cc_excerpt_records_by_type(data_dir):
    # SOURCES.md: warcinfo + 17 request, 16 response, 16 metadata records.
    items = read_items(data_dir / "warc" / "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz")
    assert Counter(it.row["record_type"] for it in items) == {"warcinfo": 1, "request": 17, "response": 16, "metadata": 16}


def test_fast_and_tolerant_paths_agree_on_real_files(data_dir):
    for f in sorted((data_dir / "warc").glob("*.gz")):
        def op(f=f):
            return open(f, "rb")
        fast = [(r.offset, r.record_type, r.error, len(r.block)) for r in iter_records(op)]
        slow = [(r.offset, r.record_type, r.error, len(r.block)) for r in iter_records(op, prefer_fast=False)]
        assert fast == slow, f.name


def test_wet_conversion_record_is_a_document(data_dir):
    items = read_items(data_dir / "warc" / "whirlwind_CC-MAIN-2024-22.warc.wet.gz")
    docs = _docs(items)
    assert len(docs) == 1 and docs[0].row["record_type"] == "conversion"
    assert "Escopete" in docs[0].row["text"]


def test_fast_path_reads_well_formed_files_without_fallback(data_dir):
    # Regression: an invalid FastWARC argument made every file fall back to the slow parser.
    from datapipe.io.warc import iter_records_fast

    with open(data_dir / "warc" / "realpages-1171.warc.gz", "rb") as fh:
        assert sum(1 for _ in iter_records_fast(fh)) == 1171
