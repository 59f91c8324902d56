"""``quality_classifier``: a fastText "reference text vs. web text" score (DCLM / CS336 style).

DCLM (Li et al. 2024) and CS336 assignment 4 keep documents that a fastText classifier finds
similar to a high-quality reference set. The default model, ``classifiers/models/quality_wiki_cc.ftz``,
was trained on WikiText-2 (positives, label ``wiki``) against text of real Common Crawl pages
(negatives, label ``cc``); its MODEL_CARD.md gives data, command and held-out metrics. English only.
"""
from __future__ import annotations

from typing import ClassVar

import pyarrow as pa

from datapipe.manifest.path_settings import ModelFile
from datapipe.manifest.ranges import Probability
from datapipe.stage import Rule, StageConfig, register
from datapipe.stages.fasttext_score import FastTextScoreStage


@register
class QualityClassifier(FastTextScoreStage):
    """``quality_score`` (float32, P(``positive_label``) in [0, 1]); reject below ``threshold``.

    Documents whose ``lang`` is not in ``languages`` get a null score and are kept.
    Reason: ``quality_classifier:score``. Missing model -> FileNotFoundError at setup.
    """

    name = "quality_classifier"
    column = "quality_score"
    fields: ClassVar[list[pa.Field]] = [pa.field("quality_score", pa.float32())]
    rules = (Rule("quality_classifier:score", "quality_score", "<", "threshold", languages="languages"),)

    class Config(StageConfig):
        model_path: ModelFile = "quality_wiki_cc.ftz"
        positive_label: str = "wiki"
        #: Reject when the score is below this probability, in [0, 1]. 0.5 = the model's argmax (wiki
        #: vs cc); DCLM keeps the top 10% by score instead, which a manifest can express with a higher threshold.
        threshold: Probability | None = 0.5
        languages: list[str] = ["en"]
