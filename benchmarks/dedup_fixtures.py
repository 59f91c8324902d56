"""Helpers to build phase-1-like document shards for dedup tests and benchmarks."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from datapipe.formats.documents import conform, document_schema
from datapipe.stages.dedup_signatures import DedupSignatures


def documents_table(rows: list[dict], stage_config: DedupSignatures.Config | None = None) -> pa.Table:
    """Rows (dicts with at least ``id`` and ``text``; ``warc_date`` etc. optional) -> a table with
    the run's document schema for the chain ``[dedup_signatures]``, signatures computed by the stage."""
    stage = DedupSignatures(stage_config)
    schema = document_schema([stage])
    base = pa.table({f.name: pa.array([r.get(f.name) for r in rows], f.type)
                     for f in schema if f.name in {k for r in rows for k in r}})
    return conform(stage(base), schema)


def write_shards(run_dir: str, shards: dict[str, list[dict]],
                 stage_config: DedupSignatures.Config | None = None) -> None:
    """Write ``run_dir/_filtered/<name>.parquet`` (phase 1's kept rows, the input of dedup) for each
    ``name -> rows`` of ``shards``."""
    os.makedirs(os.path.join(run_dir, "_filtered"), exist_ok=True)
    for name, rows in shards.items():
        pq.write_table(documents_table(rows, stage_config), os.path.join(run_dir, "_filtered", f"{name}.parquet"))
