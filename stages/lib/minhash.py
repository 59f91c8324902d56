"""Vectorized MinHash signatures, bit-identical to datasketch 2.0.0 ``MinHash`` (scheme ``affine32``).

datasketch 2.0.0 (``scheme="affine32"``, its default) turns each shingle into a 32-bit value ``h``
with ``hashfunc``, pre-mixes it with the 32-bit MurmurHash3 finalizer and applies ``num_perm``
permutations ``a_k * h + b_k mod 2**32`` (``a_k`` odd), drawn from ``np.random.RandomState(seed)``;
the signature is the per-permutation minimum. :func:`signatures` computes exactly that for a batch
of documents at once, so ``datasketch.MinHash(num_perm, seed, hashfunc=H).update_batch(shingles(t))``
has the same ``hashvalues`` for the shingle hash ``H`` chosen:

* ``"poly64"`` (default, fast): :func:`poly64_hash32`. Each word's UTF-8 bytes get a polynomial hash
  mod 2**64, mixed by the 64-bit MurmurHash3 finalizer; a shingle of words ``w_0..w_{L-1}`` is
  ``fmix64(sum_k word(w_k) * M_k) >> 32``. Computed by the compiled kernel
  :mod:`datapipe.stages.lib.minhash_kernel` in one pass over the bytes (no Python call per word).
* ``"xxh32"``: ``xxhash.xxh32_intdigest(shingle_bytes)`` (seed 0), one C call per shingle; slower,
  for interoperating with sketches made by plain datasketch + xxhash.

Shingles (source: the project's dedup specification, cases B22/B23): word n-grams over :func:`normalize_text` output, words
joined by one space. A document with ``1 <= words < n`` has exactly one shingle, its whole text (so
``cat`` and ``dog`` differ, B22). A document with no words has no shingle and **no signature**
(null), because the empty MinHash (all ``2**32-1``) would make all empty documents collide (B23).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import xxhash

from datapipe.stages.lib.normalize import INVISIBLE, normalize_text

U64 = np.uint64
_MASK64 = (1 << 64) - 1
#: Odd 64-bit constants (digits of pi and e, an arbitrary but fixed choice) for the byte polynomial.
_Q = 0x243F6A8885A308D3
#: Per-position multipliers of a shingle's word hashes (odd, fixed): the order of words matters.
_M = [(0xB7E151628AED2A6B + 2 * k * 0x9E3779B97F4A7C15) & _MASK64 | 1 for k in range(64)]
MAX_NGRAM = len(_M)
MULT = np.array(_M, dtype=np.uint64)


def _fmix32(x: np.ndarray) -> np.ndarray:
    """MurmurHash3 32-bit finalizer (what datasketch 2.0.0 applies before the affine32 permutation)."""
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x85EBCA6B)
    x = x ^ (x >> np.uint32(13))
    x = x * np.uint32(0xC2B2AE35)
    return x ^ (x >> np.uint32(16))


def _fmix64_int(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & _MASK64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & _MASK64
    return x ^ (x >> 33)


def _word_hash_int(word: bytes) -> int:
    p, q = 0, 1
    for byte in word:
        p = (p + (byte + 1) * q) & _MASK64
        q = (q * _Q) & _MASK64
    return _fmix64_int((p + len(word)) & _MASK64)


def poly64_hash32(shingle: bytes) -> int:
    """Scalar reference of the ``"poly64"`` shingle hash: bytes of words joined by b" " -> int in [0, 2**32).

    Slow (pure Python); meant as ``hashfunc`` for datasketch in tests. Raises ValueError when the
    shingle has more than ``MAX_NGRAM`` (64) words.
    """
    words = shingle.split(b" ")
    if len(words) > MAX_NGRAM:
        raise ValueError(f"shingle of {len(words)} words; at most {MAX_NGRAM}")
    s = sum(_word_hash_int(w) * _M[k] for k, w in enumerate(words)) & _MASK64
    return _fmix64_int(s) >> 32


def shingles(normalized: str, ngram: int) -> list[bytes]:
    """Word ``ngram``-grams of an already normalized text, as UTF-8 bytes (see module docstring)."""
    words = normalized.split(" ") if normalized else []
    if not words:
        return []
    if len(words) < ngram:
        return [" ".join(words).encode()]
    return [" ".join(words[i:i + ngram]).encode() for i in range(len(words) - ngram + 1)]


@lru_cache(maxsize=16)
def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """datasketch 2.0.0 ``affine32`` parameters ``(a, b)``: two uint32 arrays of shape (num_perm,).

    Same draws as ``MinHash._init_permutations``: ``RandomState(seed)``, ``a = 2*randint(0, 2**31) + 1``,
    then ``b = randint(0, 2**32)``.
    """
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


def _shingle_hashes_xxh32(docs: list[str], ngram: int) -> tuple[np.ndarray, np.ndarray]:
    h = xxhash.xxh32_intdigest
    per_doc = [[h(s) for s in shingles(d, ngram)] for d in docs]
    counts = np.fromiter((len(p) for p in per_doc), dtype=np.int64, count=len(docs))
    flat = np.fromiter((x for p in per_doc for x in p), dtype=np.uint32, count=int(counts.sum()))
    return flat, counts


def _kernel():
    """The compiled kernels' module, imported on first use: importing numba (~0.3 s) is no part
    of loading a manifest, which imports every stage module."""
    # Lazy: numba loads with the first signature, not with the manifest.
    from datapipe.stages.lib import minhash_kernel

    return minhash_kernel


@lru_cache(maxsize=1)
def tables():
    return _kernel().fold_tables(INVISIBLE)


def encode(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """UTF-8 bytes of ``texts`` concatenated: (buf uint8, starts int64 (n,), ends int64 (n,)).
    Lone surrogates pass through (``surrogatepass``) instead of raising."""
    parts = [t.encode("utf-8", "surrogatepass") for t in texts]
    ends = np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)))
    starts = ends - np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    return np.frombuffer(b"".join(parts), dtype=np.uint8), starts, ends


def _check(ngram: int) -> None:
    if not 1 <= ngram <= MAX_NGRAM:
        raise ValueError(f"ngram must be in 1..{MAX_NGRAM}, got {ngram}")


def poly64_signatures(nfkc_texts: list[str], num_perm: int = 128, seed: int = 1, ngram: int = 5
                      ) -> tuple[np.ndarray, np.ndarray, list[bytes]]:
    """``poly64`` MinHash signatures of texts already in NFKC (:func:`nfkc`; normalized text is too):
    the kernel does the rest of :func:`normalize_text` (the fast path).

    Returns ``(sig, valid, normalized)``: ``sig`` uint32 (n, num_perm) as :func:`signatures`,
    ``valid`` bool (n,) (False: no word), ``normalized`` the UTF-8 bytes of ``normalize_text`` of
    each text. Raises ValueError on a bad ngram.
    """
    _check(ngram)
    n = len(nfkc_texts)
    sig = np.full((n, num_perm), np.uint32(0xFFFFFFFF), dtype=np.uint32)
    if n == 0:
        return sig, np.zeros(0, dtype=bool), []
    buf, starts, ends = encode(nfkc_texts)
    a, b = permutations(num_perm, seed)
    # Casefolding can triple the bytes of a character (U+0390), so doc d writes at 3 * starts[d].
    norm = np.empty(max(3 * len(buf), 1), dtype=np.uint8)
    lens = _kernel().minhash_batch(buf, starts, ends, ngram, MULT, a, b, sig, norm, *tables())
    raw = norm.tobytes()
    return sig, lens > 0, [raw[s:s + k] for s, k in zip((3 * starts).tolist(), lens.tolist())]


def shingle_sets(normalized: list[str], ngram: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique 64-bit poly64 shingle hashes of each text (exact Jaccard on them equals the
    Jaccard of the shingle sets unless two shingles collide in 64 bits). Returns (values uint64,
    offsets int64 (n+1,)): doc d's set is ``values[offsets[d]:offsets[d+1]]``."""
    _check(ngram)
    buf, starts, ends = encode(normalized)
    return _kernel().shingle_sets(buf, starts, ends, ngram, MULT, *tables())


def signatures(normalized: list[str], num_perm: int = 128, seed: int = 1, ngram: int = 5,
               hash: str = "poly64", block: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """MinHash signatures of a batch of *normalized* (or only NFKC'd, see :func:`nfkc`) texts.

    Returns ``(sig, valid)``: ``sig`` uint32 of shape (len(normalized), num_perm), ``valid`` bool of
    shape (len(normalized),); rows with ``valid == False`` (no words) are all ``2**32-1`` and must be
    stored as null. ``hash`` is ``"poly64"`` or ``"xxh32"``; ``block`` (xxh32 only) bounds the
    shingles permuted at once (memory ~ block * num_perm * 4 bytes). Raises ValueError on a bad
    ``hash`` or ``ngram``.
    """
    _check(ngram)
    if hash == "poly64":
        sig, valid, _ = poly64_signatures(normalized, num_perm, seed, ngram)
        return sig, valid
    if hash != "xxh32":
        raise ValueError(f"unknown shingle hash {hash!r}")
    normalized = [normalize_text(t) for t in normalized]   # idempotent; accepts NFKC'd text too
    n = len(normalized)
    sig = np.full((n, num_perm), np.uint32(0xFFFFFFFF), dtype=np.uint32)
    valid = np.fromiter((bool(t) for t in normalized), dtype=bool, count=n)
    rows = np.flatnonzero(valid)
    if len(rows) == 0:
        return sig, valid
    docs = [normalized[i] for i in rows]
    hv, per_doc = _shingle_hashes_xxh32(docs, ngram)
    a, b = permutations(num_perm, seed)
    hv = _fmix32(hv)
    bounds = np.concatenate(([0], np.cumsum(per_doc)))
    # Blocks of whole documents keep the (perms x shingles) product in cache; (perms, shingles)
    # layout makes reduceat a contiguous min per row.
    buf = np.empty((num_perm, block), dtype=np.uint32)
    i = 0
    while i < len(docs):
        j = max(int(np.searchsorted(bounds, bounds[i] + block, side="right")) - 1, i + 1)
        lo, hi = bounds[i], bounds[j]
        if hi - lo > buf.shape[1]:
            buf = np.empty((num_perm, hi - lo), dtype=np.uint32)
        phv = buf[:, : hi - lo]
        np.multiply.outer(a, hv[lo:hi], out=phv)
        np.add(phv, b[:, None], out=phv)
        sig[rows[i:j]] = np.minimum.reduceat(phv, bounds[i:j] - lo, axis=1).T
        i = j
    return sig, valid


def jaccard_estimate(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Fraction of equal signature positions, row-wise: (k, P) uint32 x (k, P) -> (k,) float64."""
    return (sig_a == sig_b).mean(axis=1)
