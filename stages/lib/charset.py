"""Decoding HTML payload bytes to text, robust to wrong or unknown charset labels.

Order of evidence (first that decodes the bytes without error wins):

1. a byte-order mark (UTF-8/UTF-16/UTF-32; case B11);
2. valid UTF-8 with at least one multi-byte sequence: such bytes are almost never legacy
   single-byte text, so they beat a contrary label (case B13: meta says ISO-8859-1);
3. the HTTP ``Content-Type`` charset, then the ``<meta>`` charset in the first 4 KiB, each
   normalised first (HTML entities unescaped, dashes folded, WHATWG-style aliases such as
   ``iso-8859-1 -> cp1252``; case B14's ``iso-8859&#8211;1``);
4. resiliparse ``detect_encoding`` (its statistical detector);
5. cp1252 with replacement characters, as a last resort (never raises).
"""
from __future__ import annotations

import codecs
import html
import re

from resiliparse.parse.encoding import detect_encoding

_BOMS = [
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
]
_META = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([^"'\s/>;]+)""", re.I)
# WHATWG Encoding Standard: browsers decode these labels as windows-1252.
_ALIASES = {"iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252", "us-ascii": "cp1252",
            "ascii": "cp1252", "iso8859-1": "cp1252", "x-user-defined": "cp1252"}
_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"), "-")


def normalize_label(label: str | None) -> str | None:
    """Canonical Python codec name for a declared charset label, or None if unknown."""
    if not label:
        return None
    s = html.unescape(label).translate(_DASHES).strip().strip("'\"").lower().replace("_", "-")
    s = _ALIASES.get(s, s)
    try:
        return codecs.lookup(s).name
    except LookupError:
        return None


def meta_charset(data: bytes) -> str | None:
    """Charset label declared by a ``<meta>`` tag in the first 4 KiB, or None."""
    m = _META.search(data[:4096])
    return m.group(1).decode("ascii", "replace") if m else None


def _try(data: bytes, enc: str | None) -> str | None:
    if not enc:
        return None
    try:
        return data.decode(enc)
    except (UnicodeDecodeError, LookupError):
        return None


def decode_html(data: bytes, http_charset: str | None = None) -> tuple[str, str]:
    """Decode HTML bytes. Returns ``(text, codec_name)``; never raises."""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            text = _try(data[len(bom):], enc)
            if text is not None:
                return text, enc
    if not data.isascii():
        text = _try(data, "utf-8")
        if text is not None:
            return text, "utf-8"
    for label in (http_charset, meta_charset(data)):
        enc = normalize_label(label)
        # A declared UTF-16 without a BOM on ASCII-looking bytes is a lie (the page parsed as HTML).
        if enc and enc.startswith("utf-16") and b"\x00" not in data[:512]:
            continue
        text = _try(data, enc)
        if text is not None:
            return text, enc
    enc = normalize_label(detect_encoding(data))
    text = _try(data, enc)
    if text is not None:
        return text, enc
    return data.decode("cp1252", errors="replace"), "cp1252"
