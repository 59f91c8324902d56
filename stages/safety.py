"""Safety stages: URL block list, LDNOOBW word-list score, fastText toxicity / NSFW classifiers.

* ``url_blocklist``: FineWeb's URL filter (DataTrove ``URLFilter``, Penedo et al. 2024): the UT1
  adult list (domains and URLs) plus banned words, >= 2 soft-banned words, and banned sub-words
  (Aho-Corasick) in the URL.
* ``ldnoobw``: count and fraction of LDNOOBW entries per document language (the C4 bad-words list,
  Raffel et al. 2020; RedPajama-v2's ``rps_doc_ldnoobw_words`` signal).
* ``toxicity`` / ``nsfw`` (fastText) and ``profanity`` (``stages/profanity.py``): span-level.
  The whole text is cut into sentences (:func:`split_spans`), every sentence is scored, and the
  document gets aggregates: the maximum (``<stage>_score``), the number of spans, the number and
  fraction of flagged spans and the fraction of characters in them, as Dolma's Jigsaw taggers
  score sentences (Soldaini et al. 2024: ``jigsaw_hatespeech_sentence_v2``,
  ``jigsaw_nsfw_sencence_v2``; OLMo's mixes dropped sentences above 0.4 with those models). One
  toxic sentence in a long page therefore raises the page's score as much as it would alone.
  Our thresholds are our models' own, chosen on the dev half of the safety set
  (``benchmarks/bench_safety.py --sweep``) and stated in each stage's docstring. ``toxicity`` uses
  ``classifiers/models/toxicity_weak_en.ftz``, ``nsfw`` ``nsfw_ut1_en.ftz`` (their MODEL_CARD.md
  say what they are and what they are not).
"""
from __future__ import annotations

from typing import ClassVar

import pyarrow as pa

from datapipe.manifest.path_settings import ModelFile
from datapipe.manifest.ranges import Probability
from datapipe.stage import register
from datapipe.stages.span_score import (
    FastTextSpanStage,
    SpanScoreConfig,
    SpanScoreStage,
)

# The safety family's public names stay importable from here (they moved to the modules above).


@register
class Toxicity(FastTextSpanStage):
    """Span-level toxicity from a fastText model (signals and reasons: :class:`SpanScoreStage`).

    Default model ``classifiers/models/toxicity_weak_en.ftz``: weak labels from the insult,
    profanity and slur entries of the English LDNOOBW list, obfuscation-aware (read its
    MODEL_CARD.md). Dolma's ``jigsaw_fasttext_bigrams_hatespeech_final.bin`` works with
    ``positive_label: toxic``. ``threshold`` defaults to None (signals only): on the development
    half of the safety set no threshold of this model keeps false rejections of clean and benign
    pages <= 2% (0.995: 2.3%, recall on inserted toxic sentences 0.77; ``benchmarks/bench_safety.py
    --sweep``), its character n-grams firing on words that share letters with listed ones
    ("whole", "towel", "Scunthorpe"); ``profanity`` does the rejecting. ``span_threshold`` 0.5 is
    the model's argmax.
    """

    name = "toxicity"
    column = "toxicity_score"
    fields: ClassVar[list[pa.Field]] = SpanScoreStage.span_fields("toxicity")
    rules = SpanScoreStage.span_rules("toxicity")

    class Config(SpanScoreConfig):
        model_path: ModelFile = "toxicity_weak_en.ftz"
        positive_label: str = "toxic"
        threshold: Probability | None = None


@register
class NSFW(FastTextSpanStage):
    """Span-level sexual-content score from a fastText model (signals and reasons: :class:`SpanScoreStage`).

    Default model ``classifiers/models/nsfw_ut1_en.ftz``: titles of the URLs on the UT1 adult list
    against sentences of ordinary pages, clinical and identity words neutralised (read its
    MODEL_CARD.md). Dolma's ``jigsaw_fasttext_bigrams_nsfw_final.bin`` works with ``positive_label:
    nsfw``. ``threshold`` 0.99: with ``profanity``'s defaults the highest recall on the development
    half of the safety set that keeps false rejections of its clean and benign pages <= 1% (half
    the 2% target: the test half ran above dev before; ``benchmarks/bench_safety.py --sweep``;
    test-half figures in the README).
    """

    name = "nsfw"
    column = "nsfw_score"
    fields: ClassVar[list[pa.Field]] = SpanScoreStage.span_fields("nsfw")
    rules = SpanScoreStage.span_rules("nsfw")
    how_to_get: ClassVar[str] = "Train one with `datapipe classifiers train nsfw` and set nsfw.model_path."

    class Config(SpanScoreConfig):
        model_path: ModelFile | None = "nsfw_ut1_en.ftz"
        positive_label: str = "nsfw"
        threshold: Probability | None = 0.99
