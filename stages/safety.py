"""Safety stages: URL block list, LDNOOBW word-list score, fastText toxicity / NSFW classifiers.

* ``url_blocklist``: FineWeb's URL filter (DataTrove ``URLFilter``, Penedo et al. 2024): the UT1
  adult list (domains and URLs) plus banned words, >= 2 soft-banned words, and banned sub-words
  (Aho-Corasick) in the URL.
* ``ldnoobw``: count and fraction of LDNOOBW entries per document language (the C4 bad-words list,
  Raffel et al. 2020; RedPajama-v2's ``rps_doc_ldnoobw_words`` signal).
* ``toxicity`` / ``nsfw``: any supervised fastText model scored on the document text (Dolma's
  Jigsaw taggers do this with their ``toxic``/``nsfw`` bins); ``toxicity`` defaults to the model
  shipped in ``classifiers/models/`` (see its MODEL_CARD.md for what it is and is not).
"""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa

from datapipe.env import shared_data
from datapipe.ranges import NonNegInt, PosInt, Probability
from datapipe.stage import Stage, StageConfig, merge_reasons, register, texts_in_languages, with_column
from datapipe.stages.lib import wordlists as wl


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

    class Config(StageConfig):
        ut1_path: str = "blocklists/ut1_adult_url_filterblacklistsv0_3_0.tar.gz"
        words_dir: str = "wordlists/datatrove_url_filter"
        #: DataTrove's default: two soft-banned words ban a URL (>= 1).
        soft_word_threshold: PosInt = 2
        use_ut1: bool = True
        use_words: bool = True
        allow_domains: list[str] = []

    fields: ClassVar[list[pa.Field]] = [pa.field("url_blocklist_match", pa.string())]

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
# fastText classifiers


def score_decision(score: float | None, threshold: float | None, reject_above: bool = True) -> bool:
    """True = reject: ``score > threshold`` (``reject_above``) or ``score < threshold``; null score keeps."""
    if score is None or threshold is None or score != score:  # NaN check
        return False
    return score > threshold if reject_above else score < threshold


class FastTextScoreStage(Stage):
    """Base of stages that write one fastText probability column and may reject on it.

    Subclasses set ``name``, ``column`` (float32 field), ``reject_above`` and a ``Config`` with
    ``model_path``, ``positive_label``, ``threshold``, ``languages`` (empty = all). Documents in
    other languages get a null score and are kept.
    """

    column: ClassVar[str] = ""
    reject_above: ClassVar[bool] = True

    def setup(self) -> None:
        from datapipe.classifiers.model import load_classifier

        c = self.config
        if not c.model_path:
            raise FileNotFoundError(f"{self.name}: no model_path set. {self.how_to_get}")
        self._clf = load_classifier(c.model_path, c.positive_label or None)

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


@register
class Toxicity(FastTextScoreStage):
    """``toxicity_score`` (float32, P(``positive_label``)) from a fastText model; reject above ``threshold``.

    Default model: ``classifiers/models/toxicity_weak_en.ftz`` (weakly supervised, English; read its
    MODEL_CARD.md). Dolma's Jigsaw ``jigsaw_fasttext_bigrams_hatespeech_final.bin`` works with
    ``positive_label: toxic``. Reason: ``toxicity:score``.
    """

    name = "toxicity"
    column = "toxicity_score"
    fields: ClassVar[list[pa.Field]] = [pa.field("toxicity_score", pa.float32())]

    class Config(StageConfig):
        model_path: str = "toxicity_weak_en.ftz"
        positive_label: str = "toxic"
        #: Reject above this probability, in [0, 1]; None = annotate only. Default 0.5 = the model's argmax.
        threshold: Probability | None = 0.5
        languages: list[str] = ["en"]


@register
class NSFW(FastTextScoreStage):
    """``nsfw_score`` (float32) from a user-supplied fastText NSFW model; reject above ``threshold``.

    No model ships (none with a shippable licence exists on disk): set ``model_path`` to e.g. Dolma's
    ``jigsaw_fasttext_bigrams_nsfw_final.bin`` (labels ``nsfw``/``non-nsfw``). Reason: ``nsfw:score``.
    """

    name = "nsfw"
    column = "nsfw_score"
    fields: ClassVar[list[pa.Field]] = [pa.field("nsfw_score", pa.float32())]
    how_to_get: ClassVar[str] = ("Download Dolma's Jigsaw NSFW fastText model (jigsaw_fasttext_bigrams_nsfw_final.bin, "
                                 "as CS336 assignment 4 does) and set nsfw.model_path.")

    class Config(StageConfig):
        model_path: str | None = None
        positive_label: str = "nsfw"
        threshold: Probability | None = 0.5  # in [0, 1], as toxicity's
        languages: list[str] = ["en"]
