"""Language identification with fastText lid.176 (stage ``langid``).

Adds ``lang`` (ISO 639-1/3 code as lid.176 labels it, or ``unknown`` for text without letters)
and ``lang_score`` (float32 probability of the top label, in (0, 1]). Newlines are replaced by
spaces before predict: fastText treats a newline as the end of the input and would score only
the first line (case B16). Keep rule: ``languages`` (None = any) and ``min_score``, optionally
per language (``min_score_by_lang``); defaults follow FineWeb/DCLM (score >= 0.65).
Rejections: ``langid:language`` (not in the list), ``langid:low_score``, ``langid:unknown``.
"""
from __future__ import annotations

import re

import pyarrow as pa

from datapipe.manifest.path_settings import ModelFile
from datapipe.manifest.ranges import PosInt, Probability
from datapipe.models import resolve_model
from datapipe.stage import REJECT, Rule, Stage, StageConfig, register, with_column

_NEWLINES = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
_MODELS: dict[tuple, object] = {}


class LangIdConfig(StageConfig):
    """``min_score`` and ``min_score_by_lang`` values are probabilities in [0, 1]; ``max_chars`` >= 1."""

    model: ModelFile = "lid.176.ftz"            # file name in $DATAPIPE_MODELS / models/, or a path
    languages: list[str] | None = None    # keep only these (None = keep any language)
    min_score: Probability = 0.65         # FineWeb / DCLM threshold
    min_score_by_lang: dict[str, Probability] = {}
    max_chars: PosInt = 100_000           # predict on a prefix: the score is stable long before this


def load_fasttext(path) -> object:
    """Load a fastText model once per process (cached by path and the file's identity on disk:
    a model replaced in place is loaded again)."""
    import os

    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if key not in _MODELS:
        import fasttext

        fasttext.FastText.eprint = lambda *a, **k: None  # silence the load-time warning
        _MODELS[key] = fasttext.load_model(str(path))
    return _MODELS[key]


def predict_languages(model, texts: list[str], max_chars: int = 100_000) -> list[tuple[str, float]]:
    """``(lang, score)`` per text; empty/letterless text gets ``("unknown", 0.0)`` without predict."""
    out: list[tuple[str, float] | None] = [None] * len(texts)
    idx, inputs = [], []
    for i, t in enumerate(texts):
        t = _NEWLINES.sub(" ", (t or "")[:max_chars]).strip()
        if not t or not any(ch.isalpha() for ch in t):
            out[i] = ("unknown", 0.0)
        else:
            idx.append(i)
            inputs.append(t)
    if inputs:
        labels, probs = model.predict(inputs, k=1)
        for i, lab, pr in zip(idx, labels, probs):
            score = float(min(max(pr[0], 0.0), 1.0)) if len(pr) else 0.0
            out[i] = (lab[0].replace("__label__", "") if lab else "unknown", score)
    return out  # type: ignore[return-value]


@register
class LangId(Stage):
    name = "langid"
    Config = LangIdConfig
    fields = []  # lang / lang_score are base document fields
    edits = ("lang", "lang_score")

    def setup(self) -> None:
        self._model = load_fasttext(resolve_model(self.config.model))

    #: Tried in order: no language found, a language not asked for, a score below the language's
    #: own minimum (``min_score_by_lang``) or else ``min_score``.
    rules = (
        Rule("langid:unknown", "lang", "==", value="unknown"),
        Rule("langid:language", "lang", "not in", "languages"),
        Rule("langid:low_score", "lang_score", "<", "min_score", by_lang="min_score_by_lang"),
    )

    def assets(self) -> list:
        return [resolve_model(self.config.model)]

    def decide_one(self, lang: str, score: float) -> str | None:
        return self.decide({"lang": lang, "lang_score": score}, self.config)

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.ensure_setup()
        res = predict_languages(self._model, batch.column("text").to_pylist(), self.config.max_chars)
        batch = with_column(batch, "lang", [r[0] for r in res], pa.string())
        batch = with_column(batch, "lang_score", [r[1] for r in res], pa.float32())
        return with_column(batch, REJECT, [self.decide_one(*r) for r in res], pa.string())
