"""Near-duplicate evaluation set (issue 4, "Quality measurement"): real page text with controlled
edits, exact Jaccard ground truth, and pair precision/recall of the pipeline and of datasketch.

Source: the extracted text of the real pages in ``shared/data/warc/realpages-1171.warc.gz``
(``read_input`` + ``extract_one``, as phase 1 does). Each sampled page (>= ``min_words`` words,
capped at ``max_words``) gets variants with one or two edits of random size: word substitutions,
insertions, deletions, boilerplate lines added, paragraph reordering. The truth is computed, not
assumed: the exact Jaccard of the word 5-gram sets (:func:`minhash.shingles`, the bytes themselves,
no hashing) of every pair of documents, originals and variants of all pages together.
"""
from __future__ import annotations

import glob
import os
import tempfile
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp

from datapipe.stages.lib.minhash import shingles
from datapipe.stages.lib.normalize import normalize_text

#: Typical page furniture, appended/prepended by the "boilerplate" edit.
BOILERPLATE = [
    "We use cookies to improve your experience. By continuing you accept our cookie policy.",
    "Subscribe to our newsletter and never miss an update from our team.",
    "Share this article on Facebook, Twitter, LinkedIn or by email.",
    "Copyright 2026 All rights reserved. Terms of use | Privacy policy | Contact us",
    "Home | About | Blog | Shop | Careers | Help center | Sitemap",
    "Related posts: you may also like these stories from our archive.",
    "Leave a comment below. Your email address will not be published.",
    "Click here to download the app for iOS and Android devices today.",
]
EDITS = ("substitute", "insert", "delete", "boilerplate", "reorder")


def real_texts(path: str) -> list[str]:
    """Main text of every HTML response of a WARC file (empty extractions dropped), by plain
    resiliparse ``main_content=True`` (pinned in pyproject.toml), not by the extract stage: the set
    must not move when the stage's clean-up rules are retuned (issue 20 changed them and with them
    which pairs sit near the threshold)."""
    from resiliparse.extract.html2text import extract_plain_text

    from datapipe.io.readers import read_input
    from datapipe.stages.lib.charset import decode_payload

    out = []
    for it in read_input(path):
        if it.status == "document":
            text = extract_plain_text(decode_payload(it.row["payload"], it.row.get("charset")).text,
                                      main_content=True)
            if text and text.strip():
                out.append(text)
    return out


def _edit(paras: list[list[str]], kind: str, rate: float, rng, vocab: list[str]) -> list[list[str]]:
    """One edit of size ``rate`` (fraction of words, or of paragraphs for reorder) on paragraphs."""
    n = sum(map(len, paras))
    k = max(1, round(rate * n))
    flat = [(i, w) for i, p in enumerate(paras) for w in p]
    if kind == "reorder":
        order = rng.permutation(len(paras)) if len(paras) > 1 else [0]
        return [paras[i] for i in order]
    if kind == "boilerplate":
        lines = [BOILERPLATE[i].split() for i in rng.choice(len(BOILERPLATE), min(len(BOILERPLATE), 1 + k // 12),
                                                             replace=False)]
        return lines + paras if rng.random() < 0.5 else paras + lines
    pos = set(rng.choice(n, min(k, n - 1), replace=False).tolist())
    out: list[list[str]] = [[] for _ in paras]
    for j, (i, w) in enumerate(flat):
        if j in pos and kind == "delete":
            continue
        if j in pos and kind == "insert":
            out[i].append(vocab[rng.integers(len(vocab))])
        out[i].append(vocab[rng.integers(len(vocab))] if j in pos and kind == "substitute" else w)
    return [p for p in out if p]


@dataclass
class EvalSet:
    """``texts`` (originals and variants), ``base`` (index of the page each text comes from) and
    ``edit`` (e.g. ``"substitute:0.04+reorder:0.5"``; ``"original"`` for pages)."""

    texts: list[str]
    base: list[int]
    edit: list[str]


def make_eval_set(pages: list[str], n_pages: int = 120, variants: int = 6, seed: int = 0,
                  min_words: int = 80, max_words: int = 600) -> EvalSet:
    """Sample ``n_pages`` pages with >= ``min_words`` words and make ``variants`` edited copies of
    each. Edit rates are drawn so that variant-to-page Jaccard spans ~0.5-1.0 (5-grams: a word
    edit changes up to 5 shingles, hence rates of 0-10%)."""
    rng = np.random.default_rng(seed)
    cands = [p for p in pages if len(p.split()) >= min_words]
    picks = rng.choice(len(cands), min(n_pages, len(cands)), replace=False)
    vocab = sorted({w for i in picks for w in cands[i].split()})
    ev = EvalSet([], [], [])
    for b, i in enumerate(picks):
        paras, budget = [], max_words
        for line in cands[i].splitlines():
            w = line.split()[:budget]
            if w:
                paras.append(w)
                budget -= len(w)
        ev.texts.append("\n".join(" ".join(p) for p in paras))
        ev.base.append(b)
        ev.edit.append("original")
        for _ in range(variants):
            desc, cur = [], paras
            for kind in rng.choice(EDITS, 1 + int(rng.random() < 0.3), replace=False):
                rate = float(rng.uniform(0.3, 1.0) if kind == "reorder" else rng.uniform(0.0, 0.10))
                cur = _edit(cur, str(kind), rate, rng, vocab)
                desc.append(f"{kind}:{rate:.3f}")
            ev.texts.append("\n".join(" ".join(p) for p in cur))
            ev.base.append(b)
            ev.edit.append("+".join(desc))
    return ev


def exact_jaccard(texts: list[str], ngram: int = 5) -> dict[tuple[int, int], float]:
    """Exact Jaccard of the word ``ngram``-gram sets of every pair ``i < j`` sharing a shingle
    (pairs absent from the dict have Jaccard 0). Shingles of the normalized texts, compared as
    bytes; the pair intersections come from one sparse product (docs x shingles)."""
    ids: dict[bytes, int] = {}
    rows, cols = [], []
    for d, t in enumerate(texts):
        s = {ids.setdefault(x, len(ids)) for x in shingles(normalize_text(t), ngram)}
        rows += [d] * len(s)
        cols += list(s)
    x = sp.csr_matrix((np.ones(len(rows), np.int32), (rows, cols)), shape=(len(texts), max(len(ids), 1)))
    size = np.asarray(x.sum(axis=1)).ravel()
    inter = sp.triu(x @ x.T, k=1).tocoo()
    jac = inter.data / (size[inter.row] + size[inter.col] - inter.data)
    return {(int(i), int(j)): float(v) for i, j, v in zip(inter.row, inter.col, jac)}


def prf(pred: set, truth: set) -> tuple[float, float]:
    """(precision, recall) of predicted pairs against true pairs (1.0 for an empty denominator)."""
    tp = len(pred & truth)
    return (tp / len(pred) if pred else 1.0), (tp / len(truth) if truth else 1.0)


def pipeline_pairs(client, texts: list[str], config, shards: int = 3) -> tuple[set, dict[int, int]]:
    """Run the real phase 2 (:func:`run_dedup`, ``keep_work``) on ``texts`` split into ``shards``.

    Returns (verified edges as ``(i, j)`` pairs with i < j, ``rep``: text index -> index of the
    document it was deduplicated into, itself when kept), following ``duplicate_of`` chains (an
    exact duplicate of a near duplicate ends at the near representative).
    """
    from dedup_fixtures import write_shards

    from datapipe.stages.dedup_signatures import stage_config
    from datapipe.stages.phases.dedup.phase import WORK, run_dedup

    per = -(-len(texts) // shards)
    with tempfile.TemporaryDirectory(prefix="dedup_eval_") as run:
        write_shards(run, {f"part-{k:03d}": [{"id": f"{i:06d}", "text": texts[i]}
                                             for i in range(k * per, min((k + 1) * per, len(texts)))]
                           for k in range(shards)}, stage_config(config))
        run_dedup(client, run, config.model_copy(update={"keep_work": True}))
        from datapipe.engine.shuffle_store import Store
        from datapipe.stages.phases.dedup.steps import EDGES

        t = Store(os.path.join(run, WORK)).read_step("cc0", EDGES)
        edges = set()
        for s, d in zip(t.column("src").to_numpy(), t.column("dst").to_numpy()):
            a, b = int(s >> 32) * per + int(s & 0xFFFFFFFF), int(d >> 32) * per + int(d & 0xFFFFFFFF)
            edges.add((min(a, b), max(a, b)))
        dup = {}
        for f in glob.glob(os.path.join(run, "rejected", "dedup-*.parquet")):
            t = pq.read_table(f, columns=["id", "duplicate_of"])
            dup.update(zip(map(int, t.column("id").to_pylist()), map(int, t.column("duplicate_of").to_pylist())))
    rep = {}
    for i in range(len(texts)):
        j = i
        while j in dup:
            j = dup[j]
        rep[i] = j
    return edges, rep


def datasketch_pairs(sig: np.ndarray, threshold: float, num_perm: int) -> set:
    """Candidate pairs of datasketch's in-memory ``MinHashLSH(threshold, num_perm)`` (its own
    bands x rows) fed the given signatures (uint32 (n, num_perm))."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    mh = [MinHash(num_perm, seed=1, hashvalues=s, scheme="affine32") for s in sig]
    for i, m in enumerate(mh):
        lsh.insert(i, m)
    return {(min(i, j), max(i, j)) for i, m in enumerate(mh) for j in lsh.query(m) if j != i}
