"""Compiled (numba) kernels of the decontamination matcher: words with character offsets, n-gram hashes.

The hash family is the MinHash shingles' ``poly64`` (:mod:`datapipe.stages.lib.minhash`): a word's
casefolded UTF-8 bytes ``b_0..b_{L-1}`` hash to ``fmix64(sum_j (b_j + 1) * Q**j + L)`` (mod 2**64),
and a sequence of words ``w_0..w_{m-1}`` to ``fmix64(sum_k word(w_k) * M_k)``, all 64 bits kept
(MinHash keeps the top 32). Unlike the dedup kernel, punctuation and symbols separate words here
(only letters, digits and marks make words) and every word carries its code-point offsets in the
text, so a match can be shown and cut out.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from datapipe.stages.lib.minhash_kernel import DROP, KEEP, SPACE, TABLE_SIZE, fmix64

U64 = np.uint64
_Q = U64(0x243F6A8885A308D3)
#: Classes of :func:`class_table`: a separator that is not whitespace (punctuation, symbols).
PUNCT, WORD = 0, 1


def class_table() -> np.ndarray:
    """int8 (TABLE_SIZE,): WORD for code points of Unicode categories L*, N*, M*, else PUNCT
    (whitespace and invisible characters are told apart by the fold table, not by this one)."""
    import unicodedata

    cats = np.zeros(TABLE_SIZE, dtype=np.int8)
    for cp in range(TABLE_SIZE):
        if unicodedata.category(chr(cp))[0] in "LNM":
            cats[cp] = WORD
    return cats


@nb.njit(cache=True, nogil=True)
def words_batch(buf, starts, ends, fold, pool, pool_off, cls, wh, ws, we, prev_cp, next_cp, line0, doc_off):
    """Words of the docs ``buf[starts[d]:ends[d]]`` (UTF-8).

    Writes per word k (arrays sized for the worst case, ``len(buf) // 2 + n + 1``): ``wh[k]`` its
    poly64 hash (uint64), ``ws[k]``/``we[k]`` its code-point offsets [start, end) in its doc,
    ``prev_cp[k]`` the code point right before it (-1 at the start), ``next_cp[k]`` the first
    code point after it that is not a space or tab (-1 when a newline or the end comes first),
    ``line0[k]`` True for the first word of a line; ``doc_off`` (n+1,) the word range of each doc.
    ``fold``/``pool``/``pool_off``: :func:`minhash_kernel.fold_tables`; ``cls``: :func:`class_table`.
    Returns the number of words.
    """
    nw = 0
    for d in range(len(starts)):
        doc_off[d] = nw
        i, ch, ln = starts[d], 0, 0
        p, q = U64(0), U64(1)
        pending = -1            # word waiting for its next_cp
        prev = -1
        fresh_line = True
        while i <= ends[d]:
            if i == ends[d]:
                cp, w = -2, 1   # end sentinel: closes the last word
            else:
                c = buf[i]
                w = 1
                cp = np.int64(c)
                if c >= 0x80:
                    if c < 0xE0:
                        cp, w = (np.int64(c & 0x1F) << 6) | np.int64(buf[i + 1] & 0x3F), 2
                    elif c < 0xF0:
                        cp = (np.int64(c & 0x0F) << 12) | (np.int64(buf[i + 1] & 0x3F) << 6) | np.int64(buf[i + 2] & 0x3F)
                        w = 3
                    else:
                        cp = (np.int64(c & 0x07) << 18) | (np.int64(buf[i + 1] & 0x3F) << 12) | \
                            (np.int64(buf[i + 2] & 0x3F) << 6) | np.int64(buf[i + 3] & 0x3F)
                        w = 4
            if cp >= 0:
                f = fold[cp] if cp < TABLE_SIZE else KEEP
                word = f != SPACE and f != DROP and (cp >= TABLE_SIZE or cls[cp] == WORD)
            else:
                f = SPACE
                word = False
            if f == DROP:       # invisible characters vanish, even inside a word
                i += w
                ch += 1
                continue
            newline = cp == 10 or cp == 13 or cp == 0x2028 or cp == 0x2029
            if not word and ln:  # a word ends
                wh[nw] = fmix64(p + U64(ln))
                we[nw] = ch
                next_cp[nw] = -1
                pending = nw
                nw += 1
                p, q, ln = U64(0), U64(1), 0
            if pending >= 0 and cp >= 0 and (newline or f != SPACE):
                next_cp[pending] = -1 if newline else cp
                pending = -1
            if newline:
                fresh_line = True
            if word:
                if ln == 0:
                    ws[nw] = ch
                    prev_cp[nw] = prev
                    line0[nw] = fresh_line
                    fresh_line = False
                if f == KEEP:
                    for j in range(i, i + w):
                        p += (U64(buf[j]) + U64(1)) * q
                        q *= _Q
                    ln += w
                else:
                    for j in range(pool_off[f], pool_off[f + 1]):
                        p += (U64(pool[j]) + U64(1)) * q
                        q *= _Q
                        ln += 1
            prev = cp
            i += w
            ch += 1
    doc_off[len(starts)] = nw
    return nw


@nb.njit(cache=True, nogil=True)
def gram_hashes(wh, doc_off, m, mult, out, pos):
    """Hashes of every run of ``m`` consecutive words inside each doc (``doc_off`` (n+1,) word
    ranges of ``wh``). Writes ``out[j]`` (uint64) and ``pos[j]`` (the run's first word index in
    ``wh``); returns the number written (``sum max(0, words_d - m + 1)``)."""
    j = 0
    for d in range(len(doc_off) - 1):
        a, b = doc_off[d], doc_off[d + 1]
        for i in range(a, b - m + 1):
            s = U64(0)
            for k in range(m):
                s += wh[i + k] * mult[k]
            out[j] = fmix64(s)
            pos[j] = i
            j += 1
    return j


@nb.njit(cache=True, nogil=True)
def lookup(keys, bucket_off, shift, h, lo, hi):
    """Entries of each query hash ``h[j]`` in the sorted ``keys``: ``keys[lo[j]:hi[j]]`` (empty
    when absent). ``bucket_off`` (2**B + 1,) int64: where the keys with top B bits ``b`` start
    (``shift = 64 - B``), so a lookup reads one bucket of a few keys, not a binary search's ~22."""
    for j in range(len(h)):
        x = h[j]
        b = x >> U64(shift)
        a, e = bucket_off[b], bucket_off[b + 1]
        while a < e and keys[a] < x:
            a += 1
        s = a
        while a < e and keys[a] == x:
            a += 1
        lo[j] = s
        hi[j] = a
