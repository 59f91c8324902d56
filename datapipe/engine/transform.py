"""A documents transform in a few lines: a per-row decision applied to every shard on Dask.

``filter_documents(ctx, decide, rejected, stage)`` is what a phase that removes documents by a
rule of its own needs (the run's accounting, files and lineage are the engine's): it reads each
task's shard of ``ctx.documents_in``, asks ``decide(table)`` for a reject reason per row (None:
keep), writes the kept rows to ``ctx.documents_out`` and the others, with ``reject_reason`` and
``reject_stage`` set, to the phase's rejected dataset, and returns the ledger row. ``decide``
runs on the workers, so it must be importable there (a module-level function of the plugin).
"""
from __future__ import annotations

from collections import Counter
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from datapipe.engine.ledger import StageCounts
from datapipe.engine.shuffle_store import Store
from datapipe.phase import Dataset, PhaseContext


def _text_bytes(t: pa.Table) -> int:
    return int(pc.sum(pc.binary_length(t.column("text"))).as_py() or 0) if t.num_rows else 0


def _filter_one(store: Store, src: str, dst: str, rej: str, decide, stage: str) -> dict:
    table = store.read(src)
    reasons = list(decide(table))
    if len(reasons) != table.num_rows:
        raise ValueError(f"{stage}: decide() gave {len(reasons)} reasons for {table.num_rows} rows")
    drop = pa.array([r is not None for r in reasons])
    kept, gone = table.filter(pc.invert(drop)), table.filter(drop)
    got = [r for r in reasons if r is not None]
    for col, vals in (("reject_reason", got), ("reject_stage", [stage] * len(got))):
        j = gone.schema.get_field_index(col)
        gone = gone.set_column(j, gone.schema.field(j), pa.array(vals, gone.schema.field(j).type))
    store.write(dst, kept)
    if gone.num_rows:
        store.write(rej, gone)
    elif store.exists(rej):
        store.rm(rej)
    return StageCounts(table.num_rows, kept.num_rows, Counter(got), Counter(), _text_bytes(table),
                       _text_bytes(kept)).to_dict()


def filter_documents(ctx: PhaseContext, decide: Callable[[pa.Table], list[str | None]], rejected: Dataset,
                     stage: str) -> dict[str, StageCounts]:
    """Apply ``decide`` to every shard of the run (one Dask task each, retried as the cluster's
    tasks are); return ``{stage: StageCounts}`` for ``PhaseResult.ledger``. ``rejected`` is the
    phase's per-task dataset of role ``rejected``. Raises ValueError when ``decide`` returns a list
    of another length than its table."""
    store = Store(ctx.output, ctx.storage_options)
    names = [t for t in ctx.task_ids if store.exists(f"{ctx.documents_in}/{t}.parquet")]
    ctx.progress("write documents")
    retries = ctx.manifest.cluster.retries if ctx.manifest is not None else 2
    futs = ctx.client.map(_filter_one, [store] * len(names), [f"{ctx.documents_in}/{t}.parquet" for t in names],
                          [f"{ctx.documents_out}/{t}.parquet" for t in names], [rejected.file(t) for t in names],
                          decide=decide, stage=stage, retries=retries, pure=False)
    total = StageCounts()
    for d in ctx.client.gather(futs):
        total.add(StageCounts.from_dict(d))
    return {stage: total}
