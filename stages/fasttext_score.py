"""Whole-text fastText score stages: the base class, the model-loading mixin and the asset list.

``quality_classifier`` builds on :class:`FastTextScoreStage`, the span stages on :class:`FastTextModel`;
``topic`` uses :func:`classifier_assets`.
"""
from __future__ import annotations

from typing import ClassVar

import pyarrow as pa

from datapipe.classifiers.model import load_classifier, resolve_model_path
from datapipe.stage import Stage, merge_reasons, texts_in_languages, with_column


def classifier_assets(model_path: str | None) -> list:
    """A fastText classifier's files for ``Stage.assets``: the model and its ``.json`` sidecar if any."""

    if not model_path:
        raise ValueError("no model_path set")
    p = resolve_model_path(model_path)
    return [p] + ([p.with_suffix(".json")] if p.with_suffix(".json").is_file() else [])


class FastTextModel:
    """Mixin of the stages that score with a fastText classifier: ``setup`` loads it from the
    Config's ``model_path`` and ``positive_label`` (FileNotFoundError, with ``how_to_get``, when no
    path is set); its files are the stage's ``assets``."""

    how_to_get: ClassVar[str] = "Train one with `datapipe classifiers train`."

    def setup(self) -> None:
        c = self.config
        if not c.model_path:
            raise FileNotFoundError(f"{self.name}: no model_path set. {self.how_to_get}")
        self._clf = load_classifier(c.model_path, c.positive_label or None)

    def assets(self) -> list:
        return classifier_assets(self.config.model_path)


class FastTextScoreStage(FastTextModel, Stage):
    """Base of stages that write one fastText probability of the whole text and may reject on it.

    Subclasses set ``name``, ``column`` (float32 field), ``rules`` on it and a ``Config`` with
    ``model_path``, ``positive_label``, ``threshold``, ``languages`` (empty = all). Documents in
    other languages get a null score and are kept.
    """

    column: ClassVar[str] = ""
    reads = ("lang",)  # only documents in ``languages`` are scored

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.ensure_setup()
        c = self.config
        texts = texts_in_languages(batch, c.languages)
        scores = self._clf.score(texts)
        vals = [None if s != s else float(s) for s in scores.tolist()]
        reasons = [self.decide({self.column: v}, c) for v in vals]
        batch = with_column(batch, self.column, vals, pa.float32())
        return merge_reasons(batch, reasons)
