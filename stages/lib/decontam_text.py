"""Normalised words of texts for decontamination, with their character offsets in the original text.

Normalisation (the same for benchmark items and documents, so both sides meet):

* HTML entities are unescaped (``&amp;`` -> ``&``, ``&#8217;`` -> ``’``; :func:`html.unescape`);
* Unicode NFKC (full-width and compatibility forms fold: ``Ｑｕｅｓｔｉｏｎ`` -> ``Question``, ``ﬁ`` -> ``fi``);
* full case folding (``str.casefold``: ``Straße`` -> ``strasse``);
* punctuation and symbols are stripped: only letters, digits and combining marks (Unicode
  categories L*, N*, M*) make words, anything else separates them (``don't`` -> ``don t``,
  ``3.14`` -> ``3 14``, ``has_close_elements`` -> ``has close elements``); zero-width and
  invisible format characters are deleted (:data:`normalize.INVISIBLE`);
* whitespace of any kind (newlines included) only separates words: an item split across lines
  reads as on one line;
* labels are dropped, so an item wrapped in them still matches: a label word followed by a colon
  (``Question:``, ``Answer:``, ``Passage:``, ``Q:``, ...; :data:`LABELS`) and a choice marker
  (a single letter ``a``-``e`` in parentheses, ``(B)``, or opening a line before ``.``, ``)`` or
  ``:``, ``B.``).

Offsets are code-point offsets into the text as given (Python ``str`` indices), also where
entities or NFKC changed lengths: a word made from an entity or a changed token spans the
original characters it came from.
"""
from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from datapipe.stages.lib.minhash import _MULT, encode

#: Words dropped when a colon follows them (labels of quiz layouts and of llm-foundry's item text).
LABELS = ("question", "questions", "answer", "answers", "passage", "context", "options", "choices", "choice",
          "solution", "explanation", "hypothesis", "premise", "goal", "problem", "q", "a", "input", "output",
          "ending", "endings", "sentence", "article", "story")
#: Choice markers: single letters (see the module docstring for where they count as markers).
MARKERS = ("a", "b", "c", "d", "e")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")
_TOKEN = re.compile(r"\S+")


def _rewrite(text: str, pattern: re.Pattern, fn) -> tuple[str, np.ndarray, np.ndarray] | None:
    """``text`` with each match of ``pattern`` replaced by ``fn(match text)``, and per character
    of the result the [start, end) of the original characters it comes from; None when nothing changed."""
    parts, starts, ends, pos, changed = [], [], [], 0, False
    for m in pattern.finditer(text):
        new = fn(m.group())
        if new == m.group():
            continue
        changed = True
        a, b = m.span()
        if a > pos:
            parts.append(text[pos:a])
            starts.append(np.arange(pos, a))
            ends.append(np.arange(pos + 1, a + 1))
        parts.append(new)
        starts.append(np.full(len(new), a))
        ends.append(np.full(len(new), b))
        pos = b
    if not changed:
        return None
    parts.append(text[pos:])
    starts.append(np.arange(pos, len(text)))
    ends.append(np.arange(pos + 1, len(text) + 1))
    return "".join(parts), np.concatenate(starts).astype(np.int64), np.concatenate(ends).astype(np.int64)


def _nfkc(token: str) -> str:
    return token if unicodedata.is_normalized("NFKC", token) else unicodedata.normalize("NFKC", token)


def prepare(text: str) -> tuple[str, np.ndarray | None, np.ndarray | None]:
    """Entities unescaped and NFKC applied (per whitespace token, so offsets stay local).

    Returns ``(text', start, end)``: ``start``/``end`` int64 (len(text'),) map each character of
    ``text'`` to the original [start, end), or both None when ``text' == text``.
    """
    start = end = None
    if "&" in text:
        r = _rewrite(text, _ENTITY, html.unescape)
        if r is not None:
            text, start, end = r
    if not text.isascii() and not unicodedata.is_normalized("NFKC", text):
        r = _rewrite(text, _TOKEN, _nfkc)
        if r is not None:
            text, s2, e2 = r
            if start is None:
                start, end = s2, e2
            else:  # compose: characters of the second rewrite index the first one's output
                start, end = start[s2], end[e2 - 1]
    return text, start, end


@dataclass
class Words:
    """Normalised words of a batch of texts, labels removed.

    ``hashes`` uint64 (W,): poly64 word hashes; ``start``/``end`` int64 (W,): code-point offsets
    [start, end) of each word in its original text; ``offsets`` int64 (n+1,): doc d's words are
    ``[offsets[d], offsets[d+1])``.
    """

    hashes: np.ndarray
    start: np.ndarray
    end: np.ndarray
    offsets: np.ndarray

    def count(self, d: int) -> int:
        return int(self.offsets[d + 1] - self.offsets[d])


def _kernel():
    from datapipe.stages.lib import decontam_kernel

    return decontam_kernel


@lru_cache(maxsize=1)
def _tables():
    from datapipe.stages.lib.minhash import _tables as fold_tables

    return (*fold_tables(), _kernel().class_table())


@lru_cache(maxsize=1)
def _label_hashes() -> tuple[np.ndarray, np.ndarray]:
    """Sorted word hashes of LABELS and MARKERS (computed by the kernel itself)."""
    w = _raw_words([" ".join(LABELS), " ".join(MARKERS)])
    labels = np.sort(w[0][: w[6][1]])
    markers = np.sort(w[0][w[6][1]: w[6][2]])
    return labels, markers


def _raw_words(texts: list[str]):
    buf, starts, ends = encode(texts)
    n = len(texts)
    cap = len(buf) // 2 + n + 1
    wh = np.empty(cap, np.uint64)
    ws, we = np.empty(cap, np.int64), np.empty(cap, np.int64)
    prev_cp, next_cp = np.empty(cap, np.int64), np.empty(cap, np.int64)
    line0 = np.zeros(cap, np.bool_)
    off = np.zeros(n + 1, np.int64)
    fold, pool, pool_off, cls = _tables()
    k = _kernel().words_batch(buf, starts, ends, fold, pool, pool_off, cls, wh, ws, we, prev_cp, next_cp, line0, off)
    return wh[:k], ws[:k], we[:k], prev_cp[:k], next_cp[:k], line0[:k], off


def _isin(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    i = np.searchsorted(sorted_set, values).clip(0, len(sorted_set) - 1)
    return sorted_set[i] == values


def words(texts: list[str | None]) -> Words:
    """Normalised words of ``texts`` (None reads as empty); see the module docstring."""
    prepared = [prepare(t or "") for t in texts]
    wh, ws, we, prev_cp, next_cp, line0, off = _raw_words([p[0] for p in prepared])
    labels, markers = _label_hashes()
    colon, dot, close, open_ = ord(":"), ord("."), ord(")"), ord("(")
    is_label = _isin(wh, labels) & (next_cp == colon)
    single = (we - ws) == 1
    is_marker = single & _isin(wh, markers) & (
        ((prev_cp == open_) & (next_cp == close)) | (line0 & ((next_cp == dot) | (next_cp == close) | (next_cp == colon))))
    for d, (_, s, e) in enumerate(prepared):
        if s is not None and off[d + 1] > off[d]:
            a, b = off[d], off[d + 1]
            ws[a:b], we[a:b] = s[ws[a:b]], e[we[a:b] - 1]
    keep = ~(is_label | is_marker)
    doc = np.repeat(np.arange(len(texts)), np.diff(off))
    new_off = np.zeros(len(texts) + 1, np.int64)
    np.cumsum(np.bincount(doc[keep], minlength=len(texts)), out=new_off[1:])
    return Words(wh[keep], ws[keep], we[keep], new_off)


def gram_hashes(w: Words, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Hash of every run of ``m`` consecutive words of each doc: (hashes uint64, first word index
    int64 into ``w``), docs in order. Raises ValueError unless 1 <= m <= 64."""
    if not 1 <= m <= len(_MULT):
        raise ValueError(f"n-gram length must be in 1..{len(_MULT)}, got {m}")
    total = int(np.maximum(np.diff(w.offsets) - m + 1, 0).sum())
    out, pos = np.empty(total, np.uint64), np.empty(total, np.int64)
    k = _kernel().gram_hashes(w.hashes, w.offsets, m, _MULT, out, pos)
    return out[:k], pos[:k]

