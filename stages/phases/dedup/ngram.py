"""Paragraph- and n-gram-level dedup (DCLM's BFF and Dolma's paragraph dedup), with an
exact sharded set instead of a Bloom filter, so the result is the same for any number of tasks.

Units: a *paragraph* is a line (``\\n``-separated) whose :func:`normalize_text` is not empty;
its *grams* are its normalized text itself (``unit: paragraph``) or its word ``ngram``-grams
(``unit: ngram``, 13 by default as in BFF; a paragraph of fewer words is one gram), each as a
64-bit xxh3 hash. A document counts each distinct gram once, so repeats inside one document
never make it a duplicate of itself. Of the documents holding a gram, the *keeper* is the one
with the smallest ``(reference first, xxh3_64(id))``: a stable order of ids that does not depend
on shards, tasks or input order. A gram is *duplicated* in every other document holding it.
Keepers are chosen among the documents alive when the step starts (after exact, lines and
near dedup), before either mode applies.

* ``document`` mode: a document whose duplicated fraction of grams is ``>= doc_threshold`` is
  dropped (``dedup:ngram``, ``duplicate_of`` = the keeper of most of its duplicated grams);
* ``paragraph`` mode: a paragraph whose duplicated fraction of grams is ``>= threshold`` is
  removed from the text (a modification: ``bytes_out`` drops, the document stays); a document
  left without paragraphs is dropped as ``dedup:ngram``.

Both modes at once: the document test first, then paragraph removal on the survivors. False
positives: two different grams share a 64-bit hash with probability ~ m^2 / 2^65 for m distinct
grams (reported as ``ngram_false_positive_bound``); there is no filter to size.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from datapipe.engine.shuffle_store import U64, partition_of
from datapipe.stages.dedup_signatures import signature_columns
from datapipe.stages.lib.normalize import normalize_text
from datapipe.stages.phases.dedup.steps import (
    DROPS,
    Ctx,
    drop_table,
    edits,
    live_mask,
    node_ids,
    node_rows,
    shard_of,
)

NGRAM = "dedup:ngram"
_GRAMS = pa.schema([("g", pa.uint64()), ("key", pa.uint64()), ("node", pa.uint64()), ("id", pa.string())])
_DUPS = pa.schema([("node", pa.uint64()), ("g", pa.uint64()), ("keeper", pa.string())])
_H = xxhash.xxh3_64_intdigest


def paragraphs(text: str) -> list[tuple[str, str]]:
    """(raw line with its newline, normalized text) of each line of ``text``."""
    return [(x, normalize_text(x)) for x in text.splitlines(keepends=True)]


def grams(norm: str, unit: str, n: int) -> set[int]:
    """Distinct 64-bit gram hashes of one normalized paragraph (empty for a blank one)."""
    if not norm:
        return set()
    if unit == "paragraph":
        return {_H(norm.encode())}
    w = norm.split(" ")
    if len(w) <= n:
        return {_H(norm.encode())}
    return {_H(" ".join(w[i:i + n]).encode()) for i in range(len(w) - n + 1)}


def order_key(doc_id: str, own: bool) -> int:
    """The keeper order: reference documents first, then xxh3_64 of the id (63 bits)."""
    return (int(own) << 63) | (_H(doc_id.encode()) >> 1)


def _texts(ctx: Ctx, shard, n: int) -> list[str | None]:
    """Texts of the shard with line edits applied (what this step sees)."""

    texts = shard.store.read(shard.rel, ["text"]).column("text").to_pylist()
    e = edits(ctx, shard)
    if e is not None:
        for r, t in zip(node_rows(e.column("node").to_numpy()).tolist(), e.column("text").to_pylist()):
            texts[r] = t
    return texts


def ngram_map(ctx: Ctx, i: int) -> int:
    """Distinct grams of every live document of shard ``i``, scattered by gram hash."""
    c = ctx.cfg.ngram
    shard = ctx.shard(i)
    t = shard.store.read(shard.rel, ["id"])
    texts, live = _texts(ctx, shard, t.num_rows), live_mask(ctx, shard, t.num_rows)
    ids, nodes = t.column("id").to_pylist(), node_ids(shard, t.num_rows)
    n = 0
    with ctx.writer("ngram", f"s{i}", _GRAMS) as w:
        for row, (text, ok) in enumerate(zip(texts, live)):
            if not (ok and text):
                continue
            gs = set().union(*(grams(p, c.unit, c.ngram) for _, p in paragraphs(text)))
            if not gs:
                continue
            g = np.fromiter(gs, dtype=U64, count=len(gs))
            k = len(g)
            w.add(pa.table({"g": g, "key": np.full(k, order_key(ids[row], shard.own), U64),
                            "node": np.full(k, nodes[row], U64), "id": [ids[row]] * k}, schema=_GRAMS),
                  partition_of(g, ctx.nparts))
            n += k
    return n


def ngram_reduce(ctx: Ctx, k: int) -> tuple[int, int]:
    """Per gram of partition ``k``: its keeper (smallest key); every other holder gets a
    (node, gram, keeper id) row, sent to its shard. Two passes, memory = distinct grams."""
    best_g, best_k, best_id = [], [], []
    for seg in ctx.work.segments("ngram", k, _GRAMS):
        best_g.append(seg.column("g").to_numpy())
        best_k.append(seg.column("key").to_numpy())
        best_id.append(seg.column("id").combine_chunks())
        if sum(map(len, best_g)) > 2 * ctx.flush_rows:
            best_g, best_k, best_id = _min_per_gram(best_g, best_k, best_id)
    g, key, kid = _min_per_gram(best_g, best_k, best_id)
    g, key, kid = g[0], key[0], kid[0]
    dups = 0
    with ctx.writer("ngram_dups", f"r{k}", _DUPS) as w:
        for seg in ctx.work.segments("ngram", k, _GRAMS):
            sg, sk = seg.column("g").to_numpy(), seg.column("key").to_numpy()
            pos = np.searchsorted(g, sg)
            lose = sk != key[pos]
            nodes = seg.column("node").to_numpy()[lose]
            w.add(pa.table({"node": nodes, "g": sg[lose], "keeper": kid.take(pa.array(pos[lose]))}, schema=_DUPS),
                  shard_of(nodes))
            dups += int(lose.sum())
    return len(g), dups


def _min_per_gram(gs, ks, ids):
    g = np.concatenate(gs) if gs else np.zeros(0, U64)
    k = np.concatenate(ks) if ks else np.zeros(0, U64)
    i = pa.chunked_array(ids, pa.string()).combine_chunks() if ids else pa.array([], pa.string())
    order = np.lexsort((k, g))
    g, k = g[order], k[order]
    first = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
    sel = order[first]
    return [g[first]], [k[first]], [i.take(pa.array(sel, pa.int64()))]


def ngram_edit(ctx: Ctx, i: int) -> tuple[int, int]:
    """Apply the modes to shard ``i``'s documents with duplicated grams: drops to
    ``drops_ngram``, new texts to ``edits_ngram/s<i>``. Returns (docs dropped, paragraphs removed)."""
    c = ctx.cfg.ngram
    shard = ctx.shard(i)
    d = ctx.work.gather("ngram_dups", i, _DUPS)
    dup_by_row: dict[int, set[int]] = {}
    keeper_by_row: dict[int, list[str]] = {}
    for node, g, kp in zip(d.column("node").to_numpy().tolist(), d.column("g").to_numpy().tolist(),
                           d.column("keeper").to_pylist()):
        r = node & 0xFFFFFFFF
        dup_by_row.setdefault(r, set()).add(g)
        keeper_by_row.setdefault(r, []).append(kp)
    t = shard.store.read(shard.rel, ["id"])
    texts = _texts(ctx, shard, t.num_rows) if dup_by_row else []
    ids, nodes = t.column("id").to_pylist(), node_ids(shard, t.num_rows)
    drop_rows, drop_of, edited, removed = [], [], [], 0
    for r in sorted(dup_by_row):
        dup, paras = dup_by_row[r], paragraphs(texts[r])
        pg = [grams(p, c.unit, c.ngram) for _, p in paras]
        total = set().union(*pg)
        kp = max(sorted(set(keeper_by_row[r])), key=keeper_by_row[r].count)
        if "document" in c.mode and len(total & dup) >= c.doc_threshold * len(total):
            drop_rows.append(r)
            drop_of.append(kp)
            continue
        if "paragraph" not in c.mode:
            continue
        keep = [raw for (raw, _), g in zip(paras, pg) if not g or len(g & dup) < c.threshold * len(g)]
        n_removed = sum(1 for g in pg if g and len(g & dup) >= c.threshold * len(g))
        if not n_removed:
            continue
        removed += n_removed
        new = "".join(keep)
        if normalize_text(new):
            edited.append((r, new))
        else:
            drop_rows.append(r)
            drop_of.append(kp)
    with ctx.work.writer("drops_ngram", f"s{i}", 0, DROPS, ctx.flush_rows) as w:
        if drop_rows:
            tab = drop_table([nodes[r] for r in drop_rows], [ids[r] for r in drop_rows], drop_of, NGRAM)
            w.add(tab, shard_of(tab.column("node").to_numpy()))
    if edited:   # fresh hash and signature, as for line edits: published rows stay consistent
        m = ctx.cfg.minhash
        new = [x for _, x in edited]
        hashes, sigs = signature_columns(new, m.num_perm, m.seed, m.ngram, m.shingle_hash)
        ctx.work.write(f"edits_ngram/s{i}.parquet", pa.table({
            "id": [ids[r] for r, _ in edited], "node": pa.array([nodes[r] for r, _ in edited], pa.uint64()),
            "text": new, "content_hash": hashes, "minhash": sigs}))
    return len(drop_rows), removed


def ngram_edits(ctx: Ctx, shard) -> pa.Table | None:
    rel = f"edits_ngram/s{shard.index}.parquet"
    return ctx.work.read(rel) if shard.own and ctx.work.exists(rel) else None


def text_bytes(t: pa.Table) -> int:
    return int(pc.sum(pc.binary_length(t.column("text"))).as_py() or 0) if t.num_rows else 0
