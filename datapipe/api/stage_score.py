"""Uniform names over the stages' own columns, for one-off use from Python (the stored columns
keep their names: lineage and the document schema depend on them).

``datapipe.stages.get(name).apply(texts)`` adds three columns to what the stage writes:

* ``label`` (string): the stage's answer in the model's words: ``lang`` for ``langid``, ``topic``
  for ``topic``; for a classifier of one positive label (``quality_classifier``, ``nsfw``,
  ``toxicity``, ``profanity``...) the positive label when its score is >= 0.5, else the model's
  other label (``cc`` for the quality model) or ``not_<positive>``; null when not scored, and
  null for rule stages without a single score;
* ``score`` (float64): the stage's main number (``lang_score``, ``topic_score``, the classifier's
  ``<name>_score``), null when not scored;
* ``skipped`` (string): why the stage did not look at the text, e.g. ``lang zh not in
  nsfw.languages [en]``; null when it did. Such texts are kept, and ``apply`` warns
  (``SkippedTextWarning``) naming how many and why.

``stage.score(text)`` runs one text and returns a ``Score`` (``label, score = stage.score(text)``).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import pyarrow as pa


class SkippedTextWarning(UserWarning):
    """A stage skipped texts: their language is not one it was built for (they are kept unscored)."""


def score_columns(stage) -> tuple[str | None, str | None]:
    """``(label column, score column)`` of the stage's own output; None where it has none."""
    if stage.name == "langid":
        return "lang", "lang_score"
    if stage.name == "topic":
        return "topic", "topic_score"
    return None, getattr(stage, "column", None)


def _languages(stage) -> list[str]:
    """The languages a scoring stage is restricted to ([] = all). langid's ``languages`` is a keep
    rule, not a restriction of what it looks at."""
    if stage.name == "langid":
        return []
    return list(getattr(stage.config, "languages", None) or [])


def _binary_label(stage, score: float | None) -> str | None:
    if score is None:
        return None
    pos = getattr(stage.config, "positive_label", None) or stage.name
    if score >= 0.5:
        return pos
    labels = list(getattr(getattr(stage, "_clf", None), "labels", None) or [])
    others = [x for x in labels if x != pos]
    return others[0] if len(others) == 1 else f"not_{pos}"


def add_aliases(stage, out: pa.Table) -> pa.Table:
    """``out`` (``apply_stage``'s table) with ``label``, ``score`` and ``skipped`` appended; warns
    once with ``SkippedTextWarning`` when texts were skipped for their language."""
    n = out.num_rows
    want = _languages(stage)
    langs = out.column("lang").to_pylist() if want and "lang" in out.column_names else [None] * n
    texts = out.column("text").to_pylist() if "text" in out.column_names else [None] * n
    skipped = [f"lang {lg} not in {stage.name}.languages [{', '.join(want)}]"
               if want and t is not None and lg is not None and lg not in want else None
               for lg, t in zip(langs, texts)]
    label_col, score_col = score_columns(stage)
    scores = out.column(score_col).to_pylist() if score_col in out.column_names else [None] * n
    scores = [None if s is None else float(s) for s in scores]
    if label_col is not None:
        labels = out.column(label_col).to_pylist()
    elif score_col is not None:
        labels = [_binary_label(stage, s) for s in scores]
    else:
        labels = [None] * n
    out = out.append_column("label", pa.array(labels, pa.string()))
    out = out.append_column("score", pa.array(scores, pa.float64()))
    out = out.append_column("skipped", pa.array(skipped, pa.string()))
    k = sum(s is not None for s in skipped)
    if k:
        found = sorted({lg for lg, s in zip(langs, skipped) if s is not None})
        warnings.warn(f"{stage.name}: {k} of {n} text(s) not scored: language {', '.join(found)} is not in "
                      f"{stage.name}.languages {want} (column 'skipped'); pass lang=[...] if the label is wrong, "
                      f"or set languages", SkippedTextWarning, stacklevel=3)
    return out


@dataclass
class Score:
    """One text through one stage. ``label``/``score``: see the module docstring; ``kept``;
    ``reason``: the reject (or error) reason, None when kept; ``skipped``: why it was not looked
    at, None when it was; ``signals``: every column the stage wrote. Unpacks as ``label, score``."""

    label: str | None
    score: float | None
    kept: bool
    reason: str | None
    skipped: str | None
    signals: dict = field(default_factory=dict)

    def __iter__(self):
        return iter((self.label, self.score))


def score_one(stage, text, **columns) -> Score:
    """``stage`` on the one ``text`` (str; for ``extract`` the page, str or bytes), through
    ``apply`` (``columns``: ``lang=``, ``url=``, ...). Raises TypeError for a list (use ``apply``)."""
    if not isinstance(text, (str, bytes)):
        raise TypeError(f"score takes one text (str), got {type(text).__name__}; apply takes many")
    row = stage.apply([text], **columns).to_pylist()[0]
    reason = row.get("reject_reason") or row.get("error_reason")
    signals = {k: v for k, v in row.items() if k not in ("id", "text", "label", "score", "skipped")}
    return Score(row["label"], row["score"], bool(row["kept"]), reason, row["skipped"], signals)
