"""E-mail address spans for the ``pii`` stage (rules: the ``stages/pii.py`` docstring, **email**)."""
from __future__ import annotations

import re

from datapipe.stages.lib.pii_kinds import EMAIL, Span

# Scripts written without spaces (CJK, kana, hangul, full-width forms) never join a local part, or
# "请联系tech@x.cn" would take the sentence along.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_EMAIL_RE = re.compile(
    rf"(?<![.%+@\-])(?<![^\W{_CJK}])[^\W_{_CJK}](?:[^\W{_CJK}]|[.%+\-]){{0,63}}@"
    r"((?:[^\W_](?:[\w-]{0,61}[^\W_])?\.)+)"
    rf"([A-Za-z]{{2,24}}(?![A-Za-z0-9-])|xn--[A-Za-z0-9-]{{2,59}}(?![\w-])|[^\W\d_{_CJK}]{{2,24}}(?![\w-]))"
)
# File names look like addresses: a file type as "TLD", a scale label as domain ("icon@2x.png").
_FILE_EXTS = frozenset(
    "png jpg jpeg gif svg webp avif bmp ico tif tiff heic pdf css js mjs json xml html htm php asp aspx txt csv "
    "zip gz tgz rar mp3 mp4 m4a mov avi mkv webm wav ogg woff woff2 ttf otf eot".split())
_SCALE_LABEL_RE = re.compile(r"\d+(?:[.,]\d+)?x", re.IGNORECASE)


def emails(text: str) -> list[Span]:
    out = []
    for m in _EMAIL_RE.finditer(text):
        if m.group(2).lower() in _FILE_EXTS or _SCALE_LABEL_RE.fullmatch(m.group(1).split(".", 1)[0]):
            continue
        out.append((m.start(), m.end(), EMAIL))
    return out
