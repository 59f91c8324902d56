"""C4 cleaning rules (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified
Text-to-Text Transformer", Section 2.2, "Colossal Clean Crawled Corpus").

**What this stage modifies.** The text of a *kept* document is replaced by its cleaned lines joined
with ``\\n``: lines are stripped, blank lines disappear (so paragraph breaks do too, as in C4),
Wikipedia-style citation markers ``[1]``, ``[edit]``, ``[citation needed]`` are removed, and these
lines are dropped:

* lines not ending in terminal punctuation (period, exclamation mark, question mark, end quotation
  mark; plus their CJK/Devanagari/Arabic forms, see ``words.TERMINAL``), and lines ending in an
  ellipsis ``...``/``…`` (the reference code drops those too);
* lines with fewer than 3 words, counted as the reference code does, ``len(line.split())``:
  whitespace tokens, so ``=`` or ``|`` count (``words.count_tokens``; each Han/kana/Thai unit is a
  token for zh/ja/th);
* lines containing "javascript" (any case);
* lines containing "terms of use", "privacy policy", "cookie policy", "uses cookies",
  "use of cookies" or "use cookies" (any case; English phrases, which simply never match elsewhere).

A *rejected* document keeps its original text so ``inspect`` shows what was judged; the columns
``c4_lines`` / ``c4_lines_kept`` say how much cleaning would have removed. The line-level rules
cannot be replayed from columns (only the page-level decisions can, via ``decide``).

**Page-level rejections** (checked in this order):

* ``c4:lorem_ipsum``: "lorem ipsum" (any case) in a line that passed the punctuation and length rules;
* ``c4:curly_bracket``: a ``{`` or ``}`` in such a line that is not a javascript line (the reference
  code drops javascript lines before its brace test; C4 removes pages with curly brackets as
  likely code). Its signal column is ``c4_curly_bracket``; the reason was spelled so too before
  stage version 2, which gave it the ``stage:rule`` form of every other reason;
* ``c4:bad_words``: a word or phrase of the LDNOOBW list for the document's language in the
  cleaned text. C4 used the English list only, so ``bad_words_langs`` defaults to ``["en"]``.
  Space-delimited languages match whole words/phrases; for zh/ja/th (no spaces) entries match as
  substrings, ignoring one-character entries (``乳`` would hit "牛乳", milk);
* ``c4:min_sentences``: fewer than 5 sentences left after cleaning (sentence ends: see ``words``).

Not done here: C4's three-sentence-span deduplication across the corpus (that is dedup's job), and
the reference code's drop of lines holding a "word" over 1,000 characters.

**Against datatrove 0.10.1's ``C4QualityFilter``** (a port of the same reference code;
``benchmarks/bench_rules.py`` measures agreement on the real pages): it has no bad-words rule (its
``C4BadWordsFilter`` does that), tests ``{`` only, takes only ``. ? ! " '`` as line ends, and
counts sentences with spaCy's sentencizer where we use the regex of ``words`` (C4 used NLTK punkt;
all three split "Dr. Pinder" differently without their abbreviation data).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from datapipe.env import shared_data
from datapipe.manifest.path_settings import ReadDir
from datapipe.manifest.ranges import NonNegInt
from datapipe.stage import (
    Rule,
    Stage,
    StageConfig,
    folder_assets,
    merge_reasons,
    register,
    with_column,
)
from datapipe.stages.lib import words as W

_CITATION_RE = r"(?i)[ \t]*\[(?:\d+|edit|citation needed)\]"
_ELLIPSIS_END = r"(?:\.\.\.|…)$"
_POLICY_RE = r"(?i)terms of use|privacy policy|cookie policy|uses cookies|use of cookies|use cookies"


class C4Config(StageConfig):
    """Raffel et al. 2020 defaults. Booleans switch single rules; None switches a threshold off.
    Counts (``min_words_per_line`` words, ``min_sentences``, ``max_bad_words`` hits) are >= 0."""

    remove_citations: bool = True
    filter_no_terminal_punct: bool = True
    min_words_per_line: NonNegInt | None = 3
    filter_javascript: bool = True
    filter_policy: bool = True
    filter_lorem_ipsum: bool = True
    filter_curly_bracket: bool = True
    min_sentences: NonNegInt | None = 5
    filter_bad_words: bool = True
    #: Folder with one LDNOOBW list per language code; None = ``<shared data>/wordlists/ldnoobw``.
    bad_words_dir: ReadDir | None = None
    bad_words_langs: list[str] = ["en"]
    #: Documents with more bad-word hits than this are rejected (C4: any hit).
    max_bad_words: NonNegInt = 0
    #: Replace the text of kept documents by the cleaned lines.
    modify_text: bool = True


FIELDS = [
    pa.field("c4_lines", pa.int64()),
    pa.field("c4_lines_kept", pa.int64()),
    pa.field("c4_sentence_count", pa.int64()),
    pa.field("c4_lorem_ipsum", pa.bool_()),
    pa.field("c4_curly_bracket", pa.bool_()),
    pa.field("c4_bad_word_count", pa.int64()),
]

#: The page-level rules, in order (the line filters change the text and are not replayed).
RULES = (
    Rule("c4:lorem_ipsum", "c4_lorem_ipsum", ">", value=0, switch="filter_lorem_ipsum"),
    Rule("c4:curly_bracket", "c4_curly_bracket", ">", value=0, switch="filter_curly_bracket"),
    Rule("c4:bad_words", "c4_bad_word_count", ">", "max_bad_words", switch="filter_bad_words"),
    Rule("c4:min_sentences", "c4_sentence_count", "<", "min_sentences"),
)


class BadWords:
    """LDNOOBW lists per language as Aho-Corasick automata, built once per worker on first use."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._automata: dict[str, object] = {}

    def has(self, lang: str) -> bool:
        return (self.folder / lang).is_file()

    def automaton(self, lang: str):
        if lang not in self._automata:
            import ahocorasick

            entries = [e.strip().lower() for e in (self.folder / lang).read_text(encoding="utf-8").splitlines()]
            entries = [e for e in entries if e]
            auto = ahocorasick.Automaton()
            if lang in W.UNSEGMENTED:
                keys = [e for e in entries if len(e) > 1]
            else:
                # Same segmentation as the text, padded with spaces: whole words/phrases only.
                keys = [" " + " ".join(ws) + " " for ws in W.split_words(entries).to_pylist() if ws]
            for k in keys:
                auto.add_word(k, k)
            if keys:
                auto.make_automaton()
            self._automata[lang] = auto if keys else None
        return self._automata[lang]

    def count(self, texts: pa.Array, langs: list[str], wanted: list[str]) -> np.ndarray:
        """Hits per text; NaN where the language has no list or is not in ``wanted``."""
        out = np.full(len(texts), np.nan)
        todo = [i for i, lang in enumerate(langs) if lang in wanted and self.has(lang)]
        if not todo:
            return out
        sub = texts.take(pa.array(todo, pa.int64()))
        lower = pc.utf8_lower(sub)
        joined = pc.binary_join(W.split_words(lower), " ").to_pylist()
        raw = lower.to_pylist()
        for j, i in enumerate(todo):
            auto = self.automaton(langs[i])
            if auto is None:
                out[i] = 0
                continue
            hay = raw[j] if langs[i] in W.UNSEGMENTED else " " + joined[j] + " "
            out[i] = sum(1 for _ in auto.iter(hay))
        return out


def clean(texts, config: C4Config, bad_words: BadWords | None = None, langs=None):
    """Run the line rules on a column of texts. Returns (cleaned texts, signals dict)."""
    texts = W._as_array(texts)
    n_rows = len(texts)
    ls = W.split_lines(texts)
    flat, rows = W.flat_values(ls), W.row_index(ls)
    if config.remove_citations:
        flat = pc.utf8_trim_whitespace(pc.replace_substring_regex(flat, _CITATION_RE, ""))
    ok = np.ones(len(flat), dtype=bool)
    if config.filter_no_terminal_punct:
        # c4_utils: `not line.endswith(_END_MARKS) or line.endswith(_ELLIPSIS)`: "..." is no end.
        ok &= W.ends_with_terminal(flat) & ~pc.match_substring_regex(flat, _ELLIPSIS_END).to_numpy(zero_copy_only=False)
    if config.min_words_per_line is not None:
        ok &= W.count_tokens(flat) >= config.min_words_per_line
    # Page-level markers, in c4_utils' order: lorem ipsum in a line that passed punctuation and
    # length; then javascript lines go; then a brace in what is left; then policy lines go.
    lorem = ok & pc.match_substring(flat, "lorem ipsum", ignore_case=True).to_numpy(zero_copy_only=False)
    if config.filter_javascript:
        ok &= ~pc.match_substring(flat, "javascript", ignore_case=True).to_numpy(zero_copy_only=False)
    curly = ok & pc.match_substring_regex(flat, r"[{}]").to_numpy(zero_copy_only=False)
    if config.filter_policy:
        ok &= ~pc.match_substring_regex(flat, _POLICY_RE).to_numpy(zero_copy_only=False)
    kept_per_row = W.per_row_sum(ok, rows, n_rows).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(kept_per_row)]).astype(np.int32)
    cleaned = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), flat.filter(pa.array(ok))), "\n")
    sig = {
        "c4_lines": W.lengths(ls).astype(np.float64),
        "c4_lines_kept": kept_per_row.astype(np.float64),
        "c4_sentence_count": W.count_sentences(cleaned).astype(np.float64),
        "c4_lorem_ipsum": (W.per_row_sum(lorem, rows, n_rows) > 0).astype(np.float64),
        "c4_curly_bracket": (W.per_row_sum(curly, rows, n_rows) > 0).astype(np.float64),
        "c4_bad_word_count": np.full(n_rows, np.nan),
    }
    if config.filter_bad_words and bad_words is not None and langs is not None:
        sig["c4_bad_word_count"] = bad_words.count(cleaned, langs, [W.base_lang(x) for x in config.bad_words_langs])
    return cleaned, sig


@register
class C4(Stage):
    """C4 line cleaning and page filters (Raffel et al. 2020); see the module docstring for the rules,
    thresholds (terminal punctuation, >= 3 words a line, >= 5 sentences, LDNOOBW) and reasons."""

    name = "c4"
    version = 2  # 2: the curly-bracket reason is c4:curly_bracket (was c4_curly_bracket)
    edits = ("text",)  # line filters drop lines
    reads = ("lang",)  # the bad-words rule and sentence ends are per language
    Config = C4Config
    fields = FIELDS
    rules = RULES

    def _bad_words_dir(self) -> Path:
        return Path(self.config.bad_words_dir) if self.config.bad_words_dir else shared_data() / "wordlists" / "ldnoobw"

    def assets(self) -> list:
        return folder_assets(self._bad_words_dir()) if self.config.filter_bad_words else []

    def setup(self) -> None:
        W.prepare()
        self.bad_words = None
        if self.config.filter_bad_words:
            folder = self._bad_words_dir()
            if not folder.is_dir():
                raise FileNotFoundError(f"c4: bad-word list folder {folder} not found (set bad_words_dir)")
            self.bad_words = BadWords(folder)

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.ensure_setup()
        langs = [W.base_lang(x) for x in batch.column("lang").to_pylist()]
        cleaned, sig = clean(batch.column("text"), self.config, self.bad_words, langs)
        for f in self.fields:
            batch = with_column(batch, f.name, W.to_arrow(sig[f.name], f.type), f.type)
        reasons = W.reasons_for_batch(RULES, sig, self.config, batch.num_rows)
        batch = merge_reasons(batch, reasons)
        if self.config.modify_text:
            final = batch.column("reject_reason").combine_chunks()
            keep = pc.is_null(final)
            original = W._as_array(batch.column("text"))
            batch = with_column(batch, "text", pc.if_else(keep, cleaned, original), pa.string())
        return batch
