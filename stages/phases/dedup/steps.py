"""Phase-2 tasks shared by every step: the task context, shards by reference, drops, the
streaming representative pick, and the exact and line-level steps (each task touches one shard
or one shuffle partition; near-dup steps are in :mod:`.near`, components in :mod:`.components`).

Every document is a *node*: ``node = shard_index << 32 | row`` (uint64) in the shard as phase 1
wrote it. Decisions are written to the ``drops_*`` steps, partitioned by shard, with the
document ``id`` so applying them does not depend on row numbers. Which member of a group is kept
is the survivor rule of :mod:`.survivor`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from datapipe.engine.shuffle_store import FLUSH_ROWS, U64, Store, partition_of
from datapipe.stages.dedup_signatures import signature_columns
from datapipe.stages.lib.normalize import normalize_text
from datapipe.stages.phases.dedup import survivor
from datapipe.stages.phases.dedup.config import DedupConfig

EXACT, LINES, NEAR = "dedup:exact", "dedup:lines", "dedup:near"
_ROW_MASK = U64(0xFFFFFFFF)
LISTING = "shards.json"
DROP_STEPS = ("drops_exact", "drops_lines", "drops_near", "drops_ngram")

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
    """What every task gets: scratch and run stores, shuffle width, config, LSH shape and the
    plan fingerprint. Shards are passed by reference: a task reads ``work/shards.json`` (the
    listing, once per process) and gets its shard by index, so a task's arguments do not grow
    with the number of shards."""

    work: Store
    root: Store
    nparts: int
    cfg: DedupConfig
    bands: int
    rows: int
    fp: str
    flush_rows: int = FLUSH_ROWS
    dest: str = "documents"   # folder (relative to the run) the kept rows are written to

    def shard(self, i: int) -> Shard:
        ref, rel = _listing(self)[i]
        store = self.root if ref < 0 else Store(self.cfg.reference_dirs[ref], self.work.options)
        return Shard(i, store, rel, ref < 0)

    def writer(self, step: str, tag: str, schema: pa.Schema):
        return self.work.writer(step, tag, self.nparts, schema, self.flush_rows)


_LISTINGS: dict[tuple[str, str], list] = {}


def _listing(ctx: Ctx) -> list:
    key = (ctx.work.url, ctx.fp)
    if key not in _LISTINGS:
        if len(_LISTINGS) > 8:
            _LISTINGS.clear()
        _LISTINGS[key] = ctx.work.read_json(LISTING)["shards"]
    return _LISTINGS[key]


def shard_of(nodes: np.ndarray) -> np.ndarray:
    return (nodes >> U64(32)).astype(np.int64)


def node_rows(nodes: np.ndarray) -> np.ndarray:
    return (nodes & _ROW_MASK).astype(np.int64)


def node_ids(shard: Shard, n: int) -> np.ndarray:
    return (U64(shard.index) << U64(32)) | np.arange(n, dtype=U64)


def drops_of(ctx: Ctx, shard_index: int) -> pa.Table:
    """Every decision so far on shard ``shard_index`` (table of ``DROPS``)."""
    return pa.concat_tables([ctx.work.gather(s, shard_index, DROPS) for s in DROP_STEPS])


def live_mask(ctx: Ctx, shard: Shard, n: int) -> np.ndarray:
    mask = np.ones(n, dtype=bool)
    mask[node_rows(drops_of(ctx, shard.index).column("node").to_numpy())] = False
    return mask


def drop_table(nodes, ids, dup_of, reason: str) -> pa.Table:
    return pa.table({"node": pa.array(nodes, pa.uint64()), "id": pa.array(ids, pa.string()),
                     "duplicate_of": pa.array(dup_of, pa.string()),
                     "reason": pa.array([reason] * len(ids), pa.string())}, schema=DROPS)


# -- the representative of each group, streamed --------------------------------------------------
def order_schema(ctx: Ctx, group: list[pa.Field]) -> pa.Schema:
    return pa.schema(group + [pa.field("prio", pa.int8())] + survivor.key_schema(ctx.cfg.survivor)
                     + [pa.field("id", pa.string()), pa.field("node", pa.uint64())])


def order_cols(ctx: Ctx, shard: Shard, rows: np.ndarray, t: pa.Table | None = None) -> dict:
    """Survivor-rule columns of ``rows`` of ``shard`` (reads the columns the rule needs)."""
    if t is None:
        t = shard.store.read(shard.rel, ["id"] + survivor.columns_needed(ctx.cfg.survivor))
    return {"prio": pa.array(np.full(len(rows), 1 if shard.own else 0, dtype=np.int8)),
            **survivor.key_columns(t, rows, ctx.cfg.survivor),
            "id": t.column("id").take(pa.array(rows, pa.int64())),
            "node": pa.array(node_ids(shard, t.num_rows)[rows])}


def pick_representatives(ctx: Ctx, step: str, k: int, group: list[pa.Field], reason: str,
                         drops_step: str) -> dict[str, int]:
    """Keep the survivor of every group of partition ``k`` of ``step`` and write the other own rows
    to ``drops_step`` with ``duplicate_of`` = the survivor's id. Two passes over the segments, so
    memory is the number of groups, not the size of the largest. Returns {group size: groups}."""
    schema = order_schema(ctx, group)
    names = [g.name for g in group]
    spec = survivor.sort_spec(ctx.cfg.survivor)
    best = survivor.best_of_groups(lambda: ctx.work.segments(step, k, schema), names, spec, ctx.flush_rows)
    with ctx.work.writer(drops_step, f"r{k}", 0, DROPS, ctx.flush_rows) as w:
        if best is not None and best.num_rows:
            rep = best.filter(pc.greater(best.column("n"), 1)).select(names + ["id", "node"]) \
                .rename_columns(names + ["rep_id", "rep_node"])
            for seg in ctx.work.segments(step, k, schema):
                j = seg.select(names + ["prio", "id", "node"]).join(rep, keys=names, join_type="inner")
                lose = j.filter(pc.and_(pc.not_equal(j.column("node"), j.column("rep_node")),
                                        pc.equal(j.column("prio"), 1)))
                nodes = lose.column("node").to_numpy()
                w.add(drop_table(nodes, lose.column("id"), lose.column("rep_id"), reason), shard_of(nodes))
    return survivor.group_sizes(best)


# -- exact -------------------------------------------------------------------------------------
_HASH = [pa.field("h1", pa.uint64()), pa.field("h2", pa.uint64())]


def exact_map(ctx: Ctx, i: int) -> int:
    shard = ctx.shard(i)
    t = shard.store.read(shard.rel, sorted({"id", "content_hash", *survivor.columns_needed(ctx.cfg.survivor)}))
    h = t.column("content_hash").combine_chunks()
    raw = np.frombuffer(h.buffers()[1], dtype=">u8")[2 * h.offset: 2 * (h.offset + len(h))] if len(h) else \
        np.zeros(0, ">u8")
    rows = np.flatnonzero(h.is_valid().to_numpy(zero_copy_only=False))
    hi, lo = raw[0::2][rows].astype(U64), raw[1::2][rows].astype(U64)
    out = pa.table({"h1": hi, "h2": lo, **order_cols(ctx, shard, rows, t)})
    with ctx.writer("exact", f"s{i}", order_schema(ctx, _HASH)) as w:
        w.add(out, partition_of(hi, ctx.nparts))
    return len(rows)


def exact_reduce(ctx: Ctx, k: int) -> dict[str, int]:
    return pick_representatives(ctx, "exact", k, _HASH, EXACT, "drops_exact")


# -- lines -------------------------------------------------------------------------------------
_LINES = pa.schema([("lh", pa.uint64()), ("cnt", pa.int64()), ("shard", pa.int32())])


def _line_hashes(text: str) -> tuple[list[str], list[int | None]]:
    lines = text.splitlines(keepends=True)
    return lines, [xxhash.xxh3_64_intdigest(n.encode()) if (n := normalize_text(x)) else None for x in lines]


def lines_map(ctx: Ctx, i: int) -> int:
    shard = ctx.shard(i)
    t = shard.store.read(shard.rel, ["text"])
    live = live_mask(ctx, shard, t.num_rows)
    hs = [h for text, ok in zip(t.column("text").to_pylist(), live) if ok and text
          for h in _line_hashes(text)[1] if h is not None]
    uniq, cnt = np.unique(np.array(hs, dtype=U64), return_counts=True)
    out = pa.table({"lh": uniq, "cnt": cnt.astype(np.int64), "shard": np.full(len(uniq), i, np.int32)})
    with ctx.writer("lines", f"s{i}", _LINES) as w:
        w.add(out, partition_of(uniq, ctx.nparts))
    return len(hs)


def lines_reduce(ctx: Ctx, k: int) -> int:
    t = ctx.work.gather("lines", k, _LINES)   # one row per (distinct line, shard): bounded by the partition
    tot = t.group_by("lh").aggregate([("cnt", "sum")])
    bad = tot.filter(pc.greater(tot.column("cnt_sum"), ctx.cfg.lines.max_count)).column("lh")
    hits = t.filter(pc.is_in(t.column("lh"), value_set=bad)).select(["lh", "shard"])
    with ctx.writer("badlines", f"r{k}", hits.schema) as w:
        w.add(hits, hits.column("shard").to_numpy().astype(np.int64))
    return len(bad)


def lines_edit(ctx: Ctx, i: int) -> int:
    """Remove the over-frequent lines from the live docs of shard ``i``; write ``edits/s<i>``
    (id, node, new text, content_hash, minhash) and reject docs left without text."""
    shard = ctx.shard(i)
    bad = set(ctx.work.gather("badlines", i, pa.schema([("lh", pa.uint64())])).column("lh").to_pylist())
    edited, gone = [], []
    t = shard.store.read(shard.rel, ["id", "text"]) if bad else None
    if bad:
        live = live_mask(ctx, shard, t.num_rows)
        for row, (text, ok) in enumerate(zip(t.column("text").to_pylist(), live)):
            if not (ok and text):
                continue
            lines, hs = _line_hashes(text)
            kept = [x for x, h in zip(lines, hs) if h is None or h not in bad]
            if len(kept) == len(lines):
                continue
            new = "".join(kept)
            (edited if normalize_text(new) else gone).append((row, new))
    with ctx.work.writer("drops_lines", f"s{i}", 0, DROPS, ctx.flush_rows) as w:
        if gone:
            ids, nodes = t.column("id").to_pylist(), node_ids(shard, t.num_rows)
            g = drop_table([nodes[r] for r, _ in gone], [ids[r] for r, _ in gone], [None] * len(gone), LINES)
            w.add(g, shard_of(g.column("node").to_numpy()))
    if edited:
        m = ctx.cfg.minhash
        texts = [x for _, x in edited]
        ids, nodes = t.column("id").to_pylist(), node_ids(shard, t.num_rows)
        hashes, sigs = signature_columns(texts, m.num_perm, m.seed, m.ngram, m.shingle_hash)
        ctx.work.write(f"edits/s{i}.parquet", pa.table({
            "id": [ids[r] for r, _ in edited], "node": pa.array([nodes[r] for r, _ in edited], pa.uint64()),
            "text": texts, "content_hash": hashes, "minhash": sigs}))
    return len(edited)


def edits(ctx: Ctx, shard: Shard) -> pa.Table | None:
    rel = f"edits/s{shard.index}.parquet"
    return ctx.work.read(rel) if shard.own and ctx.work.exists(rel) else None
