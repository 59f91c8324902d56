"""Phase 2: global dedup of a run's ``documents/`` on Dask (entry point :func:`run_dedup`).

Plan (all steps are Dask tasks over one shard or one shuffle partition; shuffles go through
Parquet pieces under ``run_dir/_dedup_work``):

1. exact: (content_hash, order key) scattered by hash; one representative per hash.
2. lines (optional): per-shard line-hash counts scattered by hash, summed; over-frequent
   hashes sent back to the shards holding them; texts rewritten, docs left empty rejected,
   new hash and signature computed for edited docs.
3. near: (band, band hash, node) scattered by bucket; star candidate edges per bucket;
   optional check of the estimated Jaccard (two shuffles joining each edge end's signature);
   connected components by star rounds; one representative per component.
4. apply: every shard rewritten without the rejected docs (temp name then rename) and the
   rejected ones written to ``rejected/dedup-<shard>``; ``_phases/dedup.json`` marks completion.

The plan is finished (``_dedup_work/plan.json``) before any shard is touched, and each shard's
apply is idempotent (decisions are by ``id``), so a crash anywhere can be resumed by re-running.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

from datapipe.ledger import StageCounts
from datapipe.stages.phases.dedup import steps
from datapipe.stages.phases.dedup.components import connected_components
from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.phases.dedup.steps import DROPS, EXACT, LINES, NEAR, Ctx, Shard
from datapipe.stages.phases.dedup.shuffle_store import Store

MARKER = "_phases/dedup.json"
WORK = "_dedup_work"
#: Bump when the algorithm changes what it decides, so old markers do not skip a new run.
ALGO_VERSION = 2
REJECT_STAGE = "dedup"


def fingerprint(config: DedupConfig) -> str:
    """sha256 (hex) of the config JSON and ALGO_VERSION: what a completion marker is valid for."""
    blob = json.dumps({"v": ALGO_VERSION, "cfg": config.model_dump(mode="json")}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def step_names(config: DedupConfig) -> list[str]:
    """Ledger stage names of the enabled steps, in order: dedup_exact, dedup_lines, dedup_near."""
    return [n for n, on in (("dedup_exact", config.exact), ("dedup_lines", config.lines.enabled),
                            ("dedup_near", config.minhash.enabled)) if on]


def _map(client, fn, ctx: Ctx, items, *extra) -> list:
    items = list(items)
    n = len(items)
    return client.gather(client.map(fn, [ctx] * n, items, *[[e] * n for e in extra], pure=False))


def _hist(counters) -> dict[str, int]:
    total = Counter()
    for c in counters:
        total.update(c)
    return {str(k): v for k, v in sorted(total.items())}


def _plan(client, ctx: Ctx, progress=None) -> dict:
    progress = progress or (lambda step: None)
    own = [s for s in ctx.shards if s.own]
    parts = range(ctx.nparts)
    stats: dict = {"shards": len(own), "reference_shards": len(ctx.shards) - len(own), "partitions": ctx.nparts}
    if ctx.cfg.exact:
        progress("exact duplicates")
        _map(client, steps.exact_map, ctx, ctx.shards)
        stats["exact_cluster_sizes"] = _hist(_map(client, steps.exact_reduce, ctx, parts))
        ctx.work.rm("exact")
    if ctx.cfg.lines.enabled:
        progress("repeated lines")
        _map(client, steps.lines_map, ctx, own)
        stats["lines_over_max_count"] = sum(_map(client, steps.lines_reduce, ctx, parts))
        stats["docs_line_edited"] = sum(_map(client, steps.lines_edit, ctx, own))
        for step in ("lines", "badlines"):
            ctx.work.rm(step)
    if ctx.cfg.minhash.enabled:
        stats.update(bands=ctx.bands, rows=ctx.rows)
        progress("near duplicates: LSH bands")
        stats["docs_banded"] = sum(_map(client, steps.bands_map, ctx, ctx.shards))
        stats["candidate_pairs"] = sum(_map(client, steps.bands_reduce, ctx, parts))
        ctx.work.rm("bands")
        if ctx.cfg.minhash.verify != "none":
            stats["unique_candidate_pairs"] = sum(_map(client, steps.verify_src, ctx, ctx.shards))
            stats["verified_pairs"] = sum(k for _, k in _map(client, steps.verify_dst, ctx, ctx.shards))
            for step in ("cand", "cand2"):
                ctx.work.rm(step)
        progress("near duplicates: clusters")
        labels_step, stats["cc_iterations"] = connected_components(client, ctx)
        _map(client, steps.comps_map, ctx, ctx.shards, labels_step)
        stats["near_cluster_sizes"] = _hist(_map(client, steps.comps_reduce, ctx, parts))
    return stats


def _apply(ctx: Ctx, shard: Shard, names: list[str]) -> dict:
    """Rewrite one own shard; returns {step name: StageCounts dict}. Idempotent (see module doc)."""
    store, done = shard.store, f"applied/s{shard.index}.json"
    if ctx.work.exists(done):
        return ctx.work.read_json(done)
    t0 = time.perf_counter()
    drops = ctx.work.gather("drops", shard.index, DROPS)
    ed = steps.edits(ctx, shard)
    rej_rel = f"rejected/dedup-{shard.name}"
    table = store.read(shard.rel)
    drop_ids = drops.column("id")
    in_doc = pc.is_in(table.column("id"), value_set=drop_ids)
    if store.exists(rej_rel) and not pc.any(in_doc).as_py() and drops.num_rows:
        # Crashed after the rename: the shard is already final; counts come from the files.
        rejected, kept = store.read(rej_rel), table
    else:
        if ed is not None:
            table = _apply_edits(table, ed)
        reasons = dict(zip(drop_ids.to_pylist(), zip(drops.column("reason").to_pylist(),
                                                     drops.column("duplicate_of").to_pylist())))
        mask = in_doc.to_numpy(zero_copy_only=False)
        rejected, kept = table.filter(pa.array(mask)), table.filter(pa.array(~mask))
        rid = rejected.column("id").to_pylist()
        for col, vals in (("reject_reason", [reasons[i][0] for i in rid]), ("reject_stage", [REJECT_STAGE] * len(rid)),
                          ("duplicate_of", [reasons[i][1] for i in rid])):
            j = rejected.schema.get_field_index(col)
            rejected = rejected.set_column(j, rejected.schema.field(j), pa.array(vals, rejected.schema.field(j).type))
        if rejected.num_rows:
            store.write(rej_rel, rejected)
        if rejected.num_rows or ed is not None:
            store.write(shard.rel, kept)
    counts = _counts(kept, rejected, names)
    counts[names[0]]["seconds"] = round(time.perf_counter() - t0, 6)
    ctx.work.write_json(done, counts)
    return counts


def _apply_edits(table: pa.Table, ed: pa.Table) -> pa.Table:
    pos = {i: r for r, i in enumerate(ed.column("id").to_pylist())}
    ids = table.column("id").to_pylist()
    take = [pos.get(i) for i in ids]
    for col in ("text", "content_hash", "minhash"):
        old = table.column(col).to_pylist()
        new = ed.column(col).to_pylist()
        vals = [new[t] if t is not None else o for o, t in zip(old, take)]
        j = table.schema.get_field_index(col)
        table = table.set_column(j, table.schema.field(j), pa.array(vals, table.schema.field(j).type))
    return table


def _nbytes(t: pa.Table) -> int:
    return int(pc.sum(pc.binary_length(t.column("text"))).as_py() or 0) if t.num_rows else 0


def _counts(kept: pa.Table, rejected: pa.Table, names: list[str]) -> dict:
    """Per-step counts from the shard's final kept/rejected rows; steps chain in ``names`` order.
    Bytes are UTF-8 text bytes (after line edits for kept rows)."""
    reason_of = {"dedup_exact": EXACT, "dedup_lines": LINES, "dedup_near": NEAR}
    by_reason = Counter(rejected.column("reject_reason").to_pylist()) if rejected.num_rows else Counter()
    n_in = kept.num_rows + rejected.num_rows
    bytes_in = _nbytes(kept) + _nbytes(rejected)
    out = {}
    for name in names:
        r = by_reason.get(reason_of[name], 0)
        rb = _nbytes(rejected.filter(pc.equal(rejected.column("reject_reason"), reason_of[name]))) if r else 0
        sc = StageCounts(n_in, n_in - r, Counter({reason_of[name]: r} if r else {}), Counter(), bytes_in,
                         bytes_in - rb)
        out[name] = sc.to_dict()
        n_in, bytes_in = n_in - r, bytes_in - rb
    return out


def _shards(store: Store, config: DedupConfig, storage_options) -> list[Shard]:
    own = [Shard(i, store, rel, True) for i, rel in enumerate(store.glob("documents/*.parquet"))]
    refs = []
    for d in config.reference_dirs:
        rs = Store(d, storage_options)
        refs += [Shard(len(own) + len(refs) + j, rs, rel, False) for j, rel in enumerate(rs.glob("*.parquet"))]
    return own + refs


def run_dedup(client, run_dir: str, config: DedupConfig | None = None,
              storage_options: dict | None = None, progress=None) -> dict[str, StageCounts]:
    """Deduplicate ``run_dir/documents/*.parquet`` in place across the whole run.

    ``client``: a ``distributed.Client``; every step is a task over one shard or one shuffle
    partition. Input shards must carry ``id``, ``warc_date``, ``text``, ``content_hash`` and
    ``minhash`` (stage ``dedup_signatures`` with the same num_perm/seed/ngram/hash as
    ``config.minhash``). Rejected documents go to ``run_dir/rejected/dedup-<shard name>`` with
    the document schema, ``reject_reason`` in {``dedup:exact``, ``dedup:lines``, ``dedup:near``},
    ``reject_stage = "dedup"`` and ``duplicate_of`` (kept id; null for ``dedup:lines``).

    Returns ``{"dedup_exact"|"dedup_lines"|"dedup_near": StageCounts}`` for the enabled steps, in
    order, chained (``in`` of each = ``kept`` of the previous). If ``run_dir/_phases/dedup.json``
    exists with this config's fingerprint, returns its counts without work; with another
    fingerprint raises RuntimeError (the documents were already deduplicated differently).
    Raises ValueError when signatures do not match ``config.minhash.num_perm``.
    ``progress(step)``, if given, is called with a step's name as it starts (for the CLI).
    """
    config = config or DedupConfig()
    store = Store(run_dir, storage_options)
    fp, names = fingerprint(config), step_names(config)
    if store.exists(MARKER):
        m = store.read_json(MARKER)
        if m["fingerprint"] != fp:
            raise RuntimeError(f"{run_dir} was deduplicated with another config ({m['fingerprint'][:12]}); "
                               "re-run phase 1 or use the same dedup config")
        return {k: StageCounts.from_dict(v) for k, v in m["counts"].items()}
    shards = _shards(store, config, storage_options)
    own = [s for s in shards if s.own]
    work = Store(store.path(WORK), storage_options)
    bands, rows = config.minhash.band_rows()
    ctx = Ctx(work, config.partitions or max(1, len(own)), config, bands, rows, shards)
    t0 = time.perf_counter()
    plan_ok = work.exists("plan.json") and work.read_json("plan.json").get("fingerprint") == fp
    if plan_ok:
        stats = work.read_json("plan.json")["stats"]
    else:
        work.rm("")
        stats = _plan(client, ctx, progress) if names else {}
        work.write_json("plan.json", {"fingerprint": fp, "stats": stats,
                                      "shards": [s.rel for s in own]})
    totals = {n: StageCounts() for n in names}
    if names:
        if progress:
            progress("rewrite shards")
        for per in _map(client, _apply, ctx, own, names):
            for n in names:
                totals[n].add(StageCounts.from_dict(per[n]))
        totals[names[0]].seconds = time.perf_counter() - t0
    store.write_json(MARKER, {"fingerprint": fp, "config": config.model_dump(mode="json"), "stats": stats,
                              "counts": {k: v.to_dict() for k, v in totals.items()}})
    if not config.keep_work:
        store.rm(WORK)
    return totals


def load_stats(run_dir: str, storage_options: dict | None = None) -> dict:
    """The ``stats`` of a finished dedup (cluster-size histograms, pairs, rounds) from its marker."""
    return Store(run_dir, storage_options).read_json(MARKER)["stats"]


__all__ = ["run_dedup", "load_stats", "fingerprint", "step_names", "DedupConfig", "MARKER"]
