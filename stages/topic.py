"""Topic labels from any supervised fastText model (stage ``topic``), for domain assignment.

Writes ``topic`` (string: the model's best label, ``__label__`` removed) and ``topic_score``
(float32 in [0, 1], its probability). It never rejects: the mixing phase turns labels into domains
with a rule such as ``{domain: news, column: topic, equals: news}`` (``stages/mix.py``), as
dolma's and DCLM's topic/domain taggers are used. Models load through the same loader as the
quality and toxicity classifiers (``datapipe.classifiers.model``), once per worker.
"""
from __future__ import annotations

from typing import ClassVar

import pyarrow as pa

from datapipe.classifiers.model import load_classifier
from datapipe.manifest.path_settings import ModelFile
from datapipe.manifest.ranges import Probability
from datapipe.stage import Stage, StageConfig, register, texts_in_languages, with_column
from datapipe.stages.fasttext_score import classifier_assets


class TopicConfig(StageConfig):
    model_path: ModelFile                  # a file name in classifiers/models or $DATAPIPE_MODELS, or a path
    min_score: Probability = 0.0       # in [0, 1]; below it, topic and topic_score are null (no confident label)
    languages: list[str] = []          # score only these languages (empty = all)


@register
class Topic(Stage):
    name = "topic"
    Config = TopicConfig
    reads = ("lang",)  # only documents in ``languages`` are labelled
    fields: ClassVar[list[pa.Field]] = [pa.field("topic", pa.string()), pa.field("topic_score", pa.float32())]

    def setup(self) -> None:
        self._clf = load_classifier(self.config.model_path, require_positive=False)

    def assets(self) -> list:
        return classifier_assets(self.config.model_path)

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.ensure_setup()
        c = self.config
        texts = texts_in_languages(batch, c.languages)
        top = [(lab, p) if p is not None and p >= c.min_score else (None, None)
               for lab, p in self._clf.predict_top(texts)]
        batch = with_column(batch, "topic", [t[0] for t in top], pa.string())
        return with_column(batch, "topic_score", [t[1] for t in top], pa.float32())
