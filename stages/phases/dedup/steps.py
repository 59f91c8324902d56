"""Phase-2 map and reduce tasks (run on Dask workers; each touches one shard or one partition).

Every document is a *node*: ``node = shard_index << 32 | row`` (uint64) in the shard as phase 1
wrote it. Decisions are scattered to ``drops/p<shard>/`` with the document ``id`` so applying
them later does not depend on row numbers. The representative of a group (exact hash or near
component) is the minimum of ``(prio, warc_date, id)``: reference documents (prio 0) first, then
the earliest ISO-8601 ``warc_date`` (string order; null last), then the smallest ``id``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.lib.minhash_kernel import pair_jaccard
from datapipe.stages.lib.minhash import jaccard_estimate, shingle_sets
from datapipe.stages.lib.normalize import nfkc, normalize_text
from datapipe.stages.dedup_signatures import signature_columns
from datapipe.stages.phases.dedup.shuffle_store import U64, Store, mix64, partition_of

EXACT, LINES, NEAR = "dedup:exact", "dedup:lines", "dedup:near"
_ROW_MASK = U64(0xFFFFFFFF)

DROPS = pa.schema([("node", pa.uint64()), ("id", pa.string()), ("duplicate_of", pa.string()),
                   ("reason", pa.string())])
EDGES = pa.schema([("src", pa.uint64()), ("dst", pa.uint64())])


@dataclass
class Shard:
    """One input Parquet file: ``own`` shards are rewritten, reference shards only read."""

    index: int
    store: Store
    rel: str
    own: bool

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]


@dataclass
class Ctx:
    """What every task needs: scratch store, shuffle width, config, LSH shape, all shards."""

    work: Store
    nparts: int
    cfg: DedupConfig
    bands: int
    rows: int
    shards: list[Shard] = field(default_factory=list)


def shard_of(nodes: np.ndarray) -> np.ndarray:
    return (nodes >> U64(32)).astype(np.int64)


def _nodes(shard: Shard, n: int) -> np.ndarray:
    return (U64(shard.index) << U64(32)) | np.arange(n, dtype=U64)


def dropped(ctx: Ctx, shard: Shard) -> np.ndarray:
    """Nodes of ``shard`` already rejected by an earlier step (uint64 array)."""
    return ctx.work.gather("drops", shard.index, DROPS).column("node").to_numpy()


def _live_mask(ctx: Ctx, shard: Shard, n: int) -> np.ndarray:
    mask = np.ones(n, dtype=bool)
    mask[(dropped(ctx, shard) & _ROW_MASK).astype(np.int64)] = False
    return mask


def _scatter_drops(ctx: Ctx, nodes, ids, dup_of, reason: str, tag: str) -> None:
    t = pa.table({"node": pa.array(nodes, pa.uint64()), "id": pa.array(ids, pa.string()),
                  "duplicate_of": pa.array(dup_of, pa.string()),
                  "reason": pa.array([reason] * len(ids), pa.string())}, schema=DROPS)
    ctx.work.scatter("drops", t, shard_of(t.column("node").to_numpy()), tag)


def _first_of_groups(keys: list[np.ndarray]) -> np.ndarray:
    """For rows sorted by ``keys``: bool array, True where a new group starts."""
    n = len(keys[0])
    first = np.zeros(n, dtype=bool)
    if n:
        first[0] = True
        for k in keys:
            first[1:] |= k[1:] != k[:-1]
    return first


def _pick_representatives(t: pa.Table, group_cols: list[str], reason: str, ctx: Ctx, tag: str) -> Counter:
    """Sort ``t`` (group cols, prio, date, id, node), keep the first row of every group and
    reject the other own rows with ``duplicate_of`` = the kept id. Returns {group size: count}."""
    t = t.sort_by([(c, "ascending") for c in group_cols] + [("prio", "ascending"), ("date", "ascending"),
                                                            ("id", "ascending")])
    first = _first_of_groups([t.column(c).to_numpy() for c in group_cols])
    start = np.flatnonzero(first)
    sizes = np.diff(np.r_[start, len(first)])
    rep_row = np.repeat(start, sizes)
    ids = t.column("id").to_numpy(zero_copy_only=False)
    lose = ~first & (t.column("prio").to_numpy() == 1)
    _scatter_drops(ctx, t.column("node").to_numpy()[lose], ids[lose], ids[rep_row[lose]], reason, tag)
    return Counter({int(k): int(v) for k, v in zip(*np.unique(sizes[sizes > 1], return_counts=True))})


def _order_cols(shard: Shard, t: pa.Table, rows: np.ndarray) -> dict:
    return {"prio": pa.array(np.full(len(rows), 1 if shard.own else 0, dtype=np.int8)),
            "date": t.column("warc_date").take(pa.array(rows)),
            "id": t.column("id").take(pa.array(rows)),
            "node": pa.array(_nodes(shard, t.num_rows)[rows])}


# -- exact -------------------------------------------------------------------------------------
def exact_map(ctx: Ctx, shard: Shard) -> int:
    t = shard.store.read(shard.rel, ["id", "warc_date", "content_hash"])
    h = t.column("content_hash").combine_chunks()
    raw = np.frombuffer(h.buffers()[1], dtype=">u8")[2 * h.offset: 2 * (h.offset + len(h))] if len(h) else \
        np.zeros(0, ">u8")
    rows = np.flatnonzero(h.is_valid().to_numpy(zero_copy_only=False))
    hi, lo = raw[0::2][rows].astype(U64), raw[1::2][rows].astype(U64)
    out = pa.table({"h1": hi, "h2": lo, **_order_cols(shard, t, rows)})
    ctx.work.scatter("exact", out, partition_of(hi, ctx.nparts), f"s{shard.index}")
    return len(rows)


def exact_reduce(ctx: Ctx, k: int) -> Counter:
    schema = pa.schema([("h1", pa.uint64()), ("h2", pa.uint64()), ("prio", pa.int8()), ("date", pa.string()),
                        ("id", pa.string()), ("node", pa.uint64())])
    return _pick_representatives(ctx.work.gather("exact", k, schema), ["h1", "h2"], EXACT, ctx, f"exact-{k}")


# -- lines -------------------------------------------------------------------------------------
def _line_hashes(text: str) -> tuple[list[str], list[int | None]]:
    lines = text.splitlines(keepends=True)
    return lines, [xxhash.xxh3_64_intdigest(n.encode()) if (n := normalize_text(x)) else None for x in lines]


def lines_map(ctx: Ctx, shard: Shard) -> int:
    t = shard.store.read(shard.rel, ["text"])
    live = _live_mask(ctx, shard, t.num_rows)
    hs = [h for text, ok in zip(t.column("text").to_pylist(), live) if ok and text
          for h in _line_hashes(text)[1] if h is not None]
    uniq, cnt = np.unique(np.array(hs, dtype=U64), return_counts=True)
    out = pa.table({"lh": uniq, "cnt": cnt.astype(np.int64), "shard": np.full(len(uniq), shard.index, np.int32)})
    ctx.work.scatter("lines", out, partition_of(uniq, ctx.nparts), f"s{shard.index}")
    return len(hs)


def lines_reduce(ctx: Ctx, k: int) -> int:
    schema = pa.schema([("lh", pa.uint64()), ("cnt", pa.int64()), ("shard", pa.int32())])
    t = ctx.work.gather("lines", k, schema)
    tot = t.group_by("lh").aggregate([("cnt", "sum")])
    bad = tot.filter(pc.greater(tot.column("cnt_sum"), ctx.cfg.lines.max_count)).column("lh")
    hits = t.filter(pc.is_in(t.column("lh"), value_set=bad)).select(["lh", "shard"])
    ctx.work.scatter("badlines", hits, hits.column("shard").to_numpy().astype(np.int64), f"r{k}")
    return len(bad)


def lines_edit(ctx: Ctx, shard: Shard) -> int:
    """Remove the over-frequent lines from the live docs of ``shard``; write ``edits/s<i>``
    (id, node, new text, content_hash, minhash) and reject docs left without text."""
    bad = set(ctx.work.gather("badlines", shard.index, pa.schema([("lh", pa.uint64())])).column("lh").to_pylist())
    if not bad:
        return 0
    t = shard.store.read(shard.rel, ["id", "text"])
    live = _live_mask(ctx, shard, t.num_rows)
    ids, nodes = t.column("id").to_pylist(), _nodes(shard, t.num_rows)
    edited, gone = [], []
    for row, (text, ok) in enumerate(zip(t.column("text").to_pylist(), live)):
        if not (ok and text):
            continue
        lines, hs = _line_hashes(text)
        kept = [x for x, h in zip(lines, hs) if h is None or h not in bad]
        if len(kept) == len(lines):
            continue
        new = "".join(kept)
        (edited if normalize_text(new) else gone).append((row, new))
    _scatter_drops(ctx, [nodes[r] for r, _ in gone], [ids[r] for r, _ in gone], [None] * len(gone), LINES,
                   "lines")
    if edited:
        m = ctx.cfg.minhash
        texts = [x for _, x in edited]
        hashes, sigs = signature_columns(texts, m.num_perm, m.seed, m.ngram, m.shingle_hash)
        ctx.work.write(f"edits/s{shard.index}.parquet", pa.table({
            "id": [ids[r] for r, _ in edited], "node": pa.array([nodes[r] for r, _ in edited], pa.uint64()),
            "text": texts, "content_hash": hashes, "minhash": sigs}))
    return len(edited)


def edits(ctx: Ctx, shard: Shard) -> pa.Table | None:
    rel = f"edits/s{shard.index}.parquet"
    return ctx.work.read(rel) if ctx.work.exists(rel) else None


# -- MinHash LSH -------------------------------------------------------------------------------
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
        rows = (e.column("node").to_numpy() & _ROW_MASK).astype(np.int64)
        sig[rows] = pc.list_flatten(e.column("minhash").combine_chunks()).to_numpy().reshape(-1, p)
    return sig, valid


def _band_hash(block: np.ndarray, band: int) -> np.ndarray:
    """uint64 hash of each row of a (n, rows) uint32 block; the band index is mixed in."""
    mult = mix64(np.arange(1, block.shape[1] + 1, dtype=U64)) | U64(1)
    return mix64((block.astype(U64) * mult).sum(axis=1, dtype=U64) + U64(band))


def bands_map(ctx: Ctx, shard: Shard) -> int:
    sig, valid = load_signatures(ctx, shard)
    rows = np.flatnonzero(valid & _live_mask(ctx, shard, len(valid)))
    nodes = _nodes(shard, len(valid))[rows]
    r = ctx.rows
    bh = np.concatenate([_band_hash(sig[rows, j * r:(j + 1) * r], j) for j in range(ctx.bands)]) if len(rows) \
        else np.zeros(0, U64)
    band = np.repeat(np.arange(ctx.bands, dtype=np.int32), len(rows))
    out = pa.table({"band": band, "bh": bh, "node": np.tile(nodes, ctx.bands)})
    ctx.work.scatter("bands", out, partition_of(bh, ctx.nparts), f"s{shard.index}")
    return len(rows)


def _write_edges(ctx: Ctx, src: np.ndarray, dst: np.ndarray, step: str, tag: str) -> None:
    """Write undirected edges in both directions, partitioned by source node hash."""
    a, b = np.r_[src, dst].astype(U64), np.r_[dst, src].astype(U64)
    ctx.work.scatter(step, pa.table({"src": a, "dst": b}, schema=EDGES), partition_of(a, ctx.nparts), tag)


def _bucket_pairs(node: np.ndarray, first: np.ndarray, max_all: int) -> np.ndarray:
    """Candidate pairs (n, 2) uint64 of buckets given by sorted ``node`` and group starts ``first``:
    all pairs of buckets of size <= ``max_all``, star edges (minimum -> member) of larger ones."""
    start = np.flatnonzero(first)
    size = np.diff(np.r_[start, len(first)])
    bucket = np.repeat(np.arange(len(start)), size)
    star = ~first & (size[bucket] > max_all)
    out = [np.stack([node[start[bucket[star]]], node[star]], axis=1)]
    small = np.flatnonzero((size >= 2) & (size <= max_all))
    for m in np.unique(size[small]):       # one vectorized pass per bucket size
        lo = start[small[size[small] == m]]
        i, j = np.triu_indices(m, 1)
        out.append(np.stack([node[lo[:, None] + i].ravel(), node[lo[:, None] + j].ravel()], axis=1))
    return np.concatenate(out).astype(U64) if out else np.zeros((0, 2), U64)


def bands_reduce(ctx: Ctx, k: int) -> int:
    """Candidate pairs per (band, band hash) bucket (see :func:`_bucket_pairs`), deduplicated."""
    schema = pa.schema([("band", pa.int32()), ("bh", pa.uint64()), ("node", pa.uint64())])
    t = ctx.work.gather("bands", k, schema).sort_by([("band", "ascending"), ("bh", "ascending"),
                                                     ("node", "ascending")])
    first = _first_of_groups([t.column("band").to_numpy(), t.column("bh").to_numpy()])
    pairs = np.unique(_bucket_pairs(t.column("node").to_numpy(), first, ctx.cfg.minhash.all_pairs_max_bucket),
                      axis=0)
    if ctx.cfg.minhash.verify != "none":
        tab = pa.table({"src": pairs[:, 0], "dst": pairs[:, 1]}, schema=EDGES)
        ctx.work.scatter("cand", tab, shard_of(pairs[:, 0]), f"r{k}")
    else:
        _write_edges(ctx, pairs[:, 0], pairs[:, 1], "cc0", f"r{k}")
    return len(pairs)


def load_texts(ctx: Ctx, shard: Shard, rows: np.ndarray) -> list[str]:
    """NFKC'd texts (see :func:`nfkc`) of ``rows`` (int64) of a shard, line edits applied."""
    col = shard.store.read(shard.rel, ["text"]).column("text")
    texts = col.take(pa.array(rows)).to_pylist() if len(rows) else []
    e = edits(ctx, shard)
    if e is not None:
        new = dict(zip((e.column("node").to_numpy() & _ROW_MASK).astype(np.int64).tolist(),
                       e.column("text").to_pylist()))
        texts = [new.get(r, t) for r, t in zip(rows.tolist(), texts)]
    return [nfkc(t) for t in texts]


def verify_src(ctx: Ctx, shard: Shard) -> int:
    """Attach what the check needs of the source end (its text for ``exact``, its signature for
    ``estimate``) to candidate edges whose source is in ``shard``; scatter them by destination.
    Returns the number of distinct candidate pairs."""
    e = ctx.work.gather("cand", shard.index, EDGES)
    if e.num_rows == 0:
        return 0
    # A pair found in several bands comes from up to min(bands, partitions) reduce tasks: once here.
    u = np.unique(np.stack([e.column("src").to_numpy(), e.column("dst").to_numpy()], axis=1), axis=0)
    e = pa.table({"src": u[:, 0], "dst": u[:, 1]}, schema=EDGES)
    rows = (u[:, 0] & _ROW_MASK).astype(np.int64)
    if ctx.cfg.minhash.verify == "exact":
        out = e.append_column("text", pa.array(load_texts(ctx, shard, rows), pa.large_string()))
    else:
        s = load_signatures(ctx, shard)[0][rows]
        out = e.append_column("sig", pa.FixedSizeListArray.from_arrays(pa.array(s.reshape(-1)), s.shape[1]))
    ctx.work.scatter("cand2", out, shard_of(e.column("dst").to_numpy()), f"s{shard.index}")
    return e.num_rows


def verify_dst(ctx: Ctx, shard: Shard) -> tuple[int, int]:
    """Keep candidate edges into ``shard`` whose Jaccard (exact or estimated, per config) is
    >= threshold and write them to ``cc0``. Returns (seen, kept)."""
    m = ctx.cfg.minhash
    exact = m.verify == "exact"
    extra = pa.field("text", pa.large_string()) if exact else pa.field("sig", pa.list_(pa.uint32(), m.num_perm))
    e = ctx.work.gather("cand2", shard.index, EDGES.append(extra))
    if e.num_rows == 0:
        return 0, 0
    dst = e.column("dst").to_numpy()
    rows = (dst & _ROW_MASK).astype(np.int64)
    if exact:
        uniq, inv = np.unique(rows, return_inverse=True)
        va, oa = shingle_sets(e.column("text").to_pylist(), m.ngram)
        vb, ob = shingle_sets(load_texts(ctx, shard, uniq), m.ngram)
        jac = pair_jaccard(va, oa, np.arange(e.num_rows), vb, ob, inv.astype(np.int64))
    else:
        s_src = pc.list_flatten(e.column("sig").combine_chunks()).to_numpy().reshape(-1, m.num_perm)
        jac = jaccard_estimate(s_src, load_signatures(ctx, shard)[0][rows])
    ok = jac >= m.threshold
    _write_edges(ctx, e.column("src").to_numpy()[ok], dst[ok], "cc0", f"s{shard.index}")
    return e.num_rows, int(ok.sum())


# -- representatives of near-duplicate components ------------------------------------------------
def comps_map(ctx: Ctx, shard: Shard, labels_step: str) -> int:
    lab = ctx.work.gather(labels_step, shard.index, pa.schema([("node", pa.uint64()), ("comp", pa.uint64())]))
    if lab.num_rows == 0:
        return 0
    t = shard.store.read(shard.rel, ["id", "warc_date"])
    rows = (lab.column("node").to_numpy() & _ROW_MASK).astype(np.int64)
    out = pa.table({"comp": lab.column("comp"), **_order_cols(shard, t, rows)})
    ctx.work.scatter("comps", out, partition_of(lab.column("comp").to_numpy(), ctx.nparts), f"s{shard.index}")
    return lab.num_rows


def comps_reduce(ctx: Ctx, k: int) -> Counter:
    schema = pa.schema([("comp", pa.uint64()), ("prio", pa.int8()), ("date", pa.string()), ("id", pa.string()),
                        ("node", pa.uint64())])
    return _pick_representatives(ctx.work.gather("comps", k, schema), ["comp"], NEAR, ctx, f"near-{k}")
