"""Charset decoding: declared labels against detection (issue 14), measured on pages re-encoded in
legacy charsets with wrong headers, on correctly declared pages and on the field cases."""
from __future__ import annotations

import gzip
import io
import random
import re
from collections import Counter

import pytest
from pipeline_helpers import extract_rows, read_items
from resiliparse.parse.encoding import detect_encoding

from datapipe.stages.lib.charset import (
    CHARSET_OVERRIDE,
    decode_payload,
    implausibility,
    meta_charset,
    normalize_label,
)

# Legacy charset -> languages whose lingua sentences it can hold.
LEGACY = {"cp1251": ["ru", "uk", "bg", "mk", "sr", "be"], "koi8-r": ["ru"], "shift_jis": ["ja"],
          "gb18030": ["zh"], "iso-8859-2": ["pl", "cs", "hu", "sk", "hr", "sl"]}
# Wrong headers: the classic server defaults, UTF-8, and a legacy label of another script.
WRONG_HEADERS = {"cp1251": "koi8-r", "koi8-r": "windows-1251", "shift_jis": "gb18030", "gb18030": "shift_jis",
                 "iso-8859-2": "windows-1251"}
CORRECT = {"utf-8": ["ru", "zh", "ja", "pl", "fr", "de", "el", "ar"],
           "iso-8859-1": ["fr", "de", "es", "pt", "it", "nl", "sv", "da", "nb", "is", "ca", "ga", "af", "sq"],
           "windows-1252": ["fr", "de", "es", "pt", "it", "nl", "sv", "fi", "et", "is", "eu", "en", "la"]}
PAGES_PER_CHARSET = 60
# Source noise in the lingua sentences: C1 controls and UTF-8 read as Latin-1 ("Ã ") in a few lines.
_NOISY = re.compile("[\x80-\x9f]|\u00c3[\u00a0-\u00bf]")


def _sentences(data_dir, lang: str) -> list[str]:
    with gzip.open(data_dir / "langid" / "lingua_sentences" / f"{lang}.txt.gz", "rt", encoding="utf-8") as fh:
        return [s for s in fh.read().splitlines() if s.strip() and not _NOISY.search(s)]


def _pages(data_dir, table: dict[str, list[str]], seed: int):
    """``(charset, lang, text, page bytes)``: 2-10 real sentences in one paragraph, encoded in the
    charset; pages whose sentences the charset cannot hold are skipped."""
    rnd = random.Random(seed)
    out = []
    for enc, langs in table.items():
        for i in range(PAGES_PER_CHARSET):
            lang = langs[i % len(langs)]
            text = " ".join(rnd.sample(_sentences(data_dir, lang), rnd.randint(2, 10)))
            page = f"<html><head><title>{lang}</title></head><body><p>{text}</p></body></html>"
            try:
                out.append((enc, lang, text, page.encode(enc)))
            except UnicodeEncodeError:
                continue
    return out


def _before(data: bytes, header: str) -> str:
    """The decoding before issue 14 for non-UTF-8 bytes: the first label that decodes, else detection."""
    for label in (header, meta_charset(data)):
        enc = normalize_label(label)
        try:
            return data.decode(enc)
        except (TypeError, UnicodeDecodeError, LookupError):
            continue
    enc = normalize_label(detect_encoding(data))
    try:
        return data.decode(enc)
    except (TypeError, UnicodeDecodeError, LookupError):
        return data.decode("cp1252", errors="replace")


@pytest.fixture(scope="module")
def legacy_pages(data_dir):
    return _pages(data_dir, LEGACY, seed=14)


def test_legacy_pages_with_wrong_headers(legacy_pages):
    right_before, right_after, total = Counter(), Counter(), Counter()
    for enc, _lang, text, data in legacy_pages:
        for header in ("iso-8859-1", "windows-1252", "utf-8", WRONG_HEADERS[enc]):
            key = (enc, header)
            total[key] += 1
            right_before[key] += text in _before(data, header)
            got = decode_payload(data, header)
            right_after[key] += text in got.text
            # The warning is there exactly when the text is not what the header decodes to.
            as_declared = data.decode(normalize_label(header), errors="replace")
            assert got.warnings == ([CHARSET_OVERRIDE] if got.text != as_declared else []), key
    report = "\n".join(f"{enc:>10} header {h:<12} n={n:3d} before={right_before[enc, h] / n:.3f} "
                       f"after={right_after[enc, h] / n:.3f}" for (enc, h), n in sorted(total.items()))
    print("\n" + report)
    for enc in LEGACY:
        n = sum(v for (e, _), v in total.items() if e == enc)
        after = sum(v for (e, _), v in right_after.items() if e == enc)
        assert n >= 100 and after / n >= 0.95, report
    # The bug: cp1251/koi8-r/gb18030/iso-8859-2 under a Latin-1 label were mojibake.
    for enc in ("cp1251", "koi8-r", "gb18030", "iso-8859-2"):
        assert right_before[enc, "iso-8859-1"] / total[enc, "iso-8859-1"] < 0.3, report


def test_correct_declarations_are_not_overridden(data_dir):
    pages = _pages(data_dir, CORRECT, seed=15)
    assert len(pages) >= 150
    for enc, lang, text, data in pages:
        got = decode_payload(data, enc)
        assert text in got.text, (enc, lang)
        assert got.warnings == [], (enc, lang, got.codec)
        # Declared in <meta> only, the same holds.
        meta = data.replace(b"<head>", f'<head><meta charset="{enc}">'.encode())
        assert decode_payload(meta, None).warnings == [], (enc, lang)


def test_override_comes_with_the_codec_used():
    text = "Привет, мир! Это страница на русском языке, и её заголовок ошибочно объявляет Latin-1."
    got = decode_payload(f"<p>{text}</p>".encode("cp1251"), "iso-8859-1")
    assert (got.text, got.codec, got.declared, got.warnings) == (f"<p>{text}</p>", "cp1251", "cp1252",
                                                                 [CHARSET_OVERRIDE])


def test_utf8_with_one_bad_byte_keeps_its_label():
    # Real pages (4 of realpages-1171) are UTF-8 with one stray Latin-1 byte: one replacement
    # character beats reading the whole page as cp1252 (mojibake on every umlaut).
    data = "<p>Schafe grasen auf der Weide, die Lämmer spielen. Größe und Gewicht: über 80 kg.</p>".encode()
    data = data.replace(b"80", b"\xe4 80")
    got = decode_payload(data, "utf-8")
    assert got.codec == "utf-8" and "Lämmer" in got.text and got.text.count("\ufffd") == 1
    assert got.warnings == []


def test_truncated_utf8_stays_utf8():
    data = "<p>Zażółć gęślą jaźń, zażółć gęślą jaźń</p>".encode()[:-6]  # cut inside 'ń'
    got = decode_payload(data, None)
    assert got.codec == "utf-8" and got.text.startswith("<p>Zażółć gęślą")


def test_implausibility_marks():
    for right, wrong in [("Zażółć gęślą jaźń", "Za¿ó³æ gê¶l± ja¼ñ"),   # iso-8859-2 read as cp1252
                         ("Привет, мир", "Ïðèâåò, ìèð"),               # cp1251 read as cp1252
                         ("Привет, мир", "рТЙЧЕФ, НЙТ"),               # koi8-r read as cp1251
                         ("Kőműves és fűtő", "Kõmûves és fûtõ")]:      # iso-8859-2 read as cp1252
        assert implausibility(wrong) > implausibility(right) == 0, wrong
    assert implausibility("5 m² Wohnfläche, 3 µm, nº 4") == 0           # units and ordinals are not glued symbols


def test_field_cases(cases_dir):
    b11 = decode_payload((cases_dir / "B11.html").read_bytes())
    assert b11.codec == "utf-16-le" and b11.warnings == []
    b13 = decode_payload((cases_dir / "B13.html").read_bytes())  # meta says ISO-8859-1, bytes are UTF-8
    assert b13.codec == "utf-8" and b13.declared == "cp1252" and b13.warnings == [CHARSET_OVERRIDE]
    b14 = decode_payload((cases_dir / "B14.html").read_bytes())  # 'iso-8859&#8211;1' is read as declared
    assert b14.codec == "cp1252" and b14.declared == "cp1252" and b14.warnings == []


def test_real_warc_samples_keep_their_labels(data_dir):
    pages = overridden = 0
    for path in sorted((data_dir / "warc").glob("*.warc.gz")):
        for item in read_items(path):
            row = item.row
            if row.get("record_type") != "response" or not row.get("payload"):
                continue
            pages += 1
            overridden += bool(decode_payload(row["payload"], row.get("charset")).warnings)
    assert pages > 1200
    assert overridden == 0  # measured: none of the 1,254 real pages is overridden


def _warc(path, body: bytes, content_type: str):
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        headers = StatusAndHeaders("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body)))],
                                   protocol="HTTP/1.1")
        w.write_record(w.create_warc_record("http://example.ru/news", "response", payload=io.BytesIO(body),
                                            http_headers=headers))
    return path


def test_cp1251_page_with_latin1_header_reaches_langid(tmp_path, data_dir, lid_model):
    """Regression (issue 14): this page was mojibake and then rejected ``langid:low_score``."""
    from datapipe.stages.langid import LangId, LangIdConfig

    text = " ".join(_sentences(data_dir, "ru")[:8])
    body = f"<html><head><title>Новости</title></head><body><p>{text}</p></body></html>".encode("cp1251")
    items = read_items(_warc(tmp_path / "ru.warc.gz", body, "text/html; charset=iso-8859-1"))
    assert items[0].row["charset"].lower() == "iso-8859-1"
    table = extract_rows([it.row for it in items], main_content=False)
    row = table.to_pylist()[0]
    assert row["charset"] == "cp1251" and CHARSET_OVERRIDE in row["warnings"]
    assert text in row["text"] and row["reject_reason"] is None
    out = LangId(LangIdConfig())(table).to_pylist()[0]
    assert out["lang"] == "ru" and out["reject_reason"] is None
