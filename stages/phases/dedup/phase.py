"""Global dedup of a run's phase-1 documents on Dask (entry point :func:`run_dedup`; the
registered phase is :class:`DedupPhase`).

Plan (every step is a set of Dask tasks over one shard or one shuffle partition, run with
``retries``; shuffles are the run files of :mod:`.shuffle_store`, S + P files per step):

1. exact: (content hash, survivor-rule keys) by hash; the survivor of each hash group kept.
2. lines (optional): per-shard line-hash counts by hash, summed; over-frequent hashes sent back
   to the shards holding them; texts rewritten, docs left empty rejected, new hash and
   signature computed for edited docs.
3. near: (band hash, node) by bucket; candidate edges (ids only) per bucket; exact-Jaccard
   check with each shingle set computed once (:mod:`.near`); connected components by streamed
   star rounds (:mod:`.components`); the survivor of each component kept.
4. apply: every source shard ``_filtered/<task>.parquet`` (phase 1's kept rows, never modified)
   is written to ``documents/<task>.parquet`` without the rejected docs, and the rejected ones to
   ``rejected/dedup-<task>.parquet`` (temp name then rename).

Each step ends with a completion marker ``_dedup_work/done/<step>.json`` (its tasks' results)
under the phase's lineage fingerprint (config + the sources' fingerprints): a rerun after a
crash resumes at the first unfinished step, a killed worker costs only its step's lost tasks
(Dask reruns them; every task rewrites the same files), and any other fingerprint wipes the
work. Each shard's apply only reads immutable sources, so it can run twice.
"""
from __future__ import annotations

import time
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

from datapipe.engine.ledger import StageCounts
from datapipe.engine.lineage import fingerprint as lineage_fingerprint
from datapipe.engine.shuffle_store import Store
from datapipe.formats.documents import null_snapshots, without_snapshots
from datapipe.io.parquet import remove_temporaries
from datapipe.stages.dedup_signatures import stage_config
from datapipe.stages.phases.dedup import components, near, ngram, steps
from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.phases.dedup.steps import (
    EXACT,
    LINES,
    LISTING,
    NEAR,
    Ctx,
    drops_of,
)

SOURCE = "_filtered"  # phase-1 kept rows (datapipe.engine.task.KINDS): the default source
DEST = "documents"    # the default destination of the kept rows

#: The summary of the last run_dedup of a run folder (stats and counts), kept after the work is gone.
STATS_FILE = "_dedup.json"
WORK = "_dedup_work"
REJECTED = "rejected"
REJECTED_PREFIX = "dedup-"
#: Bump when the algorithm changes what it decides or writes, so old markers do not skip a new run
#: (4: rejected shards keep the phase-1 columns, text snapshots as nulls).
ALGO_VERSION = 4
REJECT_STAGE = "dedup"


def fingerprint(config: DedupConfig) -> str:
    """sha256 (hex) of the config and ALGO_VERSION: what a step's completion record is valid for."""
    return lineage_fingerprint({"v": ALGO_VERSION, "cfg": config.model_dump(mode="json")})


def step_names(config: DedupConfig) -> list[str]:
    """Ledger stage names of the enabled steps, in order: dedup_exact, dedup_lines, dedup_near, dedup_ngram."""
    return [n for n, on in (("dedup_exact", config.exact), ("dedup_lines", config.lines.enabled),
                            ("dedup_near", config.minhash.enabled), ("dedup_ngram", config.ngram.enabled)) if on]


class StepRunner:
    """Runs one step's tasks (``fn(ctx, item, *extra)`` per item) with ``retries`` and task keys
    ``dedup-<step>-<item>-<tag>`` (tag: hash of the plan fingerprint and the work directory),
    then writes the step's completion marker; a step whose marker is there returns its stored
    results (and files) without running. ``cleanup``: work folders removed once the marker is
    written (one recursive delete per folder)."""

    def __init__(self, client, ctx: Ctx, retries: int):
        self.client, self.ctx, self.retries = client, ctx, retries
        # one key per plan and run directory: two runs on one cluster never share a task's result
        self.tag = lineage_fingerprint(ctx.fp, ctx.work.url, length=12)
        self.ran: list[str] = []
        self.files: dict[str, dict[str, int]] = {}
        self.seconds: dict[str, float] = {}   # wall time of the steps run here (not resumed ones)
        self.bytes: dict[str, dict[str, int]] = {}
        self._last_bytes: dict[str, int] = {}
        self._seen: dict[str, int] = {}

    def _new_files(self) -> dict[str, int]:
        """Files per work folder that changed in count since the last step (one listing); their
        bytes go to ``self.bytes``."""
        w = self.ctx.work
        base = w.root.rstrip("/") + "/"
        now, size = Counter(), Counter()
        for p, info in w.fs.find(w.root, detail=True).items():
            rel = p[len(base):] if p.startswith(base) else ""
            if "/" in rel and ".tmp" not in rel:
                top = rel.split("/", 1)[0]
                now[top] += 1
                size[top] += int(info.get("size") or 0)
        out = {k: v for k, v in sorted(now.items()) if k != "done" and self._seen.get(k) != v}
        self._last_bytes = {k: size[k] for k in out}
        self._seen = dict(now)
        return out

    def __call__(self, name: str, fn, items, *extra, cleanup=(), marker: bool = True) -> list:
        done = f"done/{name}.json"
        if marker and self.ctx.work.exists(done):   # finished before a crash: resumed, not rerun
            stored = self.ctx.work.read_json(done)
            self.files[name] = stored["files"]
            return stored["results"]
        if self.files and not self.ran:
            self._new_files()   # the first step after resumed ones counts only its own files
        items = list(items)
        n = len(items)
        keys = [f"dedup-{name}-{i}-{self.tag}" for i in items]
        t0 = time.perf_counter()
        futs = self.client.map(fn, [self.ctx] * n, items, *[[e] * n for e in extra], key=keys,
                               retries=self.retries, pure=False)
        results = self.client.gather(futs)
        self.seconds[name] = round(time.perf_counter() - t0, 3)
        files = self._new_files()
        if marker:
            self.ctx.work.write_json(done, {"step": name, "tasks": n, "results": results, "files": files})
        self.files[name] = files
        self.bytes[name] = self._last_bytes
        self.ran.append(name)
        for c in cleanup:
            self.ctx.work.rm(c)
        return results


def _hist(dicts) -> dict[str, int]:
    total = Counter()
    for c in dicts:
        total.update({int(k): v for k, v in c.items()})
    return {str(k): v for k, v in sorted(total.items())}


def _plan(run: StepRunner, ctx: Ctx, nshards: int, own: list[int], progress=None) -> dict:
    progress = progress or (lambda step: None)
    shards, parts = range(nshards), range(ctx.nparts)
    stats: dict = {"shards": len(own), "reference_shards": nshards - len(own), "partitions": ctx.nparts}
    if ctx.cfg.exact:
        progress("exact duplicates")
        run("exact_map", steps.exact_map, shards)
        stats["exact_cluster_sizes"] = _hist(run("exact_reduce", steps.exact_reduce, parts, cleanup=["exact"]))
    if ctx.cfg.lines.enabled:
        progress("repeated lines")
        run("lines_map", steps.lines_map, own)
        stats["lines_over_max_count"] = sum(run("lines_reduce", steps.lines_reduce, parts, cleanup=["lines"]))
        stats["docs_line_edited"] = sum(run("lines_edit", steps.lines_edit, own, cleanup=["badlines"]))
    if ctx.cfg.minhash.enabled:
        stats.update(bands=ctx.bands, rows=ctx.rows)
        progress("near duplicates: LSH bands")
        stats["docs_banded"] = sum(run("bands_map", near.bands_map, shards))
        stats["candidate_pairs"] = sum(run("bands_reduce", near.bands_reduce, parts, cleanup=["bands"]))
        if ctx.cfg.minhash.verify != "none":
            run("verify_src", near.verify_src, shards, cleanup=["cand"])
            checked = run("verify_dst", near.verify_dst, shards, cleanup=["cand2", "sets"])
            stats["unique_candidate_pairs"] = sum(a for a, _ in checked)
            stats["verified_pairs"] = sum(b for _, b in checked)
        progress("near duplicates: clusters")
        _, stats["cc_iterations"] = components.connected_components(run, ctx)
        run("comps_map", components.comps_map, shards)
        stats["near_cluster_sizes"] = _hist(run("comps_reduce", components.comps_reduce, parts, cleanup=["comps"]))
    if ctx.cfg.ngram.enabled:
        progress("paragraph / n-gram duplicates")
        run("ngram_map", ngram.ngram_map, shards)
        red = run("ngram_reduce", ngram.ngram_reduce, parts, cleanup=["ngram"])
        ed = run("ngram_edit", ngram.ngram_edit, own, cleanup=["ngram_dups"])
        m = sum(a for a, _ in red)
        stats.update(ngram_distinct_grams=m, ngram_duplicated_grams=sum(b for _, b in red),
                     ngram_docs_dropped=sum(a for a, _ in ed), ngram_paragraphs_removed=sum(b for _, b in ed),
                     ngram_false_positive_bound=m * m / 2.0 ** 65)
    stats["files_per_step"] = run.files
    stats["seconds_per_step"] = run.seconds
    stats["bytes_per_step"] = run.bytes
    return stats


def _apply(ctx: Ctx, i: int, names: list[str]) -> dict:
    """Write one own shard's ``documents/`` and ``rejected/dedup-`` files; return {step: StageCounts dict}.
    Reads only the immutable source, so running it twice writes the same bytes."""
    shard = ctx.shard(i)
    store, done = shard.store, f"applied/s{shard.index}.json"
    if ctx.work.exists(done):
        return ctx.work.read_json(done)
    t0 = time.perf_counter()
    drops = drops_of(ctx, i)
    ed = steps.edits(ctx, shard)
    rej_rel = f"{REJECTED}/{REJECTED_PREFIX}{shard.name}"
    table = store.read(shard.rel)
    drop_ids = drops.column("id")
    in_doc = pc.is_in(table.column("id"), value_set=drop_ids)
    if ed is not None:
        table = _apply_edits(table, ed)
    ng = ngram.ngram_edits(ctx, shard)
    reasons = dict(zip(drop_ids.to_pylist(), zip(drops.column("reason").to_pylist(),
                                                 drops.column("duplicate_of").to_pylist())))
    mask = in_doc.to_numpy(zero_copy_only=False)
    # Pre-masking text never leaves phase 1: documents/ drops the snapshot columns; rejected/ keeps
    # them as nulls, so that every shard of rejected/ has phase 1's schema.
    rejected = null_snapshots(table).filter(pa.array(mask))
    kept = without_snapshots(table).filter(pa.array(~mask))
    removed = 0
    if ng is not None:   # paragraphs removed: a modification of kept documents (bytes_out drops)
        before = ngram.text_bytes(kept)
        kept = _apply_edits(kept, ng)
        removed = before - ngram.text_bytes(kept)
    rid = rejected.column("id").to_pylist()
    for col, vals in (("reject_reason", [reasons[i][0] for i in rid]), ("reject_stage", [REJECT_STAGE] * len(rid)),
                      ("duplicate_of", [reasons[i][1] for i in rid])):
        j = rejected.schema.get_field_index(col)
        rejected = rejected.set_column(j, rejected.schema.field(j), pa.array(vals, rejected.schema.field(j).type))
    if rejected.num_rows:
        store.write(rej_rel, rejected)
    elif store.exists(rej_rel):
        store.rm(rej_rel)
    store.write(f"{ctx.dest}/{shard.name}", kept)
    counts = _counts(kept, rejected, names, removed)
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


def _counts(kept: pa.Table, rejected: pa.Table, names: list[str], ngram_removed: int = 0) -> dict:
    """Per-step counts from the shard's final kept/rejected rows; steps chain in ``names`` order.
    Bytes are UTF-8 text bytes (after line edits for kept rows); ``ngram_removed``: bytes of the
    paragraphs ``dedup_ngram`` removed from kept rows (its ``bytes_out`` is that much lower)."""
    reason_of = {"dedup_exact": EXACT, "dedup_lines": LINES, "dedup_near": NEAR, "dedup_ngram": ngram.NGRAM}
    by_reason = Counter(rejected.column("reject_reason").to_pylist()) if rejected.num_rows else Counter()
    n_in = kept.num_rows + rejected.num_rows
    bytes_in = _nbytes(kept) + _nbytes(rejected) + ngram_removed
    out = {}
    for name in names:
        r = by_reason.get(reason_of[name], 0)
        rb = _nbytes(rejected.filter(pc.equal(rejected.column("reject_reason"), reason_of[name]))) if r else 0
        cut = ngram_removed if name == "dedup_ngram" else 0
        sc = StageCounts(n_in, n_in - r, Counter({reason_of[name]: r} if r else {}), Counter(), bytes_in,
                         bytes_in - rb - cut)
        out[name] = sc.to_dict()
        n_in, bytes_in = n_in - r, bytes_in - rb - cut
    return out


def _shards(store: Store, config: DedupConfig, storage_options, task_ids: list[str] | None,
            source: str = SOURCE) -> list[list]:
    """The listing: ``[reference index (-1: own), path]`` per shard, own shards first."""
    if task_ids is None:
        rels = store.glob(f"{source}/*.parquet")
    else:
        rels = [r for r in (f"{source}/{t}.parquet" for t in task_ids) if store.exists(r)]
    out = [[-1, rel] for rel in rels]
    for j, d in enumerate(config.reference_dirs):
        out += [[j, rel] for rel in Store(d, storage_options).glob("*.parquet")]
    return out


#: Outputs of this phase whose temporary files (``<file>.tmp-<hex>``) killed writers may leave.
def remove_leftover_temps(store: Store, dest: str = DEST) -> list[str]:
    """Remove the temporary files of ``dest/`` and ``rejected/dedup-*`` that killed writers
    left (``datapipe.io.parquet.remove_temporaries``); return their paths relative to the run.
    Called after the last writing step has returned."""
    base = store.root.rstrip("/") + "/"
    return [p[len(base):] if p.startswith(base) else p
            for pat in (f"{dest}/*", f"{REJECTED}/{REJECTED_PREFIX}*")
            for p in remove_temporaries(store.fs, store.path(pat))]


def run_dedup(client, run_dir: str, config: DedupConfig | None = None,
              storage_options: dict | None = None, progress=None, task_ids: list[str] | None = None,
              lineage: str = "", retries: int = 2, source: str = SOURCE,
              dest: str = DEST) -> dict[str, StageCounts]:
    """Deduplicate a run's phase-1 documents across the whole run.

    Reads ``run_dir/<source>/<task>.parquet`` (default phase 1's kept rows, ``_filtered/``) for
    ``task_ids`` (all of them when None), never modifying them, and writes
    ``run_dir/<dest>/<task>.parquet`` (default ``documents/``; kept rows, line edits applied)
    and ``run_dir/rejected/dedup-<task>.parquet`` (document schema, ``reject_reason`` in
    {``dedup:exact``, ``dedup:lines``, ``dedup:near``}, ``reject_stage = "dedup"``, ``duplicate_of``:
    kept id, null for ``dedup:lines``). ``client``: a ``distributed.Client``; every step is a set of
    tasks over one shard or one shuffle partition, each retried up to ``retries`` times. Sources
    carry ``id``, ``url``, ``warc_date``, ``text``, ``content_hash`` and ``minhash`` (stage
    ``dedup_signatures`` with ``config.minhash``'s settings).

    Returns ``{"dedup_exact"|"dedup_lines"|"dedup_near": StageCounts}`` for the enabled steps, in
    order, chained (``in`` of each = ``kept`` of the previous), and writes ``_dedup.json``
    (``STATS_FILE``: config, stats, counts; :func:`load_stats`). Finished steps of an unfinished plan in
    ``_dedup_work`` with the same fingerprint (config + ``lineage``, the fingerprint of the
    sources) are kept; any other plan is discarded. Raises ValueError when signatures do not match
    ``config.minhash.num_perm``. ``progress(step)``, if given, is called as a step starts.
    No temporary file of a writer killed in the run is left in ``dest/`` or ``rejected/``
    (:func:`remove_leftover_temps`).
    """
    config = config or DedupConfig()
    store = Store(run_dir, storage_options)
    fp, names = lineage_fingerprint(fingerprint(config), lineage, source, dest), step_names(config)
    listing = _shards(store, config, storage_options, task_ids, source)
    own = [i for i, (ref, _) in enumerate(listing) if ref < 0]
    work = Store(store.path(WORK), storage_options)
    bands, rows = config.minhash.band_rows()
    ctx = Ctx(work, store, config.partitions or max(1, len(own)), config, bands, rows, fp, dest=dest)
    t0 = time.perf_counter()
    if not (work.exists(LISTING) and work.read_json(LISTING).get("fingerprint") == fp):
        work.rm("")
        work.write_json(LISTING, {"fingerprint": fp, "shards": listing})
    run = StepRunner(client, ctx, retries)
    if work.exists("plan.json"):
        stats = work.read_json("plan.json")["stats"]
    else:
        stats = _plan(run, ctx, len(listing), own, progress) if names else {}
        work.write_json("plan.json", {"fingerprint": fp, "stats": stats})
    totals = {n: StageCounts() for n in names}
    if progress:
        progress("write documents")
    if names:
        for per in run("apply", _apply, own, names, marker=False):
            for n in names:
                totals[n].add(StageCounts.from_dict(per[n]))
        totals[names[0]].seconds = time.perf_counter() - t0
        stats = dict(stats, seconds_per_step=dict(stats.get("seconds_per_step", {}), **run.seconds))
    else:  # every step off: the sources are the documents
        for i in own:
            s = ctx.shard(i)
            store.write(f"{dest}/{s.name}", without_snapshots(store.read(s.rel)))
    remove_leftover_temps(store, dest)
    store.write_json(STATS_FILE, {"config": config.model_dump(mode="json"), "stats": stats,
                                  "counts": {k: v.to_dict() for k, v in totals.items()}})
    if not config.keep_work:
        store.rm(WORK)
    return totals


def load_stats(run_dir: str, storage_options: dict | None = None) -> dict:
    """The ``stats`` of a finished dedup (cluster-size histograms, pairs, rounds) from its marker."""
    return Store(run_dir, storage_options).read_json(STATS_FILE)["stats"]


# ------------------------------------------------------------------ the registered phase

from datapipe.phase import (  # noqa: E402
    DOCUMENTS,
    Dataset,
    Phase,
    PhaseContext,
    PhaseResult,
    register_phase,
)


@register_phase
class DedupPhase(Phase):
    """Exact, line-level and MinHash LSH near-dedup over the whole run (section ``dedup:``): a
    documents transform, the first (rank 10); removed documents go to ``rejected/dedup-<task>``."""

    name = "dedup"
    version = ALGO_VERSION
    rank = 10
    sections = {"dedup": DedupConfig}
    reads = ("documents",)
    writes = (DOCUMENTS, Dataset("dedup_rejected", REJECTED, REJECTED_PREFIX + "{task}.parquet", "rejected"))
    work = (WORK, STATS_FILE)

    @classmethod
    def required_stages(cls, manifest) -> list[dict]:

        return [{"dedup_signatures": stage_config(manifest.section("dedup")).model_dump()}]

    def check(self) -> None:
        cfg = self.manifest.section("dedup")
        if hasattr(cfg, "check"):
            cfg.check()
        from fsspec.core import url_to_fs

        for d in getattr(cfg, "reference_dirs", []):  # a missing one would silently match nothing
            fs, root = url_to_fs(d, **(self.manifest.inputs.storage_options or {}))
            if not fs.isdir(root):
                raise FileNotFoundError(f"dedup.reference_dirs: {d} is not a folder (give the documents/ "
                                        "folder of an earlier run)")

    def assets(self) -> list | None:
        """The documents shards of ``reference_dirs`` (what their documents hold decides which of
        this run's documents are duplicates), in the order the phase lists them; None without
        reference folders. Raises (FileNotFoundError) when one cannot be listed: ``check`` says why."""
        cfg = self.manifest.section("dedup")
        if cfg is None or not cfg.reference_dirs:
            return None
        so = self.manifest.inputs.storage_options
        out = []
        for d in cfg.reference_dirs:
            store = Store(d, so)
            proto = store.fs.protocol[0] if isinstance(store.fs.protocol, (tuple, list)) else store.fs.protocol
            pre = "" if proto in ("file", "local") else f"{proto}://"
            out += [pre + store.path(rel) for rel in store.glob("*.parquet")]
        return out

    @classmethod
    def applied_config(cls, config: dict, stats: dict) -> dict:
        minhash = (config.get("dedup") or {}).get("minhash")
        chosen = banding(stats)
        if minhash and chosen and minhash.get("bands") is None:
            minhash["bands"], minhash["rows"] = chosen
        return config

    def run(self, ctx: PhaseContext) -> PhaseResult:
        cfg = self.manifest.section("dedup")
        counts = run_dedup(ctx.client, ctx.output, cfg, ctx.storage_options, progress=ctx.progress,
                           task_ids=ctx.task_ids, lineage=lineage_fingerprint(ctx.lineage.get(DOCUMENTS.name, ""),
                                                                              self.assets_digest()),
                           retries=self.manifest.cluster.retries, source=ctx.documents_in, dest=ctx.documents_out)
        stats = load_stats(ctx.output, ctx.storage_options)
        return PhaseResult(stats={**{k: v.to_dict() for k, v in counts.items()}, "stats": stats}, ledger=counts)


def banding(stats: dict) -> tuple[int, int] | None:
    """(bands, rows) a finished dedup chose (its config leaves them null by default), from the
    phase's result ``stats`` as ``ledger.json`` keeps them."""
    st = stats.get("stats") or {}
    return (st["bands"], st["rows"]) if "bands" in st and "rows" in st else None
