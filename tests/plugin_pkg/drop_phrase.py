"""A user's global phase, in one file: drop every document that contains a configured phrase.

Registered through the entry-point group ``datapipe.phases`` (tests/test_plugins.py writes the
package metadata a ``pip install`` would), configured by a manifest section ``drop_phrase:``.
It is a documents transform: it reads the documents as the previous transform left them and
writes the next version; what it removes goes to ``rejected/drop_phrase-<task>.parquet``.
"""
from __future__ import annotations

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from datapipe.engine.transform import filter_documents
from datapipe.phase import DOCUMENTS, Dataset, Phase, PhaseContext, PhaseResult, register_phase

REJECTED = Dataset("drop_phrase_rejected", "rejected", "drop_phrase-{task}.parquet", "rejected")


class DropPhraseConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: Case-insensitive substrings; a document holding any of them is rejected.
    phrases: list[str] = []


def matching(phrases: list[str]):
    wanted = [p.lower() for p in phrases]

    def decide(table: pa.Table) -> list[str | None]:
        return [("drop_phrase:match" if t is not None and any(p in t.lower() for p in wanted) else None)
                for t in table.column("text").to_pylist()]
    return decide


@register_phase
class DropPhrasePhase(Phase):
    name = "drop_phrase"
    sections = {"drop_phrase": DropPhraseConfig}
    reads = ("documents",)
    writes = (DOCUMENTS, REJECTED)
    rank = 50   # after dedup

    def run(self, ctx: PhaseContext) -> PhaseResult:
        cfg = self.manifest.section("drop_phrase")
        counts = filter_documents(ctx, matching(cfg.phrases), REJECTED, stage=self.name)
        return PhaseResult(stats={"rejected": counts[self.name].n_rejected}, ledger=counts)
