"""Synthetic near-duplicate corpus for dedup at scale (issue 17): unrelated documents, planted
near-duplicate pairs and a few giant template clusters, with the truth of each.

* unrelated documents: ``words`` words drawn from a Zipf-like law over a synthetic vocabulary
  (random letter strings), so two of them share almost no word 5-gram;
* planted pairs (``pair_fraction`` of the documents): a copy of an earlier document with one word
  in ``edit_every`` substituted (Jaccard of 5-gram sets ~0.90 for ``edit_every=100``), on a
  mirror URL with a query string: the original's canonical URL must survive;
* giant clusters (``giant_fraction`` of the documents, split over ``giant_clusters``): one
  template page with only its first word ("title") changed per member, the boilerplate pages of
  a real crawl; one member has the canonical URL, the others ``?ref=N`` copies.

Dates are random and independent of which copy is canonical, so the survivor rule is what
decides. Everything is a function of ``seed`` (and of ``shard`` for :func:`shard_docs`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def vocabulary(size: int = 30000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lens = rng.integers(3, 10, size)
    words = {"".join(rng.choice(_LETTERS, n)) for n in lens}
    return np.array(sorted(words), dtype=object)


@dataclass
class Corpus:
    """``docs``: rows (id, text, url, warc_date); ``planted``: (original id, copy id) pairs;
    ``giant_ids``: the member ids of each giant cluster (by template); ``canonical``: its
    first member (the one with the canonical URL when ``canonical``)."""

    docs: list[dict] = field(default_factory=list)
    planted: list[tuple[str, str]] = field(default_factory=list)
    giant_ids: list[list[str]] = field(default_factory=list)
    canonical: list[str] = field(default_factory=list)


def _text(rng, vocab, cdf, words: int) -> list[str]:
    return list(vocab[np.minimum(np.searchsorted(cdf, rng.random(words)), len(vocab) - 1)])


def make_corpus(n: int, seed: int = 0, words: int = 80, pair_fraction: float = 0.1,
                giant_fraction: float = 0.3, giant_clusters: int = 1, edit_every: int = 100,
                prefix: str = "", vocab: np.ndarray | None = None, template_seed: int | None = None,
                canonical: bool = True, giant_words: int | None = None) -> Corpus:
    """``n`` documents (see module docstring); ids ``<prefix>d<i>`` in generation order.
    ``template_seed``: draw the templates from it (equal seeds: the same clusters in every
    chunk of a corpus); ``canonical``: give each cluster's first member the canonical URL (one
    chunk only, so that a corpus has one canonical page per template); ``giant_words``: words of
    a template (default ``words``)."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary(seed=0) if vocab is None else vocab
    ranks = np.arange(1, len(vocab) + 1)
    probs = np.cumsum(1.0 / ranks ** 0.8)
    probs /= probs[-1]   # the cumulative law: a word is the first rank above a uniform draw
    c = Corpus()
    n_giant = int(giant_fraction * n)
    per = [n_giant // giant_clusters + (j < n_giant % giant_clusters) for j in range(giant_clusters)]
    trng = rng if template_seed is None else np.random.default_rng(template_seed)
    templates = [_text(trng, vocab, probs, giant_words or words) for _ in per]
    kinds = np.array(sum(([j] * m for j, m in enumerate(per)), []) + [-1] * (n - n_giant))
    rng.shuffle(kinds)
    first_of = {}
    c.giant_ids, c.canonical = [[] for _ in per], [None] * len(per)
    originals: list[int] = []
    for i, kind in enumerate(kinds):
        did = f"{prefix}d{i}"
        date = f"2026-0{1 + rng.integers(0, 9)}-{1 + rng.integers(0, 28):02d}T00:00:00Z"
        if kind >= 0:
            w = list(templates[kind])
            w[0] = f"title{prefix}{i}"
            site = f"https://template{kind if template_seed is not None else prefix + str(kind)}.example/page"
            if kind not in first_of:
                first_of[kind] = did
                c.canonical[kind] = did
            if canonical and did == first_of[kind]:
                url = site
            else:
                url = f"{site}?ref={prefix}{i}"
            c.giant_ids[kind].append(did)
        elif originals and rng.random() < pair_fraction / max(1e-9, 1 - giant_fraction):
            o = originals.pop(int(rng.integers(0, len(originals))))    # each original copied once
            w = c.docs[o]["text"].split(" ")
            for p in range(int(rng.integers(0, edit_every)), len(w), edit_every):
                w[p] = str(vocab[rng.integers(0, len(vocab))])
            url = f"https://mirror.example/{prefix}{i}?mirror=1"
            c.planted.append((c.docs[o]["id"], did))
        else:
            w = _text(rng, vocab, probs, words)
            url = f"https://www.site.example/{prefix}{i}"
            originals.append(i)
        c.docs.append({"id": did, "text": " ".join(w), "url": url, "warc_date": date})
    return c
