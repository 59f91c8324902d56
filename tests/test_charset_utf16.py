"""UTF-16 without a byte-order mark is recognised by its NUL bytes (stages/lib/charset.py, sniff_utf16):
it was decoded as cp1252, so the markup (with a NUL between letters) ended up in the text."""
from __future__ import annotations

import gzip

import pytest
from pipeline_helpers import extract_html, read_items

from datapipe.stages.lib import charset
from datapipe.stages.lib.charset import decode_payload


def _page(data_dir, lang: str) -> str:
    with gzip.open(data_dir / "langid" / "lingua_sentences" / f"{lang}.txt.gz", "rt", encoding="utf-8") as fh:
        sentences = [s for s in fh.read().splitlines()[:6] if s.strip()]
    return (f'<!DOCTYPE html><html lang="{lang}"><head><title>{sentences[0][:40]}</title></head>'
            f"<body><p>{' '.join(sentences)}</p></body></html>")


@pytest.mark.parametrize("lang", ["en", "de", "ru", "zh", "ja", "ar"])
@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_bomless_utf16_decodes_to_the_page(data_dir, lang, codec):
    page = _page(data_dir, lang)
    d = decode_payload(page.encode(codec))
    assert d.codec == codec and d.text == page
    # a payload cut off inside a code unit (truncated record) keeps every whole unit
    cut = decode_payload(page.encode(codec)[:-1])
    assert cut.codec == codec and cut.text == page[:-1]


def test_extracted_text_has_no_markup(data_dir):
    page = _page(data_dir, "de")
    row = extract_html(page.encode("utf-16-le"), "iso-8859-1", main_content=False)
    body = page.split("<p>")[1].split("</p>")[0]
    assert row["text"].strip().endswith(body) and "\x00" not in row["text"] and "<p>" not in row["text"]


def test_real_pages_and_single_byte_text_are_not_sniffed(data_dir):
    pages = 0
    for path in sorted((data_dir / "warc").glob("*.warc.gz")):
        for item in read_items(path):
            if item.row.get("record_type") == "response" and item.row.get("payload"):
                pages += 1
                assert charset.sniff_utf16(item.row["payload"]) is None
    assert pages > 1200
    assert charset.sniff_utf16(_page(data_dir, "fr").encode("cp1252", "replace")) is None
    assert charset.sniff_utf16(b"\x00" * 64) is None   # all NUL: no pattern
