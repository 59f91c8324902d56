"""FineWeb quality rules (Penedo et al. 2024, "The FineWeb Datasets: Decanting the Web for the Finest
Text Data at Scale", Section 3.4 "custom filters"), with the thresholds FineWeb was built with
(datatrove's ``FineWebQualityFilter`` defaults, as used by its ``examples/fineweb.py``).

Lines are non-blank stripped lines (``words.split_lines``). Reject, in this order, with reason
``fineweb:<rule>``:

* ``empty``: no non-blank line;
* ``line_punct_ratio``: fraction of lines ending in terminal punctuation (``words.TERMINAL``:
  ``. ! ? " ' ” ’ » …`` and CJK/Devanagari/Arabic full stops) is *below* 0.12;
* ``short_line_ratio``: fraction of lines of at most 30 characters is *above* 0.67. Skipped for
  zh/ja/th and other unsegmented languages: a 30-character Chinese line is a full sentence, so
  the character threshold has no sensible form there (signal null);
* ``char_dup_ratio``: characters in lines that repeat an earlier line of the document / characters
  in all lines is *above* 0.01. (The paper's text quotes 0.1; FineWeb's code ran with 0.01.)
* ``list_ratio``: line breaks in the text / words is *above* 0.3 ("list-like" documents). Line
  breaks are counted in the raw text (blank lines included), as FineWeb does; words are the units
  of ``words`` (characters for zh/ja/th, which makes the ratio lenient there).

The stage never changes the text. ``decide`` recomputes a verdict from the stored columns.

**Against datatrove 0.10.1's ``FineWebQualityFilter``** (deliberate; agreement measured by
``benchmarks/bench_rules.py`` on the English real pages): its lines are not stripped, so
"...sale.\xa0" does not end in punctuation there and "    Photo: AP" is not a duplicate of
"Photo: AP"; its duplicate-character ratio divides by ``len(text)`` without ``\n`` (spaces included);
its terminal marks (``TERMINAL_PUNCTUATION``) leave out closing quotes and ``…``, so a line ending
``...he said."`` is unpunctuated there; its list ratio divides by spaCy tokens (punctuation
included). Every disagreement measured on the real pages traces to stripping or the quotes.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from datapipe.manifest.ranges import NonNegFloat, PosInt, Probability
from datapipe.stage import Rule, StageConfig, register
from datapipe.stages.lib import words as W
from datapipe.stages.lib.rule_stage import WordRuleStage


class FineWebConfig(StageConfig):
    """Thresholds of FineWeb's quality filter. None switches a rule off. The line and character
    fractions are in [0, 1]; ``short_line_length`` >= 1 (characters); ``new_line_ratio`` >= 0
    (line breaks per word, can exceed 1)."""

    line_punct_thr: Probability | None = 0.12
    #: Keep documents with *no* punctuated line (FineWeb: False, i.e. they are rejected).
    line_punct_exclude_zero: bool = False
    short_line_thr: Probability | None = 0.67
    short_line_length: PosInt = 30
    char_duplicates_ratio: Probability | None = 0.01
    new_line_ratio: NonNegFloat | None = 0.3


FIELDS = [
    pa.field("fineweb_lines", pa.int64()),
    pa.field("fineweb_line_punct_ratio", pa.float64()),
    pa.field("fineweb_short_line_ratio", pa.float64()),
    pa.field("fineweb_dup_line_char_frac", pa.float64()),
    pa.field("fineweb_newline_word_ratio", pa.float64()),
]

RULES = (
    Rule("fineweb:empty", "fineweb_lines", "==", value=0),
    Rule("fineweb:line_punct_ratio", "fineweb_line_punct_ratio", "<", "line_punct_thr",
         zero_passes="line_punct_exclude_zero"),
    Rule("fineweb:short_line_ratio", "fineweb_short_line_ratio", ">", "short_line_thr"),
    Rule("fineweb:char_dup_ratio", "fineweb_dup_line_char_frac", ">", "char_duplicates_ratio"),
    Rule("fineweb:list_ratio", "fineweb_newline_word_ratio", ">", "new_line_ratio"),
)


def signals(texts, langs, config: FineWebConfig) -> dict[str, np.ndarray]:
    """FineWeb signals per text (NaN = rule not applicable, or no lines to measure)."""
    texts = W._as_array(texts)
    n_rows = len(texts)
    langs = [W.base_lang(x) for x in langs]
    unseg = np.array([x in W.UNSEGMENTED for x in langs], dtype=bool)
    ls = W.split_lines(texts)
    flat, rows, n_lines = W.flat_values(ls), W.row_index(ls), W.lengths(ls)
    empty = n_lines == 0
    denom = np.maximum(n_lines, 1)
    punct = W.per_row_sum(W.ends_with_terminal(flat), rows, n_rows) / denom
    lens = W.char_lengths(flat)
    short = W.per_row_sum(lens <= config.short_line_length, rows, n_rows) / denom
    dup = W.duplicate_mask(W.string_ids(flat), rows)
    total = W.per_row_sum(lens, rows, n_rows)
    dup_frac = W.per_row_sum(lens * dup, rows, n_rows) / np.maximum(total, 1)
    breaks = pc.count_substring(W.normalize_breaks(texts), "\n").to_numpy(zero_copy_only=False)
    n_words = W.lengths(W.split_words(texts))
    newline_ratio = np.where(n_words > 0, breaks / np.maximum(n_words, 1), np.where(breaks > 0, np.inf, 0.0))
    return {
        "fineweb_lines": n_lines.astype(np.float64),
        "fineweb_line_punct_ratio": W.nan_where(punct, empty),
        "fineweb_short_line_ratio": W.nan_where(short, empty | unseg),
        "fineweb_dup_line_char_frac": W.nan_where(dup_frac, empty),
        "fineweb_newline_word_ratio": W.nan_where(newline_ratio, empty),
    }


@register
class FineWeb(WordRuleStage):
    """FineWeb quality filter (Penedo et al. 2024); rules, thresholds and reasons in the module docstring."""

    name = "fineweb"
    reads = ("lang",)  # words and stop words per language
    Config = FineWebConfig
    fields = FIELDS
    rules = RULES

    def signals(self, batch: pa.Table) -> dict:
        return signals(batch.column("text"), batch.column("lang").to_pylist(), self.config)
