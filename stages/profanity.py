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

The score is one probability per document over its whole text; TF-IDF vectors are L2-normalised,
so one slur in a long page scores lower than the same slur in a one-line comment (the model was
trained on comments). English only by default (the vocabulary is English).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import pyarrow as pa

from datapipe.ranges import PosInt, Probability
from datapipe.stage import Stage, StageConfig, merge_reasons, register, with_column


@register
class Profanity(Stage):
    """``profanity_score`` (float32, calibrated P(offensive)) from alt-profanity-check; reason
    ``profanity:score`` when the score is above ``threshold``. Documents outside ``languages`` (or
    without text) get a null score and are kept."""

    name = "profanity"
    fields: ClassVar[list[pa.Field]] = [pa.field("profanity_score", pa.float32())]

    class Config(StageConfig):
        #: Reject above this probability, in [0, 1]; None = annotate only. 0.5 is the package's own ``predict``.
        threshold: Probability | None = 0.5
        languages: list[str] = ["en"]
        #: Score a prefix of this many characters, >= 1 (the tail of a 1 MB page adds nothing but time).
        max_chars: PosInt = 100_000

    def setup(self) -> None:
        try:
            from profanity_check import predict_prob
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ImportError("profanity: alt-profanity-check is not installed (pip install "
                              "alt-profanity-check==1.9.1; it needs scikit-learn==1.9.1)") from e
        self._predict = predict_prob

    def scores(self, texts: list[str | None], langs: list[str | None] | None = None) -> list[float | None]:
        """Score per text (None where skipped: no text, or a language not in ``languages``)."""
        self.ensure_setup()
        want = set(self.config.languages)
        todo = [i for i, t in enumerate(texts)
                if t and (langs is None or not want or (langs[i] or "").split("-")[0] in want)]
        out: list[float | None] = [None] * len(texts)
        if todo:
            probs = np.asarray(self._predict([texts[i][: self.config.max_chars] for i in todo]), dtype=np.float64)
            for i, p in zip(todo, probs.tolist()):
                out[i] = p
        return out

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = batch.column("text").to_pylist()
        langs = batch.column("lang").to_pylist() if "lang" in batch.column_names else None
        vals = self.scores(texts, langs)
        thr = self.config.threshold
        reasons = [f"{self.name}:score" if (v is not None and thr is not None and v > thr) else None for v in vals]
        batch = with_column(batch, "profanity_score", vals, pa.float32())
        return merge_reasons(batch, reasons)
