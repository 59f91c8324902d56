"""The one text normalization used before every dedup hash (exact, line, MinHash shingles).

Policy (source: the project's dedup specification and case B26):

* Unicode NFKC: full-width/compatibility forms fold to their plain forms (``Ｔｈｅ`` -> ``The``,
  ``，`` -> ``,``); NFKC also maps NBSP (U+00A0) and the other fixed-width spaces to U+0020.
* Zero-width and invisible format characters are *removed* (not turned into spaces), because
  they sit inside words (``libr\\u200baries``): U+200B-U+200F, U+202A-U+202E, U+2060-U+2064,
  U+FEFF and the soft hyphen U+00AD.
* ``str.casefold`` (full Unicode case folding, ``ß`` -> ``ss``).
* Whitespace: every run of Unicode whitespace (``str.split()`` semantics, so tabs, newlines, NBSP
  and U+3000 included) becomes one ASCII space; leading/trailing whitespace is dropped.
* Punctuation is **kept**: it is content (``3.5`` vs ``35``, code), NFKC already unifies its
  width variants, and removing it would merge texts that differ only in it. Two texts that
  differ only in punctuation are therefore near duplicates (MinHash), not exact duplicates.
"""
from __future__ import annotations

import re
import unicodedata

#: The invisible characters deleted (see the module docstring); a regex because str.translate
#: with a dict costs ~40x more on a 3 KB text than a search that finds nothing.
INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")


def nfkc(text: str | None) -> str:
    """NFKC of ``text`` (``""`` for None), the only step of the policy the MinHash kernel
    (:mod:`datapipe.stages.lib.minhash_kernel`) leaves to Python; identity on ASCII (checked first)."""
    if not text:
        return ""
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def normalize_text(text: str | None) -> str:
    """Return the dedup form of ``text`` (see the module docstring for the policy).

    ``None`` and whitespace-only strings give ``""``. The result has no newline, no leading,
    trailing or doubled space, so ``result.split(" ")`` yields the words. Never raises for str input.
    """
    if not text:
        return ""
    if text.isascii():
        # Same result as the general path (NFKC is the identity on ASCII, casefold == lower), 2x faster.
        return " ".join(text.lower().split())
    # NFKC first: it creates characters (full-width -> ASCII letters) that casefold must see.
    t = unicodedata.normalize("NFKC", text)
    if INVISIBLE.search(t):
        t = INVISIBLE.sub("", t)
    return " ".join(t.casefold().split())


def normalize_lines(text: str | None) -> list[str]:
    """Split ``text`` into lines (``str.splitlines`` boundaries) and normalize each one.

    Returns a list with one normalized string per original line, same length and order as
    ``text.splitlines()``; blank lines normalize to ``""``.
    """
    if not text:
        return []
    return [normalize_text(line) for line in text.splitlines()]
