"""Span-level score stages: the base of ``toxicity``, ``nsfw`` (``stages/safety.py``) and
``profanity`` (``stages/profanity.py``). Every sentence span of the text is scored
(``stages/lib/spans.py``) and the document gets the aggregates; see :class:`SpanScoreStage`.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import pyarrow as pa
from pydantic import model_validator

from datapipe.manifest.ranges import NonNegInt, PosInt, Probability, check_order
from datapipe.stage import (
    Rule,
    Stage,
    StageConfig,
    merge_reasons,
    texts_in_languages,
    with_column,
)
from datapipe.stages.fasttext_score import FastTextModel
from datapipe.stages.lib import words as wd
from datapipe.stages.lib.spans import cached_spans, span_aggregates


class SpanScoreConfig(StageConfig):
    """Shared by the span-level safety stages; each stage sets its own defaults (see its docstring)."""

    #: Reject when the highest span score is above this, in [0, 1]; None = never.
    threshold: Probability | None = 0.5
    #: A span is "flagged" when its score is above this, in [0, 1] (counts and fractions).
    span_threshold: Probability = 0.5
    #: Reject when more than this many spans are flagged (>= 0); None = never.
    max_flagged: NonNegInt | None = None
    #: Reject when the flagged spans hold more than this fraction of the characters, in [0, 1]; None = never.
    max_flagged_char_frac: Probability | None = None
    languages: list[str] = ["en"]
    #: Spans shorter than this many words are joined to a neighbour (>= 1); see ``split_spans``.
    #: 4 was best of 3 / 4 / 6 on the safety set's dev half (3: short lines raise false rejections).
    min_span_words: PosInt = 4
    #: Longer spans are cut into windows of this many words (>= 1).
    max_span_words: PosInt = 64
    #: Score at most this many characters of a document (>= 1); None = the whole document.
    max_chars: PosInt | None = None

    @model_validator(mode="after")
    def _order(self):
        return check_order(self, ("min_span_words", "max_span_words"))


class SpanScoreStage(Stage):
    """Base of the stages that score every span of a document and reject on the aggregates.

    Subclasses set ``name``, ``column`` (= ``<name>_score``, the maximum), a ``Config`` derived
    from :class:`SpanScoreConfig`, and implement ``score_spans(list[str]) -> float array``.
    Signals (null for documents outside ``languages`` or without text, which are kept):
    ``<name>_score`` (float32, max span score), ``<name>_spans`` (int32), ``<name>_flagged``
    (int32), ``<name>_flagged_frac`` and ``<name>_flagged_char_frac`` (float32). Reasons, first
    that applies: ``<name>:score`` (max > ``threshold``), ``<name>:flagged`` (flagged >
    ``max_flagged``), ``<name>:flagged_frac`` (flagged char fraction > ``max_flagged_char_frac``).
    """

    column: ClassVar[str] = ""
    reads = ("lang",)  # only documents in ``languages`` are scored

    @classmethod
    def span_fields(cls, name: str) -> list[pa.Field]:
        return [pa.field(f"{name}_score", pa.float32()), pa.field(f"{name}_spans", pa.int32()),
                pa.field(f"{name}_flagged", pa.int32()), pa.field(f"{name}_flagged_frac", pa.float32()),
                pa.field(f"{name}_flagged_char_frac", pa.float32())]

    @classmethod
    def span_rules(cls, name: str) -> tuple[Rule, ...]:
        """The rules of the class docstring for the stage called ``name``, on its stored aggregates."""
        return tuple(Rule(f"{name}:{reason}", f"{name}_{column}", ">", field, languages="languages")
                     for reason, column, field in (("score", "score", "threshold"), ("flagged", "flagged", "max_flagged"),
                                                   ("flagged_frac", "flagged_char_frac", "max_flagged_char_frac")))

    def score_spans(self, spans: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def spans_of(self, texts: list[str | None], langs: list[str | None], with_cores: bool = False):
        """(spans, document index per span, characters per span) of the texts that are not None;
        with ``with_cores`` also each span's core sentence or None (:func:`split_units`)."""
        c = self.config
        spans, docs, cores = [], [], []
        for i, (t, lg) in enumerate(zip(texts, langs)):
            if t:
                units = cached_spans(t[: c.max_chars] if c.max_chars else t, lg, c.min_span_words, c.max_span_words)
                spans += [u for u, _ in units]
                cores += [k for _, k in units]
                docs += [i] * len(units)
        chars = np.fromiter((len(x) for x in spans), dtype=np.float64, count=len(spans))
        if with_cores:
            return spans, np.asarray(docs, dtype=np.int64), chars, cores
        return spans, np.asarray(docs, dtype=np.int64), chars

    def unit_scores(self, spans: list[str], cores: list[str | None]) -> np.ndarray:
        """Score per unit: the higher of the unit and its core sentence (NaN -> 0)."""
        with_core = [j for j, k in enumerate(cores) if k is not None]
        scores = self.score_spans(spans + [cores[j] for j in with_core]) if spans else np.zeros(0)
        scores = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=0.0)
        out = scores[: len(spans)].copy()
        if with_core:
            idx = np.asarray(with_core)
            out[idx] = np.maximum(out[idx], scores[len(spans):])
        return out

    def aggregate(self, texts: list[str | None], langs: list[str | None]) -> dict[str, np.ndarray]:
        """The per-document signals (numpy, NaN = null) of ``texts``; see :func:`span_aggregates`."""
        self.ensure_setup()
        spans, docs, chars, cores = self.spans_of(texts, langs, with_cores=True)
        scores = self.unit_scores(spans, cores)
        doc_chars = np.bincount(docs, weights=chars, minlength=len(texts))
        agg = span_aggregates(scores, docs, chars, doc_chars, len(texts), self.config.span_threshold)
        none = np.array([not t for t in texts], dtype=bool)
        for k in agg:
            agg[k] = np.where(none, np.nan, agg[k].astype(np.float64))
        return agg

    def __call__(self, batch: pa.Table) -> pa.Table:
        c = self.config
        texts = texts_in_languages(batch, c.languages)
        langs = batch.column("lang").to_pylist() if "lang" in batch.column_names else [None] * len(texts)
        agg = self.aggregate(texts, langs)
        n = self.name
        cols = {f"{n}_score": agg["max"], f"{n}_spans": agg["spans"], f"{n}_flagged": agg["flagged"],
                f"{n}_flagged_frac": agg["flagged_frac"], f"{n}_flagged_char_frac": agg["flagged_char_frac"]}
        for f in self.fields:
            batch = with_column(batch, f.name, wd.to_arrow(cols[f.name], f.type), f.type)
        reasons = []
        for i in range(len(texts)):
            sig = {k: (None if v[i] != v[i] else float(v[i])) for k, v in cols.items()}
            sig["lang"] = langs[i]
            reasons.append(self.decide(sig, c) if texts[i] else None)
        return merge_reasons(batch, reasons)


class FastTextSpanStage(FastTextModel, SpanScoreStage):
    """A span stage scoring with a fastText model (``model_path``, ``positive_label`` in its Config)."""

    def score_spans(self, spans: list[str]) -> np.ndarray:
        return self._clf.score(spans)
