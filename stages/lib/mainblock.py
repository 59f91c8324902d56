"""Structural clean-up around resiliparse's main-content extraction (stage ``extract``).

Five rules, each measured on the development split of ``benchmarks/extraction_sets.py``
(the ablation table is in ``benchmarks/EXTRACTION_SETS.md``):

* **guarded skips**: an element matched by a boilerplate selector (``SKIP_CANDIDATES``) is left out only
  if it neither is nor holds an ``<article>``/``<main>``/``[role=main]``/``[itemprop=articleBody]``
  block: a class-name match can then not delete a semantic main block (``<article
  class="newsletter-post">``, a ``flex-wrap-footer`` wrapper around ``<main>``); where the page has
  no such block, the keep-ratio rule below catches a skip that took the content.
* **threads**: comment sections are dropped, unless they are the page: on a page that declares
  itself a discussion in schema.org markup (``THREAD_TYPES``: a forum thread, a Q&A page) and whose
  text with comments is more than ``thread_ratio`` times the text without them, the comments stay.
  Size alone does not decide: under a popular blog post the comments outweigh the article (on the
  dev split the size-only rule cost 0.011 F1 overall, articles 0.015).
* **block trim**: the text's prose blocks (lines of at least ``trim_chars`` characters with a
  sentence end, not a row of cells or links: no tab inside, fewer than 3 ``|``) are its body; when
  they hold at least ``trim_share`` of the characters (an article-shaped page), the blocks before
  the first prose block (but the one right before it, a heading) and after the last are cut, the
  body first growing over the short sentences right around it:
  menus, bylines, share bars, footers that resiliparse kept. Pages of short blocks (listings,
  products, short forum posts) are left as they are, and so are pages of code listings (two or
  more ``<pre>`` blocks: ``CODE_PAGE_PRE``) and pages whose long lines are menus
  or tables (a row of tab- or ``|``-separated links is long but not a body: measured on dev, +0.0018
  F1 overall [+0.0006, +0.0031] over counting every long line; ablation in EXTRACTION_SETS.md).
* **post meta kept**: bylines, dates and tags that resiliparse marks as post meta stay
  (``post_meta=True``, resiliparse's default; dropping them cost 0.009 F1 overall on dev, and on
  some pages resiliparse's post-meta pattern matches a wrapper of the whole article).
* **no worse than resiliparse**: when the cleaned text keeps less than ``keep_ratio`` of plain
  resiliparse main content, the cleaning removed the content and plain main content is used. Plain
  main content keeps comment sections only where the cleaned text has no block of
  ``plain_comments`` characters (a page of short posts, i.e. a thread without schema.org markup);
  below an article-shaped text it is taken without them. When the result is still under
  ``fallback_chars`` characters, the whole page (if longer).
"""
from __future__ import annotations

import re

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

from datapipe.stages.lib.extract_rescue import (
    FALLBACK_SKIPS,
    NOSCRIPT_GATE,
    NOSCRIPT_MIN_CHARS,
    junk_blocks,
    neutralise_main_blocks,
    noscript_chars,
    noscript_source,
)

#: Boilerplate candidates: "related" and newsletter boxes. The rest of the old list (h1, footer,
#: [class*=caption], [class*=footer]) did not earn its place in the dev-set ablation (no gain, or
#: better without); ``figure`` and ``figcaption`` changed no dev page once post meta was kept (0 of
#: 2,813: with ``alt_texts=False`` resiliparse leaves captions out already), so they went too, and
#: a page that has neither box needs no page-size pass. See benchmarks/EXTRACTION_SETS.md.
SKIP_CANDIDATES = ("[class*=related]", "[class*=newsletter]")

#: Blocks that are the main content by HTML semantics; never skipped, nor anything holding them.
MAIN_BLOCKS = "article, main, [role=main], [itemprop=articleBody]"

#: Elements resiliparse's ``comments=False`` can drop: its comment-section pattern is matched on
#: class and id (case-insensitively) and always contains "comment" or "reply", so a page without
#: these substrings extracts the same either way and the with-comments pass is skipped (exact:
#: 0 of 2,813 dev pages differed; the query is one lexbor selector match, ~0.4 ms).
COMMENT_MARKS = "[class*=comment i], [id*=comment i], [class*=reply i], [id*=reply i]"


def guarded(selectors: tuple[str, ...]) -> list[str]:
    """The skip selectors with the main-block guard in CSS (lexbor matches ``:has``): an element
    that is or holds a ``MAIN_BLOCKS`` element never matches. No Python walk over the DOM:
    resiliparse builds a Python object per node visited, which cost more than the extraction."""
    return [f"{s}:not({MAIN_BLOCKS}):not(:has({MAIN_BLOCKS}))" for s in selectors]


#: Pages with this many ``<pre>`` blocks (documentation, tutorials: code listings and commands
#: between the prose) are not block-trimmed: their short lines are content (dev: documentation
#: 0.945 -> 0.967 F1, overall unchanged at 0.8584; 0 listing or product pages have them).
CODE_PAGE_PRE = 2

#: schema.org types of a discussion page (forum thread, Q&A), as microdata ``itemtype`` or JSON-LD
#: ``@type``. Not ``Comment`` (blog themes mark up article comments with it) nor ``Question`` (FAQ
#: blocks on product and service pages use it).
THREAD_TYPES = ("DiscussionForumPosting", "QAPage", "Answer")
_THREAD_MICRODATA = ", ".join(f"[itemtype*={t} i]" for t in THREAD_TYPES)
_THREAD_LOWER = tuple(t.lower() for t in THREAD_TYPES)
_THREAD_QUERY = _THREAD_MICRODATA + ', script[type="application/ld+json"]'
_THREAD_LD = re.compile(r'"@type"\s*:\s*(?:\[[^\]]*)?"(?:https?://schema\.org/)?(?:%s)"' % "|".join(THREAD_TYPES))


def declares_thread(tree: HTMLTree) -> bool:
    """Whether the page declares itself a discussion (``THREAD_TYPES`` in microdata or JSON-LD)."""
    # One query for both kinds (a walk of the document costs ~0.1 ms): an element that is not a
    # microdata match is a JSON-LD script.
    for el in tree.document.query_selector_all(_THREAD_QUERY):
        itemtype = (el.getattr("itemtype") or "").lower()
        if any(t in itemtype for t in _THREAD_LOWER) or _THREAD_LD.search(el.text):
            return True
    return False


def longest_block(text: str) -> int:
    """Characters of the longest line of ``text``."""
    return max(map(len, text.split("\n")), default=0)


#: A sentence end: terminal punctuation (Latin and CJK), optional closing quotes or brackets, then
#: a space or the end of the block.
_SENTENCE_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f][\"'\u201d\u2019)\]]*(?:\s|$)")


def is_prose(block: str, min_chars: int = 100) -> bool:
    """Whether a block (one line of extracted text) is a body paragraph: at least ``min_chars``
    characters, a sentence end (``_SENTENCE_END``), and not a row of cells or links (a tab inside
    the stripped line, or 3 or more ``|`` separators)."""
    if len(block) < min_chars or _SENTENCE_END.search(block) is None:
        return False
    # Cells and tabs are rare: a scan for either before counting or stripping (the trim's hot loop).
    return not (("|" in block and block.count("|") >= 3) or ("\t" in block and "\t" in block.strip()))


def trim_blocks(text: str, trim_chars: int = 100, trim_share: float = 0.3, lead: int = 1) -> str:
    """Cut the blocks before the first and after the last prose block (``is_prose`` with
    ``trim_chars``), keeping ``lead`` blocks right before the first one; only when the prose blocks
    hold at least ``trim_share`` of the characters. The body first grows over the adjacent blocks
    with a sentence end (dev: +0.0028 F1 overall [+0.0019, +0.0039] over stopping at the first and
    last prose block). Blocks are rejoined by a blank line."""
    blocks = [b for b in text.split("\n") if b and not b.isspace()]
    if len(blocks) < 3:
        return text
    # The long blocks bound the prose blocks' share: most pages stop here, and is_prose is called
    # only on long blocks (a call per block cost ~7% of extract_main).
    need = trim_share * sum(map(len, blocks))
    if sum(n for n in map(len, blocks) if n >= trim_chars) < need:
        return text
    longs = [i for i, b in enumerate(blocks) if len(b) >= trim_chars and is_prose(b, trim_chars)]
    if not longs or sum(len(blocks[i]) for i in longs) < need:
        return text
    first, last = longs[0], longs[-1]
    # The body reaches over the short sentences right around it (an intro line, a closing remark).
    while first > 0 and _SENTENCE_END.search(blocks[first - 1]):
        first -= 1
    while last + 1 < len(blocks) and _SENTENCE_END.search(blocks[last + 1]):
        last += 1
    return "\n\n".join(blocks[max(0, first - lead):last + 1])


#: Characters block formatting can add per tag of a skipped element, for ``skip_bound``: a block's
#: two line breaks, and a list item's bullet and indentation (2 per list level in resiliparse 2.0)
#: spread over its start and end tags. 8 covers lists nested 6 deep; on dev + test the bound with 4
#: was never reached (the largest share used of its margin: 0.85) and 8 costs 3 more page-size
#: passes in 1,423 test pages.
SEP_PER_TAG = 8


def skip_bound(body, sel: list[str], text_chars: int) -> int:
    """An upper bound on the characters of plain main content where it differs from the cleaned
    text (``text_chars`` characters) only by the elements the skip selectors ``sel`` matched: their
    text (which includes what formatting collapses) plus ``SEP_PER_TAG`` per tag."""
    return text_chars + sum(len(el.text) + SEP_PER_TAG * el.html.count("<")
                            for el in body.query_selector_all(", ".join(sel)))


def extract_main(tree: HTMLTree, opts: dict, clean: bool = True, thread_ratio: float = 2.0,
                 thread_gate: float = 0.5, keep_ratio: float = 0.3, fallback_chars: int = 200,
                 trim_chars: int = 100, trim_share: float = 0.3, skips: tuple[str, ...] = SKIP_CANDIDATES,
                 post_meta: bool = True, guard: bool = True, thread_schema: bool = True,
                 thread_block_chars: int = 0, plain_comments: bool | int = 150, noscript_pages: bool = True,
                 main_guard: bool = True, clean_fallback: bool = True, thread_trim: bool = False) -> str:
    """Main text of a parsed page by the rules above. ``opts``: resiliparse output options
    (alt_texts, links, list_bullets, noscript). Ratios are of characters; ``fallback_chars``,
    ``thread_block_chars`` and ``plain_comments`` are in characters (``fallback_chars`` 0 = never fall
    back to the whole page; ``thread_block_chars`` > 0 also treats pages without a block that long
    as threads; ``plain_comments`` True/False = always/never with comments). ``thread_schema=False``,
    ``plain_comments=True`` give the rules before the schema.org thread test (for the ablation).

    Passes: the cleaned main content always. The others only where they can change the answer:
    the page's size (its whole text without formatting) for the two ratios below; the
    with-comments pass on a page with comment sections (``COMMENT_MARKS``) that declares a
    discussion and whose cleaned text is under ``thread_gate`` of the page; plain main content
    only where it can differ from the cleaned text (a skip matched, comment sections it would keep,
    or ``post_meta=False``; elsewhere it is the same extraction) and the cleaned text is under
    ``keep_ratio`` of the page (plain main content is never longer than the whole page). Exact:
    0 of 4,236 dev + test pages differ from computing every pass.
    """
    body = tree.body  # a new Python node per access: once
    if body is None:
        return ""
    if not clean:
        text = extract_plain_text(tree, main_content=True, **opts)
    else:
        if main_guard:
            neutralise_main_blocks(body, junk_blocks(body))
        # Where no skip selector matches, the page extracts the same with no skip list: the cheap
        # unguarded query first, the guarded one (its :has costs more) only on a hit.
        sel = None
        if skips and body.query_selector(", ".join(skips)) is not None:
            cand = guarded(skips) if guard else list(skips)
            if not guard or body.query_selector(", ".join(cand)) is not None:
                sel = cand
        skipped = sel is not None
        kw = dict(opts, main_content=True, post_meta=post_meta, skip_elements=sel)
        text = extract_plain_text(tree, comments=False, **kw)
        marks = body.query_selector(COMMENT_MARKS) is not None
        size = []

        def page_size() -> int:  # whole text without block formatting: a quarter cheaper, within 4%
            if not size:
                size.append(len(extract_plain_text(tree, main_content=False, preserve_formatting=False, **opts)))
            return size[0]

        thread = False
        if (thread_ratio > 0 and marks
                and (not thread_schema or (thread_block_chars > 0 and longest_block(text) < thread_block_chars)
                     or declares_thread(tree))
                and len(text) < thread_gate * page_size()):
            threaded = extract_plain_text(tree, comments=True, **kw)
            if len(threaded) > thread_ratio * len(text):
                text, thread = threaded, True
        def with_comments() -> bool:  # plain main content with its comment sections?
            return plain_comments is True or bool(plain_comments and longest_block(text) < plain_comments)

        # Plain main content equals the cleaned text unless a skip matched, its comment sections
        # differ from the text's, or post meta is dropped: only then can the keep ratio change it.
        comments_differ = marks and with_comments()
        differs = skipped or thread or not post_meta or comments_differ
        # Where only the skips differ, plain main content is at most the cleaned text plus the
        # skipped elements' text and, per tag, what formatting adds (``SEP_PER_TAG``): a bound
        # that costs one query instead of the page-size pass on most pages with a skip.
        only_skips = skipped and not thread and post_meta and not comments_differ
        if (differs and (not only_skips or len(text) < keep_ratio * skip_bound(body, sel, len(text)))
                and len(text) < keep_ratio * page_size()):
            plain = extract_plain_text(tree, main_content=True, comments=comments_differ or with_comments(), **opts)
            if len(text) < keep_ratio * len(plain):
                text = plain
        # A thread is its posts, short ones included; code listings' short lines are content (the
        # <pre> count is looked up only when the trim would cut something).
        if trim_chars > 0 and not thread:
            trimmed = trim_blocks(text, trim_chars, trim_share)
            if (trimmed != text and len(body.query_selector_all("pre")) < CODE_PAGE_PRE
                    and not (thread_trim is False and declares_thread(tree))):
                text = trimmed
    if noscript_pages and not opts.get("noscript") and len(text) < NOSCRIPT_GATE:
        ns = noscript_chars(body)
        if ns >= NOSCRIPT_MIN_CHARS and ns > 2 * len(text):
            again = extract_main(HTMLTree.parse(noscript_source(tree)), opts, clean, thread_ratio, thread_gate,
                                 keep_ratio, fallback_chars, trim_chars, trim_share, skips, post_meta, guard,
                                 thread_schema, thread_block_chars, plain_comments, False, main_guard, clean_fallback, thread_trim)
            if len(again) > len(text):
                return again
    if len(text) < fallback_chars:
        whole = ""
        if clean_fallback:
            whole = extract_plain_text(tree, main_content=False, skip_elements=list(FALLBACK_SKIPS), **opts)
        else:
            whole = extract_plain_text(tree, main_content=False, **opts)
        if len(whole) > len(text):
            text = whole
    return text
