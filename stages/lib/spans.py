"""Cutting a text into the sentence spans the span-level safety stages score, and the
per-document aggregates of their scores (``stages/span_score.py``; rules in :func:`split_units`)."""
from __future__ import annotations

import numpy as np
import regex

from datapipe.stages.lib import words as wd

# Sentence ends as in words.py (the rule stages' segmentation), applied line by line.
_SENT_END = regex.compile(wd._SENT_END)
# A title before a name ("Dr. Smith") ends no sentence: the same list as words.py.
_TITLE_END = regex.compile(wd._TITLE_ABBREV.removesuffix(r"\s+\S") + r"\s*$")
_BREAKS = regex.compile(r"\r\n|[\n\r\x0b\x0c\x85\u2028\u2029]")


def _units(piece: str, unsegmented: bool) -> int:
    # Word units: whitespace words, or non-space characters in unspaced scripts (words.py's rule).
    return sum(1 for ch in piece if not ch.isspace()) // 2 if unsegmented else len(piece.split())


def split_spans(text: str, lang: str | None = None, min_words: int = 4, max_words: int = 64) -> list[str]:
    """The scoring units of one text (see :func:`split_units`, which also gives each unit's sentence)."""
    return [u for u, _ in split_units(text, lang, min_words, max_words)]


def split_units(text: str, lang: str | None = None, min_words: int = 4,
                max_words: int = 64) -> list[tuple[str, str | None]]:
    """The scoring units of one text: sentences, at most ``max_words`` words, at least ``min_words``,
    each as ``(unit, core)``: ``core`` is the one piece of at least ``min_words`` words in a unit
    that short pieces were joined to (None when the unit is a single piece). The stages score a
    unit as the higher of the unit and its core, so a joined "VIDEO 3:45" cannot hide a sentence.

    Lines are split at sentence ends (``words.py``: ``. ! ? …`` and their Devanagari, Arabic and
    Ethiopic forms before a space or the line end, ``。！？`` anywhere; not after a title such as
    ``Dr.``). A piece shorter than ``min_words`` is joined to the one before it (the first to the
    one after it) while the result stays within ``max_words``: a 2-word menu line or "Kids love
    it!" has too few features to be scored alone, and the models' false positives concentrate
    there. A piece longer than ``max_words`` is cut into ``max_words`` windows, so that an
    unpunctuated 2,000-word blob cannot dilute one slur. In
    unspaced languages (``words.UNSEGMENTED``: zh, ja, th...) two characters count as one word.
    """
    unseg = wd.is_unsegmented(lang)
    pieces: list[str] = []
    for line in _BREAKS.split(text):
        line = line.strip()
        start = 0
        for m in _SENT_END.finditer(line):
            if _TITLE_END.search(line, start, m.end()):
                continue
            if line[start:m.end()].strip():
                pieces.append(line[start:m.end()].strip())
            start = m.end()
        if line[start:].strip():
            pieces.append(line[start:].strip())
    merged: list[str] = []
    sizes: list[int] = []
    cores: list[str | None] = []  # the piece of >= min_words in a joined unit (at most one)
    parts: list[int] = []
    for piece in pieces:
        n = _units(piece, unseg)
        # Join only while the result fits one window: a window cut must never split a sentence
        # that was joined to a run of short menu lines.
        if merged and (n < min_words or sizes[-1] < min_words) and sizes[-1] + n <= max_words:
            merged[-1] += " " + piece
            sizes[-1] += n
            parts[-1] += 1
            if n >= min_words:
                cores[-1] = piece
        else:
            merged.append(piece)
            sizes.append(n)
            parts.append(1)
            cores.append(piece if n >= min_words else None)
    out: list[tuple[str, str | None]] = []
    for piece, core, k in zip(merged, cores, parts):
        if unseg:
            lim = 2 * max_words
            out += [(piece[i:i + lim], None) for i in range(0, len(piece), lim)]
        else:
            w = piece.split()
            if len(w) <= max_words:
                out.append((piece, core if k > 1 else None))
            else:
                out += [(" ".join(w[i:i + max_words]), None) for i in range(0, len(w), max_words)]
    return out


_SPAN_CACHE: dict[tuple, list[tuple[str, str | None]]] = {}
_SPAN_CACHE_SIZE = 1024


def cached_spans(text: str, lang: str | None, min_words: int, max_words: int) -> list[tuple[str, str | None]]:
    # The three span stages run one after the other on the same batch: segment each text once.
    key = (text, lang, min_words, max_words)
    hit = _SPAN_CACHE.get(key)
    if hit is None:
        if len(_SPAN_CACHE) >= _SPAN_CACHE_SIZE:
            _SPAN_CACHE.clear()
        hit = _SPAN_CACHE[key] = split_units(text, lang, min_words, max_words)
    return hit


def span_aggregates(span_scores: np.ndarray, span_docs: np.ndarray, span_chars: np.ndarray,
                    doc_chars: np.ndarray, n_docs: int, span_threshold: float) -> dict[str, np.ndarray]:
    """Per-document aggregates of span scores (NaN / 0 for a document without spans).

    ``max``: highest span score; ``spans``: spans scored; ``flagged``: spans scoring above
    ``span_threshold``; ``flagged_frac``: flagged / spans; ``flagged_char_frac``: characters of the
    flagged spans / characters of all spans.
    """
    mx = np.full(n_docs, -np.inf)
    np.maximum.at(mx, span_docs, span_scores.astype(np.float64))
    mx[np.isneginf(mx)] = np.nan
    flagged = span_scores > span_threshold
    n = np.bincount(span_docs, minlength=n_docs)
    nf = np.bincount(span_docs, weights=flagged, minlength=n_docs)
    cf = np.bincount(span_docs, weights=flagged * span_chars, minlength=n_docs)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"max": mx, "spans": n, "flagged": nf.astype(np.int64),
                "flagged_frac": np.where(n > 0, nf / np.maximum(n, 1), np.nan),
                "flagged_char_frac": np.where(doc_chars > 0, cf / np.maximum(doc_chars, 1), np.nan)}
