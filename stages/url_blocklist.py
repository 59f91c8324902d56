"""``url_blocklist``: FineWeb's URL filter (DataTrove ``URLFilter``, Penedo et al. 2024): the UT1
adult list (domains and URLs) plus banned words, >= 2 soft-banned words, and banned sub-words
(Aho-Corasick) in the URL. The lists are loaded by ``stages/lib/wordlists.py``.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import pyarrow as pa

from datapipe.manifest.path_settings import SharedDir, SharedFile
from datapipe.manifest.ranges import PosInt
from datapipe.stage import (
    Stage,
    StageConfig,
    folder_assets,
    merge_reasons,
    register,
    with_column,
)
from datapipe.stages.lib import wordlists as wl
from datapipe.stages.lib.wordlists import shared_path


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
        ut1_path: SharedFile = "blocklists/ut1_adult_url_filterblacklistsv0_3_0.tar.gz"
        words_dir: SharedDir = "wordlists/datatrove_url_filter"
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
