"""Compiled (numba) kernels for the ``poly64`` shingle hash and the MinHash signatures.

One pass over the UTF-8 bytes of a batch of NFKC'd texts does the rest of the normalization policy
(:mod:`datapipe.stages.lib.normalize`) and the hashing, work that cost Python's ``casefold``,
a regex, ``split``/``join`` and a dozen numpy passes per batch (profiled: ~80% of the time):
drop invisible characters, casefold (table from Python's own ``str.casefold``), split on exactly
the characters ``str.split()`` splits on, write the collapsed text (= :func:`normalize_text`'s
output), hash words and word n-grams (:func:`datapipe.stages.lib.minhash.poly64_hash32`
semantics) and take the per-permutation minimum of datasketch's ``affine32`` permutations.

Compiled with ``cache=True``: the first import on a machine compiles (~seconds, once) and later
processes (Dask workers included) load the machine code from ``__pycache__``.
"""
from __future__ import annotations

import numba as nb
import numpy as np

U64 = np.uint64
_Q = U64(0x243F6A8885A308D3)
_C1, _C2 = U64(0xFF51AFD7ED558CCD), U64(0xC4CEB9FE1A85EC53)
_S33, _S32 = U64(33), U64(32)
_M32 = U64(0xFFFFFFFF)


@nb.njit(cache=True, inline="always")
def fmix64(x):
    x ^= x >> _S33
    x *= _C1
    x ^= x >> _S33
    x *= _C2
    return x ^ (x >> _S33)


@nb.njit(cache=True, inline="always")
def _fmix32(x):
    # On a uint64 holding a 32-bit value; masks keep it 32-bit after each multiply.
    x ^= x >> U64(16)
    x = (x * U64(0x85EBCA6B)) & _M32
    x ^= x >> U64(13)
    x = (x * U64(0xC2B2AE35)) & _M32
    return x ^ (x >> U64(16))


#: Entries of the per-code-point table (:func:`fold_tables`) that are not pool indices.
KEEP, DROP, SPACE = -1, -2, -3
#: Code points >= this are kept as they are (casefold changes none of them; tested).
TABLE_SIZE = 0x20000


def fold_tables(invisible) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-code-point table of the byte-level part of the normalization policy.

    ``table`` int32 (TABLE_SIZE,): SPACE where ``str.isspace``, DROP where ``invisible`` (a compiled
    regex) matches, KEEP where ``str.casefold`` is the identity, else an index k whose casefolded
    UTF-8 bytes are ``pool[offsets[k]:offsets[k+1]]`` (uint8 / int64). Built from Python's own
    ``isspace``/``casefold`` (~50 ms), so it follows the interpreter's Unicode version.
    """
    table = np.full(TABLE_SIZE, KEEP, dtype=np.int32)
    pool, offsets = [], [0]
    for cp in range(TABLE_SIZE):
        ch = chr(cp)
        if ch.isspace():
            table[cp] = SPACE
        elif invisible.match(ch):
            table[cp] = DROP
        elif (f := ch.casefold()) != ch:
            b = f.encode("utf-8", "surrogatepass")
            table[cp] = len(offsets) - 1
            pool.append(b)
            offsets.append(offsets[-1] + len(b))
    return table, np.frombuffer(b"".join(pool), dtype=np.uint8).copy(), np.array(offsets, dtype=np.int64)


@nb.njit(cache=True)
def _words(buf, start, end, out, out_pos, wh, table, pool, pool_off):
    """Split NFKC'd UTF-8 ``buf[start:end]`` into casefolded words (invisible characters dropped,
    any ``str.isspace`` run a separator): their poly64 hashes go to ``wh`` and the words joined by
    single spaces to ``out[out_pos:]``. Returns (number of words, bytes written)."""
    nw, o, i, ln = 0, out_pos, start, 0
    p, q = U64(0), U64(1)
    while i < end:
        c = buf[i]
        w = 1
        f = table[c] if c < 0x80 else KEEP
        if c >= 0x80:                      # decode a multi-byte character (input is valid UTF-8)
            if c < 0xE0:
                cp, w = (np.int64(c & 0x1F) << 6) | np.int64(buf[i + 1] & 0x3F), 2
            elif c < 0xF0:
                cp = (np.int64(c & 0x0F) << 12) | (np.int64(buf[i + 1] & 0x3F) << 6) | np.int64(buf[i + 2] & 0x3F)
                w = 3
            else:
                cp = (np.int64(c & 0x07) << 18) | (np.int64(buf[i + 1] & 0x3F) << 12) | \
                    (np.int64(buf[i + 2] & 0x3F) << 6) | np.int64(buf[i + 3] & 0x3F)
                w = 4
            f = table[cp] if cp < TABLE_SIZE else KEEP
        if f == SPACE or f == DROP:
            if f == SPACE and ln:
                wh[nw] = fmix64(p + U64(ln))
                nw += 1
                p, q, ln = U64(0), U64(1), 0
            i += w
            continue
        if ln == 0 and nw:
            out[o] = 32
            o += 1
        if f == KEEP:                      # the common case: copy the character's bytes
            for j in range(i, i + w):
                b = buf[j]
                out[o] = b
                o += 1
                p += (U64(b) + U64(1)) * q
                q *= _Q
            ln += w
        else:
            for j in range(pool_off[f], pool_off[f + 1]):
                b = pool[j]
                out[o] = b
                o += 1
                p += (U64(b) + U64(1)) * q
                q *= _Q
                ln += 1
        i += w
    if ln:
        wh[nw] = fmix64(p + U64(ln))
        nw += 1
    return nw, o - out_pos


@nb.njit(cache=True, inline="always")
def _shingle(wh, i, m, mult):
    """64-bit hash of the shingle of words ``wh[i:i+m]`` (before the final ``>> 32``)."""
    s = U64(0)
    for k in range(m):
        s += wh[i + k] * mult[k]
    return fmix64(s)


@nb.njit(cache=True, nogil=True)
def minhash_batch(buf, starts, ends, ngram, mult, a, b, sig, norm, table, pool, pool_off):
    """Signatures of the docs ``buf[starts[d]:ends[d]]`` (uint8 UTF-8 of NFKC'd text).

    Writes ``sig[d]`` (uint32, (n, P), must be pre-filled with 2**32-1) and the collapsed text of
    doc d to ``norm[3*starts[d]:3*starts[d] + L_d]`` (uint8, 3*len(buf): casefolding can triple
    a character's bytes). Returns L (int64, (n,)):
    0 means no word (``sig[d]`` left untouched). ``mult``: uint64 per-position multipliers,
    ``a``/``b``: uint32 affine32 permutation parameters (P,); ``table``/``pool``/``pool_off``
    from :func:`fold_tables`.
    """
    n, p_len = len(starts), len(a)
    lens = np.zeros(n, dtype=np.int64)
    wh = np.empty(max(1, int((ends - starts).max()) // 2 + 1) if n else 1, dtype=np.uint64)
    cur = np.empty(p_len, dtype=np.uint32)
    for d in range(n):
        nw, nbytes = _words(buf, starts[d], ends[d], norm, 3 * starts[d], wh, table, pool, pool_off)
        lens[d] = nbytes
        if nw == 0:
            continue
        cur[:] = np.uint32(0xFFFFFFFF)
        m = min(nw, ngram)
        for i in range(max(nw - ngram + 1, 1)):
            h = np.uint32(_fmix32(_shingle(wh, i, m, mult) >> _S32))
            for k in range(p_len):                        # vectorized by LLVM over permutations
                v = np.uint32(a[k] * h + b[k])
                if v < cur[k]:
                    cur[k] = v
        sig[d, :] = cur
    return lens


@nb.njit(cache=True, nogil=True)
def shingle_sets(buf, starts, ends, ngram, mult, table, pool, pool_off):
    """Sorted unique 64-bit poly64 shingle hashes of each doc (for exact Jaccard).

    Returns (values uint64 concatenated in doc order, offsets int64 (n+1,)).
    """
    n = len(starts)
    wh = np.empty(max(1, int((ends - starts).max()) // 2 + 1) if n else 1, dtype=np.uint64)
    scratch = np.empty(3 * int((ends - starts).max()) + 1 if n else 1, dtype=np.uint8)
    out = np.empty(max(1, len(buf) // 2 + n), dtype=np.uint64)
    off = np.zeros(n + 1, dtype=np.int64)
    o = 0
    for d in range(n):
        nw, _ = _words(buf, starts[d], ends[d], scratch, 0, wh, table, pool, pool_off)
        if nw:
            m = min(nw, ngram)
            k = max(nw - ngram + 1, 1)
            hs = np.empty(k, dtype=np.uint64)
            for i in range(k):
                hs[i] = _shingle(wh, i, m, mult)
            hs = np.unique(hs)
            out[o:o + len(hs)] = hs
            o += len(hs)
        off[d + 1] = o
    return out[:o], off


@nb.njit(cache=True, nogil=True)
def pair_jaccard(vals_a, off_a, ia, vals_b, off_b, ib):
    """Exact Jaccard of sets ``a[ia[k]]`` and ``b[ib[k]]`` (sorted unique uint64 runs given by
    values/offsets) for each k; float64 (k,). Two empty sets give 0."""
    out = np.zeros(len(ia), dtype=np.float64)
    for k in range(len(ia)):
        i, ie = off_a[ia[k]], off_a[ia[k] + 1]
        j, je = off_b[ib[k]], off_b[ib[k] + 1]
        na, nb_ = ie - i, je - j
        inter = 0
        while i < ie and j < je:
            x, y = vals_a[i], vals_b[j]
            if x == y:
                inter += 1
                i += 1
                j += 1
            elif x < y:
                i += 1
            else:
                j += 1
        union = na + nb_ - inter
        out[k] = inter / union if union else 0.0
    return out
