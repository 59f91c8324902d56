"""MinHash LSH near-dup tasks: band hashes, candidate pairs per bucket, and their check.

Sizes stay bounded whatever the largest cluster:

* buckets are reduced in two passes over the partition's segments: first (count, minimum node)
  per bucket, then each row becomes star edges (large bucket) or joins the all-pairs set (bucket
  of at most ``all_pairs_max_bucket``), so a giant bucket is streamed, never held;
* edges carry node ids only. To check a pair by exact Jaccard, each shard computes the shingle
  set of its documents that start an edge **once** and writes them to ``sets/s<i>`` (sorted by
  node, in blocks); the shard holding the other end reads just the blocks it needs. A text is
  read from its shard at most twice (as source, as destination) and its set is read at most
  once per shard that has an edge to it, however many edges it has.
"""
from __future__ import annotations

import json
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from datapipe.engine.shuffle_store import U64, mix64, partition_of
from datapipe.stages.lib.minhash import jaccard_estimate, shingle_sets
from datapipe.stages.lib.normalize import nfkc
from datapipe.stages.phases.dedup.steps import (
    EDGES,
    Ctx,
    Shard,
    edits,
    live_mask,
    node_ids,
    node_rows,
    shard_of,
)

_BANDS = pa.schema([("bh", pa.uint64()), ("node", pa.uint64())])
_SET_BLOCK = 2048   # nodes per block of a sets file (a reader fetches whole blocks)


def load_signatures(ctx: Ctx, shard: Shard) -> tuple[np.ndarray, np.ndarray]:
    """(sig uint32 (rows, num_perm), valid bool (rows,)) of a shard, line edits applied.
    Raises ValueError when a stored signature does not have ``num_perm`` values."""
    p = ctx.cfg.minhash.num_perm
    col = shard.store.read(shard.rel, ["minhash"]).column("minhash").combine_chunks()
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    lens = pc.list_value_length(col).to_numpy(zero_copy_only=False)
    if np.any(lens[valid] != p):
        raise ValueError(f"{shard.rel}: minhash length {set(lens[valid].tolist())} != num_perm {p}; "
                         "dedup_signatures and dedup.minhash configs differ")
    sig = np.full((len(col), p), np.uint32(0xFFFFFFFF), dtype=np.uint32)
    sig[valid] = pc.list_flatten(col).to_numpy().reshape(-1, p)
    e = edits(ctx, shard)
    if e is not None:
        sig[node_rows(e.column("node").to_numpy())] = \
            pc.list_flatten(e.column("minhash").combine_chunks()).to_numpy().reshape(-1, p)
    return sig, valid


def load_texts(ctx: Ctx, shard: Shard, rows: np.ndarray) -> list[str]:
    """NFKC'd texts of ``rows`` (int64) of a shard, line edits applied."""
    col = shard.store.read(shard.rel, ["text"]).column("text")
    texts = col.take(pa.array(rows, pa.int64())).to_pylist() if len(rows) else []
    e = edits(ctx, shard)
    if e is not None:
        new = dict(zip(node_rows(e.column("node").to_numpy()).tolist(), e.column("text").to_pylist()))
        texts = [new.get(r, t) for r, t in zip(rows.tolist(), texts)]
    return [nfkc(t) for t in texts]


def _band_hash(block: np.ndarray, band: int) -> np.ndarray:
    """uint64 hash of each row of a (n, rows) uint32 block; the band index is mixed in."""
    mult = mix64(np.arange(1, block.shape[1] + 1, dtype=U64)) | U64(1)
    return mix64((block.astype(U64) * mult).sum(axis=1, dtype=U64) + U64(band))


def bands_map(ctx: Ctx, i: int) -> int:
    shard = ctx.shard(i)
    sig, valid = load_signatures(ctx, shard)
    rows = np.flatnonzero(valid & live_mask(ctx, shard, len(valid)))
    nodes = node_ids(shard, len(valid))[rows]
    r = ctx.rows
    with ctx.writer("bands", f"s{i}", _BANDS) as w:
        for j in range(ctx.bands):   # a band's hash mixes in the band: buckets of different bands never meet
            bh = _band_hash(sig[rows, j * r:(j + 1) * r], j) if len(rows) else np.zeros(0, U64)
            w.add(pa.table({"bh": bh, "node": nodes}, schema=_BANDS), partition_of(bh, ctx.nparts))
    return len(rows)


def _bucket_stats(bh: np.ndarray, node: np.ndarray, cnt: np.ndarray | None = None):
    """Per distinct bucket: (bh sorted, count, minimum node)."""
    order = np.lexsort((node, bh))
    bh, node = bh[order], node[order]
    cnt = np.ones(len(bh), np.int64) if cnt is None else cnt[order]
    first = np.r_[True, bh[1:] != bh[:-1]] if len(bh) else np.zeros(0, bool)
    start = np.flatnonzero(first)
    return bh[start], np.add.reduceat(cnt, start) if len(start) else cnt[:0], node[start]


def _all_pairs(node: np.ndarray, bh: np.ndarray) -> np.ndarray:
    """Every pair (lower node, higher node) inside each bucket of small-bucket rows."""
    order = np.lexsort((node, bh))
    bh, node = bh[order], node[order]
    first = np.r_[True, bh[1:] != bh[:-1]] if len(bh) else np.zeros(0, bool)
    start = np.flatnonzero(first)
    size = np.diff(np.r_[start, len(bh)])
    out = [np.zeros((0, 2), U64)]
    for m in np.unique(size[size >= 2]):       # one vectorized pass per bucket size
        lo = start[size == m]
        i, j = np.triu_indices(m, 1)
        out.append(np.stack([node[lo[:, None] + i].ravel(), node[lo[:, None] + j].ravel()], axis=1))
    return np.concatenate(out).astype(U64)


def bands_reduce(ctx: Ctx, k: int) -> int:
    """Candidate pairs of partition ``k``'s buckets: all pairs of a bucket of at most
    ``all_pairs_max_bucket`` members, star edges (bucket minimum -> member) of a larger one.
    Streams the segments twice (bucket stats, then edges); memory is the number of buckets."""
    stats, acc = [], 0
    for seg in ctx.work.segments("bands", k, _BANDS):
        stats.append(_bucket_stats(seg.column("bh").to_numpy(), seg.column("node").to_numpy()))
        acc += len(stats[-1][0])
        if len(stats) > 1 and acc > ctx.flush_rows:
            stats = [_merge_stats(stats)]
            acc = len(stats[0][0])
    ubh, cnt, mn = _merge_stats(stats) if stats else (np.zeros(0, U64),) * 3
    max_all = ctx.cfg.minhash.all_pairs_max_bucket
    small_bh, small_node, n = [], [], 0
    step = "cand" if ctx.cfg.minhash.verify != "none" else "cc0"
    with ctx.writer(step, f"r{k}", EDGES) as w:
        for seg in ctx.work.segments("bands", k, _BANDS):
            bh, node = seg.column("bh").to_numpy(), seg.column("node").to_numpy()
            pos = np.searchsorted(ubh, bh)
            c, m = cnt[pos], mn[pos]
            star = (c > max_all) & (node != m)
            n += _emit(ctx, w, m[star], node[star], step)
            small = (c >= 2) & (c <= max_all)
            small_bh.append(bh[small])
            small_node.append(node[small])
        if small_bh:
            p = np.unique(_all_pairs(np.concatenate(small_node), np.concatenate(small_bh)), axis=0)
            n += _emit(ctx, w, p[:, 0], p[:, 1], step)
    return n


def _merge_stats(stats):
    bh = np.concatenate([s[0] for s in stats])
    cnt = np.concatenate([s[1] for s in stats])
    mn = np.concatenate([s[2] for s in stats])
    return _bucket_stats(bh, mn, cnt)


def _emit(ctx: Ctx, w, src: np.ndarray, dst: np.ndarray, step: str) -> int:
    """Candidate edges to the check (by source shard), or straight to components (both ways)."""
    if step == "cand":
        w.add(pa.table({"src": src, "dst": dst}, schema=EDGES), shard_of(src))
    else:
        write_edges(ctx, w, src, dst)
    return len(src)


def write_edges(ctx: Ctx, w, src: np.ndarray, dst: np.ndarray) -> None:
    """Undirected edges in both directions, partitioned by the hash of the source node."""
    a, b = np.r_[src, dst].astype(U64), np.r_[dst, src].astype(U64)
    w.add(pa.table({"src": a, "dst": b}, schema=EDGES), partition_of(a, ctx.nparts))


# -- the check ----------------------------------------------------------------------------------
def _sets(ctx: Ctx, shard: Shard, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) per row: shingle-hash sets (exact) or signatures (estimate), as uint64."""
    if len(rows) == 0:  # no edge from this shard: nothing to read, and no kernel to load for it
        return np.zeros(0, U64), np.zeros(1, np.int64)
    if ctx.cfg.minhash.verify == "exact":
        return shingle_sets(load_texts(ctx, shard, rows), ctx.cfg.minhash.ngram)
    s = load_signatures(ctx, shard)[0][rows].astype(U64)
    return s.reshape(-1), np.arange(len(rows) + 1, dtype=np.int64) * s.shape[1]


def verify_src(ctx: Ctx, i: int) -> int:
    """For candidate edges whose source is in shard ``i``: write the sources' sets once
    (``sets/s<i>.arrow``) and pass the edges (ids only) on by destination shard.
    Returns the edges passed on (a pair found in several bands counts once per segment)."""
    shard = ctx.shard(i)
    srcs, n = [], 0
    with ctx.writer("cand2", f"s{i}", EDGES) as w:
        for seg in ctx.work.segments("cand", i, EDGES):
            u = np.unique(np.stack([seg.column("src").to_numpy(), seg.column("dst").to_numpy()], axis=1), axis=0)
            srcs.append(np.unique(u[:, 0]))
            w.add(pa.table({"src": u[:, 0], "dst": u[:, 1]}, schema=EDGES), shard_of(u[:, 1]))
            n += len(u)
    nodes = np.unique(np.concatenate(srcs)) if srcs else np.zeros(0, U64)
    vals, off = _sets(ctx, shard, node_rows(nodes))
    _write_sets(ctx, f"sets/s{i}.arrow", nodes, vals, off)
    return n


def _write_sets(ctx: Ctx, rel: str, nodes, vals, off) -> None:
    starts = nodes[::_SET_BLOCK]
    schema = pa.schema([("node", pa.uint64()), ("vals", pa.large_list(pa.uint64()))],
                       metadata={"block_first_node": json.dumps([int(x) for x in starts])})
    path = ctx.work.path(rel)
    ctx.work.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"   # two attempts of one task never share a temporary file
    with ctx.work.fs.open(tmp, "wb") as fh, pa.ipc.new_file(fh, schema) as w:
        for b in range(0, len(nodes), _SET_BLOCK):
            e = min(b + _SET_BLOCK, len(nodes))
            lists = pa.LargeListArray.from_arrays(pa.array(off[b:e + 1] - off[b], pa.int64()),
                                                  pa.array(vals[off[b]:off[e]], pa.uint64()))
            w.write_batch(pa.record_batch([pa.array(nodes[b:e], pa.uint64()), lists], schema=schema))
    ctx.work.fs.mv(tmp, path)


def _read_sets(ctx: Ctx, src_shard: int, need: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(nodes, values, offsets) of the blocks of ``sets/s<src_shard>`` holding sorted ``need``."""
    with ctx.work.fs.open(ctx.work.path(f"sets/s{src_shard}.arrow"), "rb") as fh:
        r = pa.ipc.open_file(fh)
        starts = np.array(json.loads(r.schema.metadata[b"block_first_node"]), dtype=U64)
        blocks = np.unique(np.searchsorted(starts, need, side="right") - 1)
        t = pa.Table.from_batches([r.get_batch(int(b)) for b in blocks], schema=r.schema)
    col = t.column("vals").combine_chunks()
    return (t.column("node").to_numpy(), pc.list_flatten(col).to_numpy(),
            col.offsets.to_numpy() - col.offsets[0].as_py())


def verify_dst(ctx: Ctx, j: int) -> tuple[int, int]:
    """Keep the candidate edges into shard ``j`` whose Jaccard (exact or estimated) is >= the
    threshold; write them to ``cc0``. The destination sets are computed once; the source sets
    are read block-wise, one source shard at a time. Returns (edges seen, kept)."""
    m = ctx.cfg.minhash
    e = ctx.work.gather("cand2", j, EDGES)   # edges into one shard: at most bands x bucket size per document
    seen = kept = 0
    with ctx.writer("cc0", f"s{j}", EDGES) as w:
        if e.num_rows == 0:
            return 0, 0
        u = np.unique(np.stack([e.column("src").to_numpy(), e.column("dst").to_numpy()], axis=1), axis=0)
        src, dst = u[:, 0], u[:, 1]
        dnodes, dinv = np.unique(dst, return_inverse=True)
        dv, do = _sets(ctx, ctx.shard(j), node_rows(dnodes))
        sshard = shard_of(src)
        for s in np.unique(sshard):
            sel = np.flatnonzero(sshard == s)
            snodes, sv, so = _read_sets(ctx, int(s), np.unique(src[sel]))
            ia = np.searchsorted(snodes, src[sel])
            if m.verify == "exact":
                # Lazy: numba loads only when a run verifies pairs (loading a manifest imports the phases).
                from datapipe.stages.lib.minhash_kernel import pair_jaccard

                jac = pair_jaccard(sv, so, ia.astype(np.int64), dv, do, dinv[sel].astype(np.int64))
            else:
                p = m.num_perm
                jac = jaccard_estimate(sv.reshape(-1, p)[ia], dv.reshape(-1, p)[dinv[sel]])
            ok = jac >= m.threshold
            write_edges(ctx, w, src[sel][ok], dst[sel][ok])
            seen, kept = seen + len(sel), kept + int(ok.sum())
    return seen, kept
