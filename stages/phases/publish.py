"""Phase ``publish``: when no other phase transforms the documents, phase 1's kept rows are the
run's documents.

Copies ``_filtered/<task>.parquet`` to ``documents/<task>.parquet`` for every task of the plan
(pre-masking text columns dropped), one Dask task per shard. A documents transform like the
others, enabled exactly when no other enabled phase writes the documents.
"""
from __future__ import annotations

from datapipe.engine.shuffle_store import Store
from datapipe.formats.documents import without_snapshots
from datapipe.io.parquet import remove_temporaries
from datapipe.phase import DOCUMENTS, Phase, PhaseContext, PhaseResult, phases, register_phase


def _copy(store: Store, src: str, dst: str) -> int:
    t = without_snapshots(store.read(src))  # no pre-masking text in documents/
    store.write(dst, t)
    return t.num_rows


@register_phase
class PublishPhase(Phase):
    name = "publish"
    sections = {}
    rank = 1000   # only ever alone
    reads = ("documents",)
    writes = (DOCUMENTS,)

    @classmethod
    def enabled(cls, manifest) -> bool:
        return not any(p is not cls and p.transforms_documents() and p.enabled(manifest) for p in phases())

    def run(self, ctx: PhaseContext) -> PhaseResult:
        store = Store(ctx.output, ctx.storage_options)
        names = [t for t in ctx.task_ids if store.exists(f"{ctx.documents_in}/{t}.parquet")]
        ctx.progress("write documents")
        rows = ctx.client.gather(ctx.client.map(
            _copy, [store] * len(names), [f"{ctx.documents_in}/{t}.parquet" for t in names],
            [f"{ctx.documents_out}/{t}.parquet" for t in names], pure=False))
        # of copies killed mid-write (their retries wrote under new names)
        remove_temporaries(store.fs, store.path(f"{ctx.documents_out}/*"))
        return PhaseResult(stats={"shards": len(names), "documents": int(sum(rows))})
