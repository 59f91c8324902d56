"""``shouting``: the share of letters in upper case, and a rule on it.

Signal ``shouting_upper_frac`` (float32, upper-case letters / all cased letters; null for a text
without cased letters). Rejects with ``shouting:upper_frac`` when it exceeds ``max_upper_frac``
and the text has at least ``min_letters`` cased letters (short texts such as "OK" say nothing).
"""
from __future__ import annotations

from typing import ClassVar

import pyarrow as pa
from pydantic import Field

from datapipe.stage import Stage, StageConfig, merge_reasons, register, with_column


def upper_frac(text: str) -> tuple[float | None, int]:
    """(upper-case letters / cased letters or None, number of cased letters) of ``text``."""
    upper = sum(1 for c in text if c.isupper())
    cased = upper + sum(1 for c in text if c.islower())
    return (upper / cased if cased else None), cased


@register
class ShoutingStage(Stage):
    """Reject documents written mostly in capitals (``shouting:upper_frac``)."""

    name = "shouting"

    class Config(StageConfig):
        max_upper_frac: float = Field(0.5, ge=0.0, le=1.0)
        min_letters: int = Field(20, ge=1)

    fields: ClassVar[list[pa.Field]] = [pa.field("shouting_upper_frac", pa.float32())]
    recomputable: ClassVar[bool] = True   # decide() below recomputes the verdict from the signal

    @classmethod
    def decide(cls, signals: dict, config) -> str | None:
        frac = signals.get("shouting_upper_frac")
        return "shouting:upper_frac" if frac is not None and frac > config.max_upper_frac else None

    def __call__(self, batch: pa.Table) -> pa.Table:
        fracs, reasons = [], []
        for text in batch.column("text").to_pylist():
            frac, cased = upper_frac(text or "")
            fracs.append(frac)
            rule = frac is not None and cased >= self.config.min_letters
            reasons.append(self.decide({"shouting_upper_frac": frac}, self.config) if rule else None)
        batch = with_column(batch, "shouting_upper_frac", fracs, pa.float32())
        return merge_reasons(batch, reasons)
