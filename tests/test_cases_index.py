"""The reading/extraction cases of ../shared/cases through the whole phase-1 path (``runner.run``
on a Dask LocalCluster: reader -> extract -> shards -> ledger), asserting what the parts of each
``.expect`` line that the reader-level tests (test_warc_reader.py, test_extract.py) cannot see:
per-file ledger counts, what reaches ``documents/``/``errors/``, and that a bad record or a
crashing page costs only itself. tests/CASES.md maps every case to its tests.
"""
from __future__ import annotations

import io
import json
import shutil

import pyarrow.parquet as pq
import pytest

from datapipe.engine import runner
from datapipe.engine.ledger import Ledger
from datapipe.manifest.load import load_manifest

WARC_CASES = ["B01.warc.gz", "B02.warc", "B03.warc.gz", "B06.warc.gz", "B07.warc.gz", "B08.warc.gz", "B10.warc.gz"]
B15_NEIGHBOURS = ["The first page speaks of the river valley.", "The last page speaks of the bakery on the corner."]


def _b15_batch_warc(path, b15_html: bytes):
    """A WARC whose middle response is case B15's page, between two ordinary pages (one batch)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    pages = [f"<html><body><p>{B15_NEIGHBOURS[0]}</p></body></html>".encode(), b15_html,
             f"<html><body><p>{B15_NEIGHBOURS[1]}</p></body></html>".encode()]
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        for i, body in enumerate(pages):
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                                  ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
            w.write_record(w.create_warc_record(f"http://example.com/b15-{i}", "response",
                                                payload=io.BytesIO(body), http_headers=headers))
    return path


@pytest.fixture(scope="module")
def case_run(cases_dir, tmp_path_factory, warm_client):
    tmp = tmp_path_factory.mktemp("cases")
    inp = tmp / "in"
    inp.mkdir()
    for name in WARC_CASES:
        shutil.copy(cases_dir / name, inp / name)
    _b15_batch_warc(inp / "B15-batch.warc.gz", (cases_dir / "B15.html").read_bytes())
    out = tmp / "out"
    m = {"inputs": {"paths": [str(inp)]}, "output": str(out),
         "cluster": {"workers": 1, "dashboard_address": "127.0.0.1:0", "retries": 0},
         "stages": [{"extract": {"main_content": False}}]}  # whole-page text, as the cases state it
    (tmp / "m.yaml").write_text(json.dumps(m))
    result = runner.run(load_manifest(tmp / "m.yaml"), client=warm_client)
    rows = {k: [r for f in sorted((out / k).glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
            for k in ("documents", "rejected", "errors")}
    ledgers = {r["input"].rsplit("/", 1)[-1]: r["ledger"] for r in result.tasks}
    return result, rows, ledgers


def _of(rows, name):
    return [r for r in rows if r["warc_file"] == name]


def _counts(led, stage):
    s = led["stages"][stage]
    return s["in"], s["kept"], sum(s["rejected"].values()), sum(s["errored"].values())


def test_run_finishes_and_balances(case_run):
    result, rows, ledgers = case_run
    assert result.failed == []
    result.ledger.check()
    assert sorted(ledgers) == sorted(WARC_CASES + ["B15-batch.warc.gz"])
    assert len(rows["documents"]) == result.ledger.kept
    assert len(rows["errors"]) == result.ledger.totals()["errored"]


def test_b01_truncated_member_errored_not_partial(case_run):
    _, rows, led = case_run
    docs = _of(rows["documents"], "B01.warc.gz")
    assert [d["url"] for d in docs] == ["http://example.com/a"] and "river valley" in docs[0]["text"]
    (err,) = _of(rows["errors"], "B01.warc.gz")
    assert err["url"] == "http://example.com/b" and err["error_stage"] == "read" and "truncat" in err["error_reason"]
    assert _counts(led["B01.warc.gz"], "read") == (2, 1, 0, 1)


def test_b02_all_three_reach_extraction(case_run):
    _, rows, led = case_run
    assert _counts(led["B02.warc"], "extract")[0] == 3
    docs = {d["url"]: d for d in _of(rows["documents"], "B02.warc")}
    assert sorted(docs) == [f"http://example.com/{c}" for c in "abc"]
    assert "content_length_mismatch" in docs["http://example.com/a"]["warnings"]


def test_b03_dechunked_document(case_run):
    _, rows, _ = case_run
    (doc,) = _of(rows["documents"], "B03.warc.gz")
    assert "river valley" in doc["text"] and "bakery on the corner" in doc["text"]
    assert not {ln.strip() for ln in doc["text"].splitlines()} & {"64", "cd", "0"} and "\r" not in doc["text"]


def test_b06_lenient_headers_utf8(case_run):
    _, rows, _ = case_run
    (doc,) = _of(rows["documents"], "B06.warc.gz")
    assert "Café menus" in doc["text"] and "CafÃ©" not in doc["text"]


def test_b07_ledger_in3_kept2_errored1(case_run):
    _, rows, led = case_run
    assert _counts(led["B07.warc.gz"], "read") == (3, 2, 0, 1)
    assert sorted(d["url"] for d in _of(rows["documents"], "B07.warc.gz")) == \
        ["http://example.com/one", "http://example.com/three"]
    (err,) = _of(rows["errors"], "B07.warc.gz")
    assert err["error_reason"].startswith("read:")


def test_b08_one_document_non_documents_skipped(case_run):
    _, rows, led = case_run
    (doc,) = _of(rows["documents"], "B08.warc.gz")
    assert doc["url"] == "http://example.com/page" and "river valley" in doc["text"]
    assert _of(rows["errors"], "B08.warc.gz") == []
    read = led["B08.warc.gz"]["stages"]["read"]
    assert read["kept"] == 1 and read["errored"] == {}
    assert set(read["rejected"]) == {"non_document:warcinfo", "non_document:request", "non_document:metadata",
                                     "non_document:revisit", "non_document:not_http", "non_document:http_status"}
    assert all(d["text"] for d in rows["documents"])  # no empty documents anywhere


def test_b10_truncated_flag_kept(case_run):
    _, rows, _ = case_run
    (doc,) = _of(rows["documents"], "B10.warc.gz")
    assert doc["truncated"] is True
    assert "river valley" in doc["text"] and "bakery on the corner" in doc["text"]


def test_b15_costs_at_most_itself_in_a_batch(case_run):
    _, rows, led = case_run
    docs = {d["url"]: d for d in _of(rows["documents"], "B15-batch.warc.gz")}
    errs = _of(rows["errors"], "B15-batch.warc.gz")
    assert B15_NEIGHBOURS[0] in docs["http://example.com/b15-0"]["text"]
    assert B15_NEIGHBOURS[1] in docs["http://example.com/b15-2"]["text"]
    if "http://example.com/b15-1" in docs:
        assert "Text before the vector image" in docs["http://example.com/b15-1"]["text"] and errs == []
    else:
        (err,) = errs
        assert err["url"] == "http://example.com/b15-1" and err["error_reason"].startswith("extract:")
    ex = led["B15-batch.warc.gz"]["stages"]["extract"]
    assert ex["in"] == 3 and ex["kept"] + sum(ex["errored"].values()) == 3
    Ledger.from_dict(led["B15-batch.warc.gz"]).check()
