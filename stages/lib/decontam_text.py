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
entities or NFKC changed lengths: a character made from an entity (or by NFKC from a character
and its marks) spans the original characters it came from.
"""
from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from datapipe.stages.lib import decontam_kernel
from datapipe.stages.lib.minhash import MULT, encode
from datapipe.stages.lib.minhash import tables as fold_tables

#: Words dropped when a colon follows them (labels of quiz layouts and of llm-foundry's item text).
LABELS = ("question", "questions", "answer", "answers", "passage", "context", "options", "choices", "choice",
          "solution", "explanation", "hypothesis", "premise", "goal", "problem", "q", "a", "input", "output",
          "ending", "endings", "sentence", "article", "story")
#: Choice markers: single letters (see the module docstring for where they count as markers).
MARKERS = ("a", "b", "c", "d", "e")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")
_KEEP_PUNCT = set(":().")  # the separators label rules look at


@lru_cache(maxsize=1)
def _nfkc_tables() -> tuple[np.ndarray, np.ndarray]:
    """bool (0x110000,) each: ``changes`` = NFKC rewrites the character in a way the word stream
    sees (not a separator that only becomes separators, e.g. NBSP, or ``…`` -> ``...``, which
    does: label rules look at ``.``, ``:``, ``(``, ``)``); ``mark`` = a combining mark (category
    M), which NFKC may compose with the character before it."""
    def word(c: str) -> bool:
        return unicodedata.category(c)[0] in "LNM"

    changes, mark = np.zeros(0x110000, bool), np.zeros(0x110000, bool)
    for cp in range(0x80, 0x30000):
        c = chr(cp)
        mark[cp] = unicodedata.category(c)[0] == "M"
        n = unicodedata.normalize("NFKC", c)
        changes[cp] = n != c and (word(c) or any(word(x) or x in _KEEP_PUNCT for x in n))
    return changes, mark


def _nfkc_edits(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, NFKC text)`` of each character NFKC changes, with the combining marks after
    it (one cluster: a base and its marks compose), found by table lookups over the code points."""
    changes, mark = _nfkc_tables()
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    mk = mark[cps]
    before_mark = np.zeros(len(cps), bool)
    before_mark[:-1] = mk[1:]
    starts = np.flatnonzero((changes[cps] | before_mark) & ~mk)
    if len(mk) and mk[0]:
        starts = np.concatenate([[0], starts])
    if not len(starts):
        return []
    base = np.flatnonzero(~mk)  # a cluster ends at the next character that is no mark
    k = np.searchsorted(base, starts, side="right")
    ends = np.where(k < len(base), base[np.minimum(k, len(base) - 1)], len(cps))
    out = []
    for a, b in zip(starts.tolist(), ends.tolist()):
        piece = text[a:b]
        new = unicodedata.normalize("NFKC", piece)
        if new != piece:
            out.append((a, b, new))
    return out


def _rewrite(text: str, reps: list[tuple[int, int, str]]) -> tuple[str, np.ndarray, np.ndarray] | None:
    """``text`` with the sorted, disjoint ``(start, end, new)`` replacements made, and per character
    of the result the [start, end) of the original characters it comes from; None when nothing changed."""
    if not reps:
        return None
    parts, pos = [], 0
    src_a, src_b, lens = [], [], []  # per piece: original span and length in the new text
    for a, b, new in reps:
        if a > pos:
            parts.append(text[pos:a])
            src_a.append(pos), src_b.append(-1), lens.append(a - pos)  # -1: copied, maps one to one
        parts.append(new)
        src_a.append(a), src_b.append(b), lens.append(len(new))
        pos = b
    parts.append(text[pos:])
    src_a.append(pos), src_b.append(-1), lens.append(len(text) - pos)
    lens_ = np.array(lens, np.int64)
    piece = np.repeat(np.arange(len(lens)), lens_)
    within = np.arange(int(lens_.sum())) - np.repeat(np.cumsum(lens_) - lens_, lens_)
    a_, b_ = np.array(src_a, np.int64)[piece], np.array(src_b, np.int64)[piece]
    copied = b_ < 0
    start = np.where(copied, a_ + within, a_)
    end = np.where(copied, a_ + within + 1, b_)
    return "".join(parts), start, end


def prepare(text: str) -> tuple[str, np.ndarray | None, np.ndarray | None]:
    """Entities unescaped and NFKC applied (per character and its combining marks, so offsets stay exact).

    Returns ``(text', start, end)``: ``start``/``end`` int64 (len(text'),) map each character of
    ``text'`` to the original [start, end), or both None when ``text' == text``.
    """
    start = end = None
    if "&" in text:
        r = _rewrite(text, [(m.start(), m.end(), u) for m in _ENTITY.finditer(text)
                            if (u := html.unescape(m.group())) != m.group()])
        if r is not None:
            text, start, end = r
    if not text.isascii() and not unicodedata.is_normalized("NFKC", text):
        r = _rewrite(text, _nfkc_edits(text))
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

    return decontam_kernel


@lru_cache(maxsize=1)
def tables():

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
    fold, pool, pool_off, cls = tables()
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
    if not 1 <= m <= len(MULT):
        raise ValueError(f"n-gram length must be in 1..{len(MULT)}, got {m}")
    total = int(np.maximum(np.diff(w.offsets) - m + 1, 0).sum())
    out, pos = np.empty(total, np.uint64), np.empty(total, np.int64)
    k = _kernel().gram_hashes(w.hashes, w.offsets, m, MULT, out, pos)
    return out[:k], pos[:k]

