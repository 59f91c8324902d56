"""Export the kept documents of a run as Dolma-layout JSONL.zst, for other tools (Dolma, DataTrove...).

``OUTPUT/documents/<shard>.parquet`` -> ``OUTPUT/dolma/<shard>.jsonl.zst``, one JSON object a line:

    {"id": <our id>, "text": ..., "source": <dataset name>, "created": <warc_date>,
     "added": <from the input, if any>,
     "metadata": {<the input's "metadata" object, if any>, "url", "lang", "lang_score",
                  "warc_file", "warc_record_id", "warc_offset"}}

``source`` is the input document's own ``source`` (Dolma inputs) or else the run's name. Keys
whose value is null are left out. Runs after dedup (which rewrites ``documents/``), one Dask task
per shard; each file is written under a temporary name and renamed, and the bytes depend only on
the shard (no timestamps), so a rerun gives the same files. Files of shards that no longer exist
are removed.
"""
from __future__ import annotations

import json
import uuid
from pathlib import PurePosixPath

import pyarrow.parquet as pq
import zstandard

from datapipe.io.parquet import fs_and_path, join

EXPORT_DIR = "dolma"
_COLUMNS = ["id", "text", "url", "lang", "lang_score", "warc_file", "warc_record_id", "warc_offset",
            "warc_date", "metadata"]
_PROVENANCE = ("url", "lang", "lang_score", "warc_file", "warc_record_id", "warc_offset")


def dolma_record(row: dict, source_name: str) -> dict:
    """One document row (dict of schema columns) -> a Dolma document dict (see module doc)."""
    kept = json.loads(row["metadata"]) if row.get("metadata") else {}
    meta = dict(kept["metadata"]) if isinstance(kept.get("metadata"), dict) else {}
    meta.update({k: row.get(k) for k in _PROVENANCE if row.get(k) is not None})
    src = kept.get("source") if isinstance(kept.get("source"), str) else source_name
    doc = {"id": row["id"], "text": row["text"], "source": src,
           "created": row.get("warc_date"), "added": kept.get("added"), "metadata": meta}
    return {k: v for k, v in doc.items() if v is not None}


def export_shard(src_url: str, dst_url: str, source_name: str, storage_options: dict | None = None,
                 level: int = 3) -> int:
    """Write one documents shard as Dolma JSONL.zst (atomically). Returns the number of documents."""
    fs, src = fs_and_path(src_url, storage_options)
    dfs, dst = fs_and_path(dst_url, storage_options)
    dfs.makedirs(dst.rsplit("/", 1)[0], exist_ok=True)
    tmp = f"{dst}.tmp-{uuid.uuid4().hex[:8]}"
    n = 0
    try:
        with fs.open(src, "rb") as sfh, dfs.open(tmp, "wb") as fh:
            pf = pq.ParquetFile(sfh)
            cols = [c for c in _COLUMNS if c in pf.schema_arrow.names]
            with zstandard.ZstdCompressor(level=level).stream_writer(fh, closefd=False) as zw:
                for batch in pf.iter_batches(batch_size=1024, columns=cols):
                    lines = [json.dumps(dolma_record(r, source_name), ensure_ascii=False) + "\n"
                             for r in batch.to_pylist()]
                    zw.write("".join(lines).encode("utf-8"))
                    n += len(lines)
        dfs.mv(tmp, dst)
    except BaseException:
        if dfs.exists(tmp):
            dfs.rm(tmp)
        raise
    return n


def export_dolma(run_dir: str, source_name: str = "datapipe", storage_options: dict | None = None,
                 client=None) -> dict:
    """Export every ``run_dir/documents/*.parquet`` to ``run_dir/dolma/*.jsonl.zst``.

    ``client``: a ``distributed.Client`` (one task per shard), or None to run here. Returns
    ``{"files": int, "documents": int, "output": url}``.
    """
    so = storage_options or {}
    fs, root = fs_and_path(run_dir, so)
    names = sorted(PurePosixPath(p).stem for p in fs.glob(f"{root.rstrip('/')}/documents/*.parquet"))
    srcs = [join(run_dir, "documents", f"{n}.parquet") for n in names]
    dsts = [join(run_dir, EXPORT_DIR, f"{n}.jsonl.zst") for n in names]
    if client is None:
        counts = [export_shard(s, d, source_name, so) for s, d in zip(srcs, dsts)]
    else:
        counts = client.gather(client.map(export_shard, srcs, dsts, source_name=source_name,
                                          storage_options=so, pure=False))
    keep = {f"{n}.jsonl.zst" for n in names}
    for p in fs.glob(f"{root.rstrip('/')}/{EXPORT_DIR}/*.jsonl.zst"):
        if PurePosixPath(p).name not in keep:  # from a shard dedup or a rerun removed
            fs.rm(p)
    return {"files": len(names), "documents": sum(counts), "output": join(run_dir, EXPORT_DIR)}


# ------------------------------------------------------------------ the registered phase

from datapipe.phase import (  # noqa: E402
    Dataset,
    Phase,
    PhaseContext,
    PhaseResult,
    register_phase,
)


@register_phase
class DolmaExportPhase(Phase):
    """``output_formats: [parquet, dolma_jsonl]``: also ``OUTPUT/dolma/<task>.jsonl.zst``."""

    name = "dolma_jsonl"
    label = "export"
    sections = {}
    reads = ("documents",)
    writes = (Dataset("dolma", EXPORT_DIR, "{task}.jsonl.zst", "export"),)  # one file per documents shard

    @classmethod
    def enabled(cls, manifest) -> bool:
        return "dolma_jsonl" in manifest.output_formats

    def config(self) -> dict:
        return {"source_name": self.manifest.name}

    def outputs_present(self, ctx: PhaseContext) -> bool:
        """Every documents shard of the run's tasks has its export file."""
        fs, root = fs_and_path(ctx.output, ctx.storage_options)
        root = root.rstrip("/")
        return fs.exists(f"{root}/{EXPORT_DIR}") and all(
            fs.exists(f"{root}/{EXPORT_DIR}/{t}.jsonl.zst") for t in ctx.task_ids
            if fs.exists(f"{root}/documents/{t}.parquet"))

    def run(self, ctx: PhaseContext) -> PhaseResult:
        ctx.progress("export dolma_jsonl")
        return PhaseResult(stats=export_dolma(ctx.output, self.manifest.name, ctx.storage_options, ctx.client))
