"""The base of the word-rule stages (``gopher_repetition``, ``gopher_quality``, ``fineweb``)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from datapipe.stage import Stage, merge_reasons, with_column
from datapipe.stages.lib import words as W


class WordRuleStage(Stage):
    """A stage whose signals of a batch (``signals``: column name -> numpy array, one value a row)
    are stored as its ``fields`` and whose reasons come from its declared ``rules`` (``stage.Rule``),
    decided for the whole batch at once; ``decide`` replays them on stored signals."""

    def setup(self) -> None:
        W.prepare()

    def assets(self) -> list:
        return []  # no files: its check (this setup) depends on the config and code alone

    def signals(self, batch: pa.Table) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, batch: pa.Table) -> pa.Table:
        sig = self.signals(batch)
        for f in self.fields:
            batch = with_column(batch, f.name, W.to_arrow(sig[f.name], f.type), f.type)
        return merge_reasons(batch, W.reasons_for_batch(self.rules, sig, self.config, batch.num_rows))
