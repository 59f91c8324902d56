"""Structural clean-up around resiliparse's main-content extraction (stage ``extract``, issue 20).

Four rules, each measured on the development split of ``benchmarks/extraction_sets.py``
(the ablation table is in ``benchmarks/EXTRACTION_SETS.md``):

* **guarded skips**: an element matched by a boilerplate selector (``SKIP_CANDIDATES``) is left out only
  if it neither is nor holds an ``<article>``/``<main>``/``[role=main]``/``[itemprop=articleBody]``
  block: a class-name match can then not delete a semantic main block (``<article
  class="newsletter-post">``, a ``flex-wrap-footer`` wrapper around ``<main>``); where the page has
  no such block, the keep-ratio rule below catches a skip that took the content.
* **threads**: comment sections are dropped, unless they are the page: when the text with comments
  is more than ``thread_ratio`` times the text without them (a forum thread, a Q&A page), the
  comments stay.
* **block trim**: the text's blocks (lines) of at least ``trim_chars`` characters are its body; when
  they hold at least ``trim_share`` of the characters (an article-shaped page), the short blocks
  before the first long one (but the one right before it, a heading) and after the last are cut:
  menus, bylines, share bars, footers that resiliparse kept. Pages of short blocks (listings,
  products, short forum posts) are left as they are.
* **no worse than resiliparse**: when the cleaned text keeps less than ``keep_ratio`` of plain
  resiliparse main content (its defaults), the cleaning removed the content and plain main content
  is used; when the result is still under ``fallback_chars`` characters, the whole page (if longer).
"""
from __future__ import annotations

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

#: Boilerplate candidates: figures and their captions, "related" and newsletter boxes. The rest of
#: the old list (h1, footer, [class*=caption], [class*=footer]) did not earn its place in the
#: dev-set ablation (no gain, or better without); see benchmarks/EXTRACTION_SETS.md.
SKIP_CANDIDATES = ("figure", "figcaption", "[class*=related]", "[class*=newsletter]")

#: Blocks that are the main content by HTML semantics; never skipped, nor anything holding them.
MAIN_BLOCKS = "article, main, [role=main], [itemprop=articleBody]"


def guarded(selectors: tuple[str, ...]) -> list[str]:
    """The skip selectors with the main-block guard in CSS (lexbor matches ``:has``): an element
    that is or holds a ``MAIN_BLOCKS`` element never matches. No Python walk over the DOM:
    resiliparse builds a Python object per node visited, which cost more than the extraction."""
    return [f"{s}:not({MAIN_BLOCKS}):not(:has({MAIN_BLOCKS}))" for s in selectors]


def trim_blocks(text: str, trim_chars: int = 100, trim_share: float = 0.3, lead: int = 1) -> str:
    """Cut the short blocks (lines under ``trim_chars`` characters) before the first and after the
    last long block, keeping ``lead`` short blocks right before the first long one; only when the
    long blocks hold at least ``trim_share`` of the characters. Blocks are rejoined by a blank line."""
    blocks = [b for b in text.split("\n") if b.strip()]
    if len(blocks) < 3:
        return text
    lens = [len(b) for b in blocks]
    longs = [i for i, n in enumerate(lens) if n >= trim_chars]
    if not longs or sum(lens[i] for i in longs) < trim_share * sum(lens):
        return text
    return "\n\n".join(blocks[max(0, longs[0] - lead):longs[-1] + 1])


def extract_main(tree: HTMLTree, opts: dict, clean: bool = True, thread_ratio: float = 2.0,
                 thread_gate: float = 0.5, keep_ratio: float = 0.3, fallback_chars: int = 200,
                 trim_chars: int = 100, trim_share: float = 0.3, skips: tuple[str, ...] = SKIP_CANDIDATES,
                 post_meta: bool = False, guard: bool = True) -> str:
    """Main text of a parsed page by the three rules above. ``opts``: resiliparse output options
    (alt_texts, links, list_bullets, noscript). Ratios are of characters; ``fallback_chars`` is in
    characters (0 = never fall back to the whole page).

    Passes: the whole page (the size everything is compared with) and the cleaned main content;
    the with-comments pass only when the text without comments is under ``thread_gate`` of the
    whole page, the plain pass only when the cleaned text is under ``keep_ratio`` of it (plain
    main content is never longer than the whole page, so elsewhere it could not change the answer).
    """
    if tree.body is None:
        return ""
    whole = extract_plain_text(tree, main_content=False, **opts) if clean else None
    if not clean:
        text = extract_plain_text(tree, main_content=True, **opts)
    else:
        total = len(whole)
        sel = (guarded(skips) if guard else list(skips)) if skips else None
        kw = dict(opts, main_content=True, post_meta=post_meta, skip_elements=sel)
        text = extract_plain_text(tree, comments=False, **kw)
        thread = False
        if thread_ratio > 0 and len(text) < thread_gate * total:
            threaded = extract_plain_text(tree, comments=True, **kw)
            if len(threaded) > thread_ratio * len(text):
                text, thread = threaded, True
        if len(text) < keep_ratio * total:
            plain = extract_plain_text(tree, main_content=True, **opts)
            if len(text) < keep_ratio * len(plain):
                text = plain
        if trim_chars > 0 and not thread:  # a thread is its posts, short ones included
            text = trim_blocks(text, trim_chars, trim_share)
    if len(text) < fallback_chars:
        whole = whole if whole is not None else extract_plain_text(tree, main_content=False, **opts)
        if len(whole) > len(text):
            text = whole
    return text
