"""Phase ``publish``: without dedup, phase 1's kept rows are the run's documents.

Copies ``_filtered/<task>.parquet`` to ``documents/<task>.parquet`` for every task of the plan,
one Dask task per shard. Enabled exactly when the ``dedup:`` section is absent (then no other
phase writes ``documents/``).
"""
from __future__ import annotations

from datapipe.stages.phases.dedup.phase import (
    SOURCE,
    _documents_present,
    remove_leftover_temps,
)

from datapipe.engine.shuffle_store import Store
from datapipe.formats.documents import without_snapshots
from datapipe.phase import Phase, PhaseContext, PhaseResult, register_phase


def _copy(store: Store, name: str) -> int:
    t = without_snapshots(store.read(f"{SOURCE}/{name}.parquet"))  # no pre-masking text in documents/
    store.write(f"documents/{name}.parquet", t)
    return t.num_rows


@register_phase
class PublishPhase(Phase):
    name = "publish"
    sections = {}
    reads = ("tasks",)
    writes = "documents"

    @classmethod
    def enabled(cls, manifest) -> bool:
        return manifest.section("dedup") is None

    def outputs_present(self, ctx: PhaseContext) -> bool:
        return _documents_present(ctx)

    def run(self, ctx: PhaseContext) -> PhaseResult:
        store = Store(ctx.output, ctx.storage_options)
        names = [t for t in ctx.task_ids if store.exists(f"{SOURCE}/{t}.parquet")]
        ctx.progress("write documents")
        rows = ctx.client.gather(ctx.client.map(_copy, [store] * len(names), names, pure=False))
        remove_leftover_temps(store)  # of copies killed mid-write (their retries wrote under new names)
        return PhaseResult(stats={"shards": len(names), "documents": int(sum(rows))})
