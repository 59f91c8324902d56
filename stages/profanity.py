"""``profanity``: a trained toxicity classifier that works offline out of the box.

The model is ``alt-profanity-check`` (PyPI, MIT; a maintained fork of Zhou's ``profanity-check``):
a TF-IDF (English stop words removed) + linear SVM with Platt calibration (scikit-learn
``CalibratedClassifierCV(LinearSVC)``), trained on ~200k human-labelled comments (Davidson et al.
2017 hate-speech tweets and the Wikipedia comments of Jigsaw's Toxic Comment challenge). The
fitted vectorizer and model ship inside its wheel (``profanity_check/data/*.joblib``); nothing is
downloaded. Its version pins the scikit-learn that pickled them (1.9.1 for 1.9.1), which is the
scikit-learn pin of pyproject.toml.

Measured on ``toxicity/jigsaw_test_examples_ibm_max.csv`` (101 comments, 13 toxic) and on
obfuscated spellings next to the fastText ``toxicity`` stage and the LDNOOBW list: see
tests/test_profanity.py (the floors there are the measured values, rounded down). Word-level
TF-IDF cannot see inside a token: ``f*ck`` (-> ``ck``), ``sh1t``, ``b1tch`` score like clean text;
the fastText model's character n-grams catch those, so the two are complementary.

Span-level (``stages.span_score.SpanScoreStage``): every sentence of the whole text is scored and
the document gets the maximum and the flagged counts/fractions. Scored on the whole document the
linear model dilutes (TF-IDF vectors are L2-normalised: 3 toxic sentences among 100 clean ones
scored 0.024); a sentence is the length of the comments it was trained on. English only by
default (the vocabulary is English).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import pyarrow as pa

from datapipe.manifest.ranges import NonNegInt, Probability
from datapipe.stage import register
from datapipe.stages.span_score import SpanScoreConfig, SpanScoreStage


@register
class Profanity(SpanScoreStage):
    """Span-level calibrated P(offensive) from alt-profanity-check (signals and reasons:
    ``stages.span_score.SpanScoreStage``; columns ``profanity_score`` = highest sentence score,
    ``profanity_spans``, ``profanity_flagged``, ``profanity_flagged_frac``,
    ``profanity_flagged_char_frac``). Documents outside ``languages`` (or without text) get null
    signals and are kept.

    Thresholds: reject when one sentence scores above ``threshold`` = 0.97, or when more than
    ``max_flagged`` = 1 sentence scores above ``span_threshold`` = 0.8. Chosen with ``nsfw``'s on
    the development half of the safety set: the highest recall keeping false rejections of clean
    and benign dev pages <= 1% (``benchmarks/bench_safety.py --sweep``); single sentences at
    0.9-0.97 are mostly clinical or idiomatic ("penis and vagina", "lipstick on a pig"), and the
    package's own ``predict`` cut-off (0.5) flags about one clean sentence in 20. Test-half
    figures: README.
    """

    name = "profanity"
    column = "profanity_score"
    fields: ClassVar[list[pa.Field]] = SpanScoreStage.span_fields("profanity")
    rules = SpanScoreStage.span_rules("profanity")

    class Config(SpanScoreConfig):
        threshold: Probability | None = 0.97
        span_threshold: Probability = 0.8
        max_flagged: NonNegInt | None = 1

    def setup(self) -> None:
        try:
            from profanity_check import predict_prob
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ImportError("profanity: alt-profanity-check is not installed (pip install "
                              "alt-profanity-check==1.9.1; it needs scikit-learn==1.9.1)") from e
        self._predict = predict_prob

    def assets(self) -> list:
        """The pickled vectorizer and model inside the wheel, its loader, and scikit-learn (which
        unpickles them: another version may not), located without importing either."""
        import importlib.util
        from pathlib import Path

        spec, sk = importlib.util.find_spec("profanity_check"), importlib.util.find_spec("sklearn")
        if spec is None or sk is None or not spec.origin or not sk.origin:
            raise FileNotFoundError("alt-profanity-check or scikit-learn not installed")
        pkg = Path(spec.origin).parent
        return [pkg / "profanity_check.py", pkg / "data" / "model.joblib", pkg / "data" / "vectorizer.joblib",
                Path(sk.origin)]

    def score_spans(self, spans: list[str]) -> np.ndarray:
        return np.asarray(self._predict(spans), dtype=np.float64)

    def scores(self, texts: list[str | None], langs: list[str | None] | None = None) -> list[float | None]:
        """Highest span score per text (None where skipped: no text, or a language not in ``languages``)."""
        want = set(self.config.languages)
        langs = langs if langs is not None else [None] * len(texts)
        keep = [t if t and (not want or langs[i] is None or (langs[i] or "").split("-")[0] in want) else None
                for i, t in enumerate(texts)]
        mx = self.aggregate(keep, langs)["max"]
        return [None if np.isnan(v) else float(v) for v in mx.tolist()]
