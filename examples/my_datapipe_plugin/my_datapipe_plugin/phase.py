"""``doc_lengths``: a histogram of the kept documents' lengths, after dedup.

Section ``doc_lengths: {edges: [...]}`` (characters; bins are ``[edges[i], edges[i+1])`` plus one
open bin above the last edge). Writes ``OUTPUT/doc_lengths/histogram.json``:
``{"edges": [...], "counts": [...], "documents": N}``. Reads ``documents/`` only, so it reruns
exactly when the kept documents or its section change.
"""
from __future__ import annotations

import bisect
import json
from typing import ClassVar

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from datapipe.io.parquet import fs_and_path
from datapipe.phase import DOCUMENTS, Dataset, Phase, PhaseContext, PhaseResult, register_phase

FOLDER = "doc_lengths"


class DocLengthsConfig(BaseModel):
    """Histogram of kept documents' lengths in characters."""

    model_config = ConfigDict(extra="forbid")
    edges: list[int] = Field(default_factory=lambda: [0, 500, 2000, 10000], min_length=1)


def histogram(lengths: list[int], edges: list[int]) -> list[int]:
    """Counts per bin: ``[edges[i], edges[i+1])`` for each i, then ``[edges[-1], inf)``."""
    counts = [0] * len(edges)
    for n in lengths:
        i = bisect.bisect_right(edges, n) - 1
        if i >= 0:
            counts[i] += 1
    return counts


@register_phase
class DocLengthsPhase(Phase):
    """Histogram of kept documents' lengths (``OUTPUT/doc_lengths/histogram.json``)."""

    name = "doc_lengths"
    sections: ClassVar[dict] = {"doc_lengths": DocLengthsConfig}
    reads = ("documents",)
    # a report of its own: the engine owns (and on removal deletes) exactly this file
    writes = (Dataset("doc_lengths", FOLDER, "histogram.json", "report"),)

    def outputs_present(self, ctx: PhaseContext) -> bool:
        fs, path = fs_and_path(ctx.url(FOLDER, "histogram.json"), ctx.storage_options)
        return fs.exists(path)

    def run(self, ctx: PhaseContext) -> PhaseResult:
        ctx.progress("document lengths")
        edges = sorted(self.manifest.section("doc_lengths").edges)
        fs, root = fs_and_path(ctx.url(DOCUMENTS.folder), ctx.storage_options)
        lengths = []
        for path in sorted(fs.glob(f"{root.rstrip('/')}/*.parquet")):
            with fs.open(path, "rb") as fh:
                lengths += [len(t or "") for t in pq.read_table(fh, columns=["text"]).column("text").to_pylist()]
        out = {"edges": edges, "counts": histogram(lengths, edges), "documents": len(lengths)}
        dfs, dst = fs_and_path(ctx.url(FOLDER, "histogram.json"), ctx.storage_options)
        dfs.makedirs(dst.rsplit("/", 1)[0], exist_ok=True)
        with dfs.open(dst, "w") as fh:
            json.dump(out, fh, indent=1)
        return PhaseResult(stats=out)
