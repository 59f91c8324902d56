"""Global dedup of a run's phase-1 documents on Dask (entry point :func:`run_dedup`; the
registered phase is :class:`DedupPhase`).

Plan (all steps are Dask tasks over one shard or one shuffle partition; shuffles go through
Parquet pieces under ``run_dir/_dedup_work``):

1. exact: (content_hash, order key) scattered by hash; one representative per hash.
2. lines (optional): per-shard line-hash counts scattered by hash, summed; over-frequent
   hashes sent back to the shards holding them; texts rewritten, docs left empty rejected,
   new hash and signature computed for edited docs.
3. near: (band, band hash, node) scattered by bucket; star candidate edges per bucket;
   optional check of the estimated Jaccard (two shuffles joining each edge end's signature);
   connected components by star rounds; one representative per component.
4. apply: every source shard ``_filtered/<task>.parquet`` (phase 1's kept rows, never modified)
   is written to ``documents/<task>.parquet`` without the rejected docs, and the rejected ones to
   ``rejected/dedup-<task>.parquet`` (temp name then rename).

The plan is finished (``_dedup_work/plan.json``, keyed by the phase's lineage fingerprint)
before any output is written, and each shard's apply only reads immutable sources, so a crash
anywhere is resumed by rerunning; a changed upstream or config recomputes from the sources.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

from datapipe.ledger import StageCounts
from datapipe.schema import without_snapshots
from datapipe.stages.phases.dedup import steps
from datapipe.stages.phases.dedup.components import connected_components
from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.phases.dedup.steps import DROPS, EXACT, LINES, NEAR, Ctx, Shard
from datapipe.stages.phases.dedup.shuffle_store import Store

SOURCE = "_filtered"  # phase-1 kept rows (datapipe.task.KINDS)

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
    """Write one own shard's ``documents/`` and ``rejected/dedup-`` files; return {step: StageCounts dict}.
    Reads only the immutable source, so running it twice writes the same bytes."""
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
    if ed is not None:
        table = _apply_edits(table, ed)
    reasons = dict(zip(drop_ids.to_pylist(), zip(drops.column("reason").to_pylist(),
                                                 drops.column("duplicate_of").to_pylist())))
    mask = in_doc.to_numpy(zero_copy_only=False)
    table = without_snapshots(table)  # pre-masking text never reaches the published documents
    rejected, kept = table.filter(pa.array(mask)), table.filter(pa.array(~mask))
    rid = rejected.column("id").to_pylist()
    for col, vals in (("reject_reason", [reasons[i][0] for i in rid]), ("reject_stage", [REJECT_STAGE] * len(rid)),
                      ("duplicate_of", [reasons[i][1] for i in rid])):
        j = rejected.schema.get_field_index(col)
        rejected = rejected.set_column(j, rejected.schema.field(j), pa.array(vals, rejected.schema.field(j).type))
    if rejected.num_rows:
        store.write(rej_rel, rejected)
    elif store.exists(rej_rel):
        store.rm(rej_rel)
    store.write(f"documents/{shard.name}", kept)
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


def _shards(store: Store, config: DedupConfig, storage_options, task_ids: list[str] | None) -> list[Shard]:
    if task_ids is None:
        rels = store.glob(f"{SOURCE}/*.parquet")
    else:
        rels = [r for r in (f"{SOURCE}/{t}.parquet" for t in task_ids) if store.exists(r)]
    own = [Shard(i, store, rel, True) for i, rel in enumerate(rels)]
    refs = []
    for d in config.reference_dirs:
        rs = Store(d, storage_options)
        refs += [Shard(len(own) + len(refs) + j, rs, rel, False) for j, rel in enumerate(rs.glob("*.parquet"))]
    return own + refs


def run_dedup(client, run_dir: str, config: DedupConfig | None = None,
              storage_options: dict | None = None, progress=None, task_ids: list[str] | None = None,
              lineage: str = "") -> dict[str, StageCounts]:
    """Deduplicate a run's phase-1 documents across the whole run.

    Reads ``run_dir/_filtered/<task>.parquet`` for ``task_ids`` (all of them when None), never
    modifying them, and writes ``run_dir/documents/<task>.parquet`` (kept rows; line edits applied)
    and ``run_dir/rejected/dedup-<task>.parquet`` (document schema, ``reject_reason`` in
    {``dedup:exact``, ``dedup:lines``, ``dedup:near``}, ``reject_stage = "dedup"``, ``duplicate_of``:
    kept id, null for ``dedup:lines``). ``client``: a ``distributed.Client``; every step is a task
    over one shard or one shuffle partition. Sources carry ``id``, ``warc_date``, ``text``,
    ``content_hash`` and ``minhash`` (stage ``dedup_signatures`` with ``config.minhash``'s settings).

    Returns ``{"dedup_exact"|"dedup_lines"|"dedup_near": StageCounts}`` for the enabled steps, in
    order, chained (``in`` of each = ``kept`` of the previous), and writes ``_phases/dedup.json``
    (``MARKER``: fingerprint, config, stats, counts). An unfinished plan in ``_dedup_work`` with the
    same fingerprint (config + ``lineage``, the fingerprint of the sources) is resumed; any other is
    discarded. Raises ValueError when signatures do not match ``config.minhash.num_perm``.
    ``progress(step)``, if given, is called with a step's name as it starts (for the CLI).
    """
    config = config or DedupConfig()
    store = Store(run_dir, storage_options)
    fp, names = hashlib.sha256((fingerprint(config) + lineage).encode()).hexdigest(), step_names(config)
    shards = _shards(store, config, storage_options, task_ids)
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
    if progress:
        progress("write documents")
    if names:
        for per in _map(client, _apply, ctx, own, names):
            for n in names:
                totals[n].add(StageCounts.from_dict(per[n]))
        totals[names[0]].seconds = time.perf_counter() - t0
    else:  # every step off: the sources are the documents
        for s in own:
            store.write(f"documents/{s.name}", without_snapshots(store.read(s.rel)))
    store.write_json(MARKER, {"fingerprint": fp, "config": config.model_dump(mode="json"), "stats": stats,
                              "counts": {k: v.to_dict() for k, v in totals.items()}})
    if not config.keep_work:
        store.rm(WORK)
    return totals


def load_stats(run_dir: str, storage_options: dict | None = None) -> dict:
    """The ``stats`` of a finished dedup (cluster-size histograms, pairs, rounds) from its marker."""
    return Store(run_dir, storage_options).read_json(MARKER)["stats"]


__all__ = ["run_dedup", "load_stats", "fingerprint", "step_names", "DedupConfig", "MARKER"]


# ------------------------------------------------------------------ the registered phase

from datapipe.phase import Phase, PhaseContext, PhaseResult, register_phase  # noqa: E402


@register_phase
class DedupPhase(Phase):
    """Exact, line-level and MinHash LSH near-dedup over the whole run (section ``dedup:``).
    Reads phase 1's kept rows, writes ``documents/`` and ``rejected/dedup-*``."""

    name = "dedup"
    version = ALGO_VERSION
    sections = {"dedup": DedupConfig}
    reads = ("tasks",)
    writes = "documents"

    @classmethod
    def required_stages(cls, manifest) -> list[dict]:
        from datapipe.stages.dedup_signatures import stage_config

        return [{"dedup_signatures": stage_config(manifest.section("dedup")).model_dump()}]

    def check(self) -> None:
        cfg = self.manifest.section("dedup")
        if hasattr(cfg, "check"):
            cfg.check()

    def outputs_present(self, ctx: PhaseContext) -> bool:
        return _documents_present(ctx)

    def run(self, ctx: PhaseContext) -> PhaseResult:
        cfg = self.manifest.section("dedup")
        counts = run_dedup(ctx.client, ctx.output, cfg, ctx.storage_options, progress=ctx.progress,
                           task_ids=ctx.task_ids, lineage=ctx.lineage.get("tasks", ""))
        stats = load_stats(ctx.output, ctx.storage_options)
        return PhaseResult(stats={**{k: v.to_dict() for k, v in counts.items()}, "stats": stats}, ledger=counts)


def _documents_present(ctx: PhaseContext) -> bool:
    """Every task with phase-1 kept rows has its ``documents/`` shard."""
    store = Store(ctx.output, ctx.storage_options)
    return all(store.exists(f"documents/{t}.parquet") for t in ctx.task_ids
               if store.exists(f"{SOURCE}/{t}.parquet"))
