"""Per-task outputs of a documents transform whose input shard is gone.

A task whose rows all go (rejected or errored in a rerun) has no shard in the folder a transform
reads; the transform writes nothing for it, so its shard of the folder it writes (and of its
rejected datasets) from an earlier run would stay and be counted. ``orphaned_outputs`` names
them; the runner removes them before the transform runs, so the folder holds what a fresh run
writes.
"""
from __future__ import annotations

from datapipe.io.parquet import fs_and_path
from datapipe.phase import PhaseContext


def orphaned_outputs(phase, ctx: PhaseContext) -> list[str]:
    """Paths of ``ctx.documents_out/<task>.parquet`` and of the phase's rejected datasets' files
    for the tasks of ``ctx.task_ids`` without ``ctx.documents_in/<task>.parquet``."""
    if ctx.documents_in is None or ctx.documents_out is None:
        return []
    fs, root = fs_and_path(ctx.output, ctx.storage_options)
    root = root.rstrip("/")
    out = []
    for t in ctx.task_ids:
        if fs.exists(f"{root}/{ctx.documents_in}/{t}.parquet"):
            continue
        rels = [f"{ctx.documents_out}/{t}.parquet"] + [d.file(t) for d in phase.rejected() if d.per_task]
        out += [p for p in (f"{root}/{r}" for r in rels) if fs.exists(p)]
    return out
