"""A user's per-document stage, in one file: the fraction of letters in capitals, and a rule.

Registered through the entry-point group ``datapipe.stages`` (tests/test_plugins.py writes the
package metadata a ``pip install`` would); a manifest lists it as ``- shout: {max_caps: 0.5}``.
"""
from __future__ import annotations

from typing import ClassVar

import pyarrow as pa
from pydantic import Field

from datapipe.stage import REJECT, Rule, Stage, StageConfig, register, with_column


def caps_fraction(text: str | None) -> float:
    """Upper-case letters / letters (0.0 for a text without letters)."""
    letters = [c for c in text or "" if c.isalpha()]
    return sum(c.isupper() for c in letters) / len(letters) if letters else 0.0


@register
class Shout(Stage):
    name = "shout"
    fields: ClassVar[list[pa.Field]] = [pa.field("shout_caps", pa.float64())]
    rules = (Rule("shout:caps", "shout_caps", ">", "max_caps"),)  # what --what-if replays

    class Config(StageConfig):
        max_caps: float = Field(0.5, ge=0, le=1)

    def __call__(self, batch: pa.Table) -> pa.Table:
        caps = [caps_fraction(t) for t in batch.column("text").to_pylist()]
        batch = with_column(batch, "shout_caps", caps, pa.float64())
        return with_column(batch, REJECT, [self.decide({"shout_caps": c}, self.config) for c in caps], pa.string())
