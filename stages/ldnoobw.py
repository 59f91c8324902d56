"""``ldnoobw``: count and fraction of LDNOOBW entries per document language (the C4 bad-words list,
Raffel et al. 2020; RedPajama-v2's ``rps_doc_ldnoobw_words`` signal).
"""
from __future__ import annotations

from typing import ClassVar

import pyarrow as pa

from datapipe.manifest.path_settings import SharedDir
from datapipe.manifest.ranges import NonNegInt, Probability
from datapipe.stage import (
    Rule,
    Stage,
    StageConfig,
    folder_assets,
    merge_reasons,
    register,
    with_column,
)
from datapipe.stages.lib import wordlists as wl
from datapipe.stages.lib.wordlists import shared_path


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
        words_dir: SharedDir = "wordlists/ldnoobw"
        #: Reject when the count exceeds this (>= 0; 0 = C4's "any listed word"); None = never.
        max_count: NonNegInt | None = None
        #: Reject when the fraction (in [0, 1]) exceeds this; None = never (no published default).
        max_fraction: Probability | None = None

    fields: ClassVar[list[pa.Field]] = [
        pa.field("ldnoobw_count", pa.int32()),
        pa.field("ldnoobw_fraction", pa.float32()),
    ]
    #: ``max_count=0`` is C4's rule (drop a page containing any listed word); None never rejects.
    rules = (Rule("ldnoobw:count", "ldnoobw_count", ">", "max_count"),
             Rule("ldnoobw:fraction", "ldnoobw_fraction", ">", "max_fraction"))

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
            reasons.append(self.decide({"ldnoobw_count": n, "ldnoobw_fraction": frac}, cfg))
        batch = with_column(batch, "ldnoobw_count", counts, pa.int32())
        batch = with_column(batch, "ldnoobw_fraction", fracs, pa.float32())
        return merge_reasons(batch, reasons)
