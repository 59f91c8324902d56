"""The decontamination index: 64-bit hashes of the n-grams of benchmark test items, and lookups.

File format (``datapipe.decontam/1``): an uncompressed NumPy ``.npz`` with

* ``keys`` uint64 (K,), sorted: n-gram hashes (:func:`decontam_text.gram_hashes`), one entry per
  (hash, item) pair, so a hash shared by several items repeats;
* ``item`` int32 (K,): the item of each entry (index into the item arrays);
* ``item_benchmark`` int16 (I,), ``item_id`` str (I,), ``benchmarks`` str (B,);
* ``short_len`` int64, ``short_keys`` uint64, ``short_item`` int32 (S,), sorted by length then hash:
  the items shorter than n words indexed whole (one hash of all their m words);
* ``meta``: JSON (format, n, source fingerprint, counts per benchmark).

At ~12 bytes per entry the full evalsets plus WikiText-2 test take ~40 MB on disk and in memory.
Lookups are batched: all n-gram hashes of a batch of documents go through one compiled loop that
reads the keys' bucket (by the top 21 hash bits: one or two cache lines) instead of a binary search.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from datapipe.stages.lib.decontam_kernel import lookup
from datapipe.stages.lib.decontam_text import Words, gram_hashes, words

FORMAT = "datapipe.decontam/1"
_BUCKET_BITS = 21  # 2M buckets of ~2 keys each for the full evalsets; 16 MB of offsets


@dataclass
class Hits:
    """Matches in a batch: per hit, ``doc`` (int64), ``first``/``last`` word indices (int64, into the
    batch's :class:`Words`, inclusive) and ``item`` (int32). A run shared by several items gives one
    hit per item."""

    doc: np.ndarray
    first: np.ndarray
    last: np.ndarray
    item: np.ndarray


def build_arrays(items, n: int, min_words: int, batch: int = 4096) -> dict:
    """Index arrays of ``items`` (:class:`decontam_sources.Item`): n-grams of every text with at
    least ``n`` words; a shorter text of an item with ``whole`` set gives one hash of all its words
    when it has at least ``min_words`` (shorter ones are too common to be evidence)."""
    benchmarks = sorted({it.benchmark for it in items})
    bidx = {b: i for i, b in enumerate(benchmarks)}
    texts, owner, whole = [], [], []
    for i, it in enumerate(items):
        for t in it.texts:
            texts.append(t)
            owner.append(i)
            whole.append(it.whole)
    owner, whole = np.array(owner, np.int64), np.array(whole, bool)
    keys, item_of, skeys, sitem, slen = [], [], [], [], []
    skipped = 0
    for a in range(0, len(texts), batch):
        w = words(texts[a:a + batch])
        own, wh = owner[a:a + batch], whole[a:a + batch]
        counts = np.diff(w.offsets)
        h, pos = gram_hashes(w, n)
        keys.append(h)
        item_of.append(own[np.searchsorted(w.offsets, pos, side="right") - 1])
        small = (counts < n) & wh & (counts >= min_words)
        skipped += int(((counts < n) & wh & (counts < min_words) & (counts > 0)).sum())
        for m in np.unique(counts[small]):
            hs, ps = gram_hashes(w, int(m))
            d = np.searchsorted(w.offsets, ps, side="right") - 1
            sel = small[d] & (counts[d] == m)  # a doc of exactly m words has one run of m words
            skeys.append(hs[sel])
            sitem.append(own[d[sel]])
            slen.append(np.full(int(sel.sum()), m, np.int64))
    k = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
    it = np.concatenate(item_of).astype(np.int32) if item_of else np.zeros(0, np.int32)
    pairs = np.unique(np.stack([k, it.astype(np.uint64)], 1), axis=0)  # sorted by hash, then item
    sk = np.concatenate(skeys) if skeys else np.zeros(0, np.uint64)
    si = np.concatenate(sitem).astype(np.uint64) if sitem else np.zeros(0, np.uint64)
    sl = np.concatenate(slen).astype(np.uint64) if slen else np.zeros(0, np.uint64)
    spairs = np.unique(np.stack([sl, sk, si], 1), axis=0)  # sorted by length, hash, item
    per_bench = {b: 0 for b in benchmarks}
    for it_ in items:
        per_bench[it_.benchmark] += 1
    return {"keys": pairs[:, 0].copy(), "item": pairs[:, 1].astype(np.int32),
            "item_benchmark": np.array([bidx[it_.benchmark] for it_ in items], np.int16),
            "item_id": np.array([it_.item_id for it_ in items], dtype=str),
            "benchmarks": np.array(benchmarks, dtype=str), "short_len": spairs[:, 0].astype(np.int64),
            "short_keys": spairs[:, 1].copy(), "short_item": spairs[:, 2].astype(np.int32),
            "n": n, "min_words": min_words, "items_per_benchmark": per_bench, "skipped_short": skipped}


def save(path: Path, arrays: dict, meta: dict) -> None:
    """Write the index atomically (a temporary file beside ``path``, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {k: arrays[k] for k in ("keys", "item", "item_benchmark", "item_id", "benchmarks", "short_len",
                                   "short_keys", "short_item")}
    meta = {"format": FORMAT, "n": arrays["n"], "min_words": arrays["min_words"], "entries": len(arrays["keys"]),
            "items_per_benchmark": arrays["items_per_benchmark"], "skipped_short": arrays["skipped_short"], **meta}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, meta=np.array(json.dumps(meta, sort_keys=True)), **body)
    os.replace(tmp, path)


def read_meta(path: Path) -> dict:
    """The ``meta`` record of an index file (reads only that member). Raises OSError, ValueError."""
    with np.load(path, allow_pickle=False) as z:
        return json.loads(str(z["meta"]))


@lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime_ns: int) -> str:  # size, mtime_ns: the cache key only
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def content_hash(path: Path) -> str:
    """sha256 of the index file's bytes (cached per path, size and mtime in this process)."""
    st = os.stat(path)
    return _sha256(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


class DecontamIndex:
    """A loaded index (see the module docstring). ``n``: n-gram length; ``benchmarks``: names."""

    def __init__(self, path: Path):
        with np.load(path, allow_pickle=False) as z:
            self.meta = json.loads(str(z["meta"]))
            if self.meta.get("format") != FORMAT:
                raise ValueError(f"{path}: not a {FORMAT} index (format {self.meta.get('format')!r})")
            self.keys = z["keys"]
            self.item = z["item"]
            self.item_benchmark = z["item_benchmark"]
            self.item_id = z["item_id"].tolist()
            self.benchmarks = z["benchmarks"].tolist()
            self.short_len, self.short_keys, self.short_item = z["short_len"], z["short_keys"], z["short_item"]
        self.n = int(self.meta["n"])
        self._buckets()

    @classmethod
    def from_items(cls, items, n: int = 13, min_words: int = 8) -> DecontamIndex:
        """An in-memory index of ``items`` (no file): used for ad-hoc checks such as the ablation's."""
        self = cls.__new__(cls)
        a = build_arrays(items, n, min_words)
        self.meta = {"format": FORMAT, "n": n}
        self.keys, self.item, self.item_benchmark = a["keys"], a["item"], a["item_benchmark"]
        self.item_id, self.benchmarks = a["item_id"].tolist(), a["benchmarks"].tolist()
        self.short_len, self.short_keys, self.short_item = a["short_len"], a["short_keys"], a["short_item"]
        self.n = n
        self._buckets()
        return self

    def _buckets(self) -> None:
        self._short_filter = {}
        for m in np.unique(self.short_len):
            f = np.zeros(1 << 16, bool)
            f[(self.short_keys[self.short_len == m] >> np.uint64(48)).astype(np.int64)] = True
            self._short_filter[int(m)] = f
        top = (self.keys >> np.uint64(64 - _BUCKET_BITS)).astype(np.int64)
        self._off = np.zeros((1 << _BUCKET_BITS) + 1, np.int64)
        np.cumsum(np.bincount(top, minlength=1 << _BUCKET_BITS), out=self._off[1:])

    def entries(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[lo, hi) entry ranges of the query hashes ``h`` (uint64) in ``keys``; int64 each."""

        lo, hi = np.empty(len(h), np.int64), np.empty(len(h), np.int64)
        lookup(self.keys, self._off, 64 - _BUCKET_BITS, h, lo, hi)
        return lo, hi

    def match(self, w: Words) -> Hits:
        """Every run of ``n`` words (and of each whole-item length ``m < n``) of each doc that is in
        the index, with the items it belongs to."""
        docs, firsts, lasts, items = [], [], [], []

        def add(pos, m, item):
            docs.append(np.searchsorted(w.offsets, pos, side="right") - 1)
            firsts.append(pos)
            lasts.append(pos + m - 1)
            items.append(item)

        h, pos = gram_hashes(w, self.n)
        lo, hi = self.entries(h)
        found = hi > lo
        if found.any():
            lo, hi, pos = lo[found], hi[found], pos[found]
            reps = hi - lo
            entry = np.repeat(lo - np.cumsum(np.concatenate([[0], reps[:-1]])), reps) + np.arange(reps.sum())
            add(np.repeat(pos, reps), self.n, self.item[entry])
        longest = int(np.diff(w.offsets).max()) if len(w.offsets) > 1 else 0
        for m in np.unique(self.short_len):  # a few thousand keys: a cache-resident binary search
            if m > longest:
                continue
            a, b = np.searchsorted(self.short_len, [m, m + 1])
            keys, item = self.short_keys[a:b], self.short_item[a:b]
            h, pos = gram_hashes(w, int(m))
            maybe = self._short_filter[int(m)][(h >> np.uint64(48)).astype(np.int64)]  # 64 KB, in cache
            h, pos = h[maybe], pos[maybe]
            i = np.searchsorted(keys, h)
            ok = i < len(keys)
            ok[ok] = keys[i[ok]] == h[ok]
            for j in np.flatnonzero(ok):  # rare: one hit per item sharing the hash
                k = int(i[j])
                while k < len(keys) and keys[k] == h[j]:
                    add(pos[j:j + 1], int(m), item[k:k + 1])
                    k += 1
        if not docs:
            z = np.zeros(0, np.int64)
            return Hits(z, z, z, np.zeros(0, np.int32))
        return Hits(np.concatenate(docs), np.concatenate(firsts), np.concatenate(lasts), np.concatenate(items))
