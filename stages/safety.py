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

from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import regex
from pydantic import model_validator

from datapipe.env import shared_data
from datapipe.ranges import NonNegInt, PosInt, Probability, check_order
from datapipe.stage import (Stage, StageConfig, folder_assets, merge_reasons, register, texts_in_languages,
                            with_column)
from datapipe.stages.lib import wordlists as wl
from datapipe.stages.lib import words as wd


def classifier_assets(model_path: str | None) -> list:
    """A fastText classifier's files for ``Stage.assets``: the model and its ``.json`` sidecar if any."""
    from datapipe.classifiers.model import resolve_model_path

    if not model_path:
        raise ValueError("no model_path set")
    p = resolve_model_path(model_path)
    return [p] + ([p.with_suffix(".json")] if p.with_suffix(".json").is_file() else [])


def shared_path(p: str) -> Path:
    """A manifest path: absolute, relative to the working directory if it exists, else under ``shared_data()``."""
    path = Path(p)
    if path.is_absolute() or path.exists():
        return path
    return shared_data() / path


# ---------------------------------------------------------------------------------------------
# URL block list


def url_decision(url: str | None, host: str | None, ut1_hashes: np.ndarray, ut1_urls: frozenset[str],
                 banned: frozenset[str], soft: frozenset[str], subwords, soft_threshold: int = 2,
                 allow: frozenset[str] = frozenset()) -> tuple[str | None, str | None]:
    """(reason, matched entry) for one URL; ``(None, None)`` = keep.

    Order and rules as DataTrove's ``URLFilter`` (FineWeb): allow-listed domain -> keep; UT1
    domain of the host or any parent domain -> ``adult`` (entry ``domain``); UT1 URL (scheme and
    trailing ``/`` dropped) -> ``adult_url``; a banned word as a URL token -> ``banned_word``;
    ``soft_threshold`` or more distinct soft-banned tokens -> ``soft_banned_words``; a banned
    sub-word in the normalised URL -> ``banned_subword``.
    """
    if not url:
        return None, None
    if not host:
        host = url.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0]
    parents = wl.parent_domains(host)
    if allow and any(d in allow for d in parents):
        return None, None
    hits = wl.in_sorted(ut1_hashes, [wl.domain_hash(d) for d in parents])
    if hits.any():
        return "adult", parents[int(np.argmax(hits))]
    bare = url.split("://", 1)[-1].lower().rstrip("/")
    if bare in ut1_urls or (bare.startswith("www.") and bare[4:] in ut1_urls):
        return "adult_url", bare
    words = wl.url_words(url)
    hard = words & banned
    if hard:
        return "banned_word", min(hard)
    soft_hits = words & soft
    if len(soft_hits) >= soft_threshold:
        return "soft_banned_words", ",".join(sorted(soft_hits))
    if subwords is not None:
        for _, sub in subwords.iter(wl.normalize_url_text(url)):
            return "banned_subword", sub
    return None, None


@register
class URLBlocklist(Stage):
    """Reject documents whose URL is on the UT1 adult list or carries banned words.

    Input: ``url`` and ``host`` (strings). Adds ``url_blocklist_match`` (string: ``kind:entry``,
    e.g. ``adult:example.com``, null = no match). Reasons: ``url_blocklist:adult``,
    ``url_blocklist:adult_url``, ``url_blocklist:banned_word``, ``url_blocklist:soft_banned_words``,
    ``url_blocklist:banned_subword``. ``setup`` raises FileNotFoundError naming a missing list.
    """

    name = "url_blocklist"
    reads = ("url", "host")
    requires = ("url",)  # it decides from the URL alone

    class Config(StageConfig):
        ut1_path: str = "blocklists/ut1_adult_url_filterblacklistsv0_3_0.tar.gz"
        words_dir: str = "wordlists/datatrove_url_filter"
        #: DataTrove's default: two soft-banned words ban a URL (>= 1).
        soft_word_threshold: PosInt = 2
        use_ut1: bool = True
        use_words: bool = True
        allow_domains: list[str] = []

    fields: ClassVar[list[pa.Field]] = [pa.field("url_blocklist_match", pa.string())]

    def assets(self) -> list:
        c = self.config
        return (([shared_path(c.ut1_path)] if c.use_ut1 else [])
                + (folder_assets(shared_path(c.words_dir)) if c.use_words else []))

    def setup(self) -> None:
        c = self.config
        self._ut1 = wl.load_ut1(str(shared_path(c.ut1_path))) if c.use_ut1 else (np.zeros(0, np.uint64), frozenset())
        self._words = wl.load_url_words(str(shared_path(c.words_dir))) if c.use_words else (frozenset(), frozenset(), None)
        self._allow = frozenset(d.lower() for d in c.allow_domains)

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.ensure_setup()
        urls = batch.column("url").to_pylist()
        hosts = batch.column("host").to_pylist() if "host" in batch.column_names else [None] * len(urls)
        banned, soft, subs = self._words
        reasons, matches = [], []
        for url, host in zip(urls, hosts):
            kind, entry = url_decision(url, host, *self._ut1, banned, soft, subs,
                                       self.config.soft_word_threshold, self._allow)
            reasons.append(f"url_blocklist:{kind}" if kind else None)
            matches.append(f"{kind}:{entry}" if kind else None)
        batch = with_column(batch, "url_blocklist_match", matches, pa.string())
        return merge_reasons(batch, reasons)


# ---------------------------------------------------------------------------------------------
# LDNOOBW word-list score


def ldnoobw_decision(count: int | None, fraction: float | None, max_count: int | None,
                     max_fraction: float | None) -> str | None:
    """Reason (``count`` or ``fraction``) when a stored count/fraction exceeds its threshold, else None.

    ``max_count=0`` is C4's rule (drop a page containing any listed word). None thresholds never reject.
    """
    if count is None:
        return None
    if max_count is not None and count > max_count:
        return "count"
    if max_fraction is not None and fraction is not None and fraction > max_fraction:
        return "fraction"
    return None


@register
class LDNOOBW(Stage):
    """Count LDNOOBW ("dirty, naughty, obscene, otherwise bad") words in the document's language.

    Input: ``text``, ``lang`` (lid.176 code). Adds ``ldnoobw_count`` (int32) and
    ``ldnoobw_fraction`` (float32: count / whitespace words, or / non-space characters for
    unspaced scripts, see ``wordlists.UNSPACED_LANGS``); both null when the language has no list
    (28 lists: ar cs da de en eo es fa fi fil fr hi hu it ja kab ko nl no pl pt ru sv th tlh tr zh).
    Reasons ``ldnoobw:count`` / ``ldnoobw:fraction``; by default nothing is rejected.
    """

    name = "ldnoobw"
    reads = ("lang",)  # one word list per language

    class Config(StageConfig):
        words_dir: str = "wordlists/ldnoobw"
        #: Reject when the count exceeds this (>= 0; 0 = C4's "any listed word"); None = never.
        max_count: NonNegInt | None = None
        #: Reject when the fraction (in [0, 1]) exceeds this; None = never (no published default).
        max_fraction: Probability | None = None

    fields: ClassVar[list[pa.Field]] = [
        pa.field("ldnoobw_count", pa.int32()),
        pa.field("ldnoobw_fraction", pa.float32()),
    ]

    def assets(self) -> list:
        return folder_assets(shared_path(self.config.words_dir))

    def setup(self) -> None:
        d = shared_path(self.config.words_dir)
        wl.require_file(d / "en", "Get the LDNOOBW lists (github.com/LDNOOBW/List-of-Dirty-Naughty-Obscene-and-"
                        "Otherwise-Bad-Words) and set ldnoobw.words_dir.")
        self._dir = str(d)

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.ensure_setup()
        cfg = self.config
        counts, fracs, reasons = [], [], []
        for text, lang in zip(batch.column("text").to_pylist(), batch.column("lang").to_pylist()):
            auto = wl.ldnoobw_automaton(self._dir, lang) if (lang and text is not None) else None
            if auto is None:
                counts.append(None)
                fracs.append(None)
                reasons.append(None)
                continue
            n = wl.count_listed_words(text, auto, lang)
            words = wl.word_count(text, lang)
            frac = n / words if words else 0.0
            counts.append(n)
            fracs.append(frac)
            r = ldnoobw_decision(n, frac, cfg.max_count, cfg.max_fraction)
            reasons.append(f"ldnoobw:{r}" if r else None)
        batch = with_column(batch, "ldnoobw_count", counts, pa.int32())
        batch = with_column(batch, "ldnoobw_fraction", fracs, pa.float32())
        return merge_reasons(batch, reasons)


# ---------------------------------------------------------------------------------------------
# fastText classifiers on the whole text (quality_classifier builds on this)


def score_decision(score: float | None, threshold: float | None, reject_above: bool = True) -> bool:
    """True = reject: ``score > threshold`` (``reject_above``) or ``score < threshold``; null score keeps."""
    if score is None or threshold is None or score != score:  # NaN check
        return False
    return score > threshold if reject_above else score < threshold


class FastTextScoreStage(Stage):
    """Base of stages that write one fastText probability of the whole text and may reject on it.

    Subclasses set ``name``, ``column`` (float32 field), ``reject_above`` and a ``Config`` with
    ``model_path``, ``positive_label``, ``threshold``, ``languages`` (empty = all). Documents in
    other languages get a null score and are kept.
    """

    column: ClassVar[str] = ""
    reject_above: ClassVar[bool] = True
    reads = ("lang",)  # only documents in ``languages`` are scored

    def setup(self) -> None:
        from datapipe.classifiers.model import load_classifier

        c = self.config
        if not c.model_path:
            raise FileNotFoundError(f"{self.name}: no model_path set. {self.how_to_get}")
        self._clf = load_classifier(c.model_path, c.positive_label or None)

    def assets(self) -> list:
        return classifier_assets(self.config.model_path)

    how_to_get: ClassVar[str] = "Train one with `datapipe classifiers train`."

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.ensure_setup()
        c = self.config
        texts = texts_in_languages(batch, c.languages)
        scores = self._clf.score(texts)
        vals = [None if s != s else float(s) for s in scores.tolist()]
        reasons = [f"{self.name}:score" if score_decision(v, c.threshold, self.reject_above) else None for v in vals]
        batch = with_column(batch, self.column, vals, pa.float32())
        return merge_reasons(batch, reasons)


# ---------------------------------------------------------------------------------------------
# Span-level scoring (toxicity, nsfw; profanity in stages/profanity.py)

# Sentence ends as in words.py (the rule stages' segmentation), applied line by line.
_SENT_END = regex.compile(wd._SENT_END)
# A title before a name ("Dr. Smith") ends no sentence: the same list as words.py.
_TITLE_END = regex.compile(wd._TITLE_ABBREV.removesuffix(r"\s+\S") + r"\s*$")
_BREAKS = regex.compile(r"\r\n|[\n\r\x0b\x0c\x85\u2028\u2029]")


def _units(piece: str, unsegmented: bool) -> int:
    # Word units: whitespace words, or non-space characters in unspaced scripts (words.py's rule).
    return sum(1 for ch in piece if not ch.isspace()) // 2 if unsegmented else len(piece.split())


def split_spans(text: str, lang: str | None = None, min_words: int = 4, max_words: int = 64) -> list[str]:
    """The scoring units of one text (see :func:`split_units`, which also gives each unit's sentence)."""
    return [u for u, _ in split_units(text, lang, min_words, max_words)]


def split_units(text: str, lang: str | None = None, min_words: int = 4,
                max_words: int = 64) -> list[tuple[str, str | None]]:
    """The scoring units of one text: sentences, at most ``max_words`` words, at least ``min_words``,
    each as ``(unit, core)``: ``core`` is the one piece of at least ``min_words`` words in a unit
    that short pieces were joined to (None when the unit is a single piece). The stages score a
    unit as the higher of the unit and its core, so a joined "VIDEO 3:45" cannot hide a sentence.

    Lines are split at sentence ends (``words.py``: ``. ! ? …`` and their Devanagari, Arabic and
    Ethiopic forms before a space or the line end, ``。！？`` anywhere; not after a title such as
    ``Dr.``). A piece shorter than ``min_words`` is joined to the one before it (the first to the
    one after it) while the result stays within ``max_words``: a 2-word menu line or "Kids love
    it!" has too few features to be scored alone, and the models' false positives concentrate
    there. A piece longer than ``max_words`` is cut into ``max_words`` windows, so that an
    unpunctuated 2,000-word blob cannot dilute one slur. In
    unspaced languages (``words.UNSEGMENTED``: zh, ja, th...) two characters count as one word.
    """
    unseg = wd.is_unsegmented(lang)
    pieces: list[str] = []
    for line in _BREAKS.split(text):
        line = line.strip()
        start = 0
        for m in _SENT_END.finditer(line):
            if _TITLE_END.search(line, start, m.end()):
                continue
            if line[start:m.end()].strip():
                pieces.append(line[start:m.end()].strip())
            start = m.end()
        if line[start:].strip():
            pieces.append(line[start:].strip())
    merged: list[str] = []
    sizes: list[int] = []
    cores: list[str | None] = []  # the piece of >= min_words in a joined unit (at most one)
    parts: list[int] = []
    for piece in pieces:
        n = _units(piece, unseg)
        # Join only while the result fits one window: a window cut must never split a sentence
        # that was joined to a run of short menu lines.
        if merged and (n < min_words or sizes[-1] < min_words) and sizes[-1] + n <= max_words:
            merged[-1] += " " + piece
            sizes[-1] += n
            parts[-1] += 1
            if n >= min_words:
                cores[-1] = piece
        else:
            merged.append(piece)
            sizes.append(n)
            parts.append(1)
            cores.append(piece if n >= min_words else None)
    out: list[tuple[str, str | None]] = []
    for piece, core, k in zip(merged, cores, parts):
        if unseg:
            lim = 2 * max_words
            out += [(piece[i:i + lim], None) for i in range(0, len(piece), lim)]
        else:
            w = piece.split()
            if len(w) <= max_words:
                out.append((piece, core if k > 1 else None))
            else:
                out += [(" ".join(w[i:i + max_words]), None) for i in range(0, len(w), max_words)]
    return out


_SPAN_CACHE: dict[tuple, list[tuple[str, str | None]]] = {}
_SPAN_CACHE_SIZE = 1024


def _cached_spans(text: str, lang: str | None, min_words: int, max_words: int) -> list[tuple[str, str | None]]:
    # The three span stages run one after the other on the same batch: segment each text once.
    key = (text, lang, min_words, max_words)
    hit = _SPAN_CACHE.get(key)
    if hit is None:
        if len(_SPAN_CACHE) >= _SPAN_CACHE_SIZE:
            _SPAN_CACHE.clear()
        hit = _SPAN_CACHE[key] = split_units(text, lang, min_words, max_words)
    return hit


def span_aggregates(span_scores: np.ndarray, span_docs: np.ndarray, span_chars: np.ndarray,
                    doc_chars: np.ndarray, n_docs: int, span_threshold: float) -> dict[str, np.ndarray]:
    """Per-document aggregates of span scores (NaN / 0 for a document without spans).

    ``max``: highest span score; ``spans``: spans scored; ``flagged``: spans scoring above
    ``span_threshold``; ``flagged_frac``: flagged / spans; ``flagged_char_frac``: characters of the
    flagged spans / characters of all spans.
    """
    mx = np.full(n_docs, -np.inf)
    np.maximum.at(mx, span_docs, span_scores.astype(np.float64))
    mx[np.isneginf(mx)] = np.nan
    flagged = span_scores > span_threshold
    n = np.bincount(span_docs, minlength=n_docs)
    nf = np.bincount(span_docs, weights=flagged, minlength=n_docs)
    cf = np.bincount(span_docs, weights=flagged * span_chars, minlength=n_docs)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"max": mx, "spans": n, "flagged": nf.astype(np.int64),
                "flagged_frac": np.where(n > 0, nf / np.maximum(n, 1), np.nan),
                "flagged_char_frac": np.where(doc_chars > 0, cf / np.maximum(doc_chars, 1), np.nan)}


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
    reject_above: ClassVar[bool] = True
    reads = ("lang",)  # only documents in ``languages`` are scored
    #: ``decide`` needs only the stored aggregates (``datapipe inspect --what-if``).
    recomputable: ClassVar[bool] = True

    @classmethod
    def span_fields(cls, name: str) -> list[pa.Field]:
        return [pa.field(f"{name}_score", pa.float32()), pa.field(f"{name}_spans", pa.int32()),
                pa.field(f"{name}_flagged", pa.int32()), pa.field(f"{name}_flagged_frac", pa.float32()),
                pa.field(f"{name}_flagged_char_frac", pa.float32())]

    @classmethod
    def decide(cls, signals: dict, config) -> str | None:
        """Reason for one document's stored signals under ``config`` (see the class docstring)."""
        lang = signals.get("lang")
        if config.languages and lang is not None and lang not in config.languages:
            return None
        n = cls.name
        if score_decision(signals.get(f"{n}_score"), config.threshold):
            return f"{n}:score"
        if score_decision(signals.get(f"{n}_flagged"), config.max_flagged):
            return f"{n}:flagged"
        if score_decision(signals.get(f"{n}_flagged_char_frac"), config.max_flagged_char_frac):
            return f"{n}:flagged_frac"
        return None

    def score_spans(self, spans: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def spans_of(self, texts: list[str | None], langs: list[str | None], with_cores: bool = False):
        """(spans, document index per span, characters per span) of the texts that are not None;
        with ``with_cores`` also each span's core sentence or None (:func:`split_units`)."""
        c = self.config
        spans, docs, cores = [], [], []
        for i, (t, lg) in enumerate(zip(texts, langs)):
            if t:
                units = _cached_spans(t[: c.max_chars] if c.max_chars else t, lg, c.min_span_words, c.max_span_words)
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


class FastTextSpanStage(SpanScoreStage):
    """A span stage scoring with a fastText model (``model_path``, ``positive_label`` in its Config)."""

    how_to_get: ClassVar[str] = "Train one with `datapipe classifiers train`."

    def setup(self) -> None:
        from datapipe.classifiers.model import load_classifier

        c = self.config
        if not c.model_path:
            raise FileNotFoundError(f"{self.name}: no model_path set. {self.how_to_get}")
        self._clf = load_classifier(c.model_path, c.positive_label or None)

    def assets(self) -> list:
        return classifier_assets(self.config.model_path)

    def score_spans(self, spans: list[str]) -> np.ndarray:
        return self._clf.score(spans)


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

    class Config(SpanScoreConfig):
        model_path: str = "toxicity_weak_en.ftz"
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
    how_to_get: ClassVar[str] = "Train one with `datapipe classifiers train nsfw` and set nsfw.model_path."

    class Config(SpanScoreConfig):
        model_path: str | None = "nsfw_ut1_en.ftz"
        positive_label: str = "nsfw"
        threshold: Probability | None = 0.99
