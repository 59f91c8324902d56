"""Page repairs around resiliparse's main-content pass (stage ``extract``): each one changes the parsed
tree or the source only where a page shows the failure it repairs, and was measured on the
development split of ``benchmarks/extraction_sets.py`` (figures in ``benchmarks/EXTRACTION_SETS.md``).

* **noscript-wrapped pages**: lexbor parses a ``<noscript>`` element's content as raw text (the
  scripting flag is on), so a page whose body sits inside one (an unclosed tag-manager
  ``<noscript>``, forum engines that render posts for clients without JavaScript) extracts to
  nothing. Where the ``<noscript>`` raw text is large and more than twice the extracted text, the
  page is parsed again with those elements as ``<div>`` (``noscript_source``).
* **main blocks protected from resiliparse's class rules**: an ``<article>``/``<main>``-like block
  holding most of the page's text whose class or id matches one of resiliparse's own boilerplate
  patterns (``RESILIPARSE_JUNK``, e.g. ``newsletter-post``, ``post-footer-wrap``) loses those
  attributes before extraction, and so do its ancestors (``neutralise_main_blocks``).
* **cleaned whole page**: where main content is nearly empty, the fallback is the page without its
  navigation landmarks (``FALLBACK_SKIPS``) rather than every menu and footer line.
"""
from __future__ import annotations

import re

#: Elements a whole-page fallback leaves out: landmarks of navigation and page chrome (HTML
#: semantics and ARIA roles), never the text between them.
FALLBACK_SKIPS = ("head", "script", "style", "nav", "header", "footer", "aside", "form", "select",
                  "button", "[role=navigation]", "[role=banner]", "[role=contentinfo]", "[role=search]",
                  "[role=menu]", "[role=menubar]")

#: ``<noscript>`` raw text (characters) from which a page may be a noscript-wrapped page.
NOSCRIPT_MIN_CHARS = 1000

#: Extracted text (characters) under which the ``<noscript>`` elements are measured at all: the
#: noscript-wrapped pages of the dev split came out with at most 1,368 (a walk over every page's
#: ``<noscript>`` elements cost 7% of the stage).
NOSCRIPT_GATE = 2000

_NOSCRIPT_TAG = re.compile(r"<(/?)noscript\b", re.I)
_IFRAME_TAG = re.compile(r"</?iframe\b[^>]*>", re.I)


def noscript_chars(body) -> int:
    """Characters of raw text inside the ``<noscript>`` elements of ``body`` (0 without any)."""
    return sum(len(el.text) for el in body.query_selector_all("noscript"))


def noscript_source(tree) -> str:
    """The document's HTML with every ``<noscript>`` tag written as ``<div>`` and ``<iframe>`` tags
    removed (an unclosed tag-manager ``<iframe>`` is raw text to the end of the page too), so that a
    new parse reads their content as markup."""
    return _IFRAME_TAG.sub("", _NOSCRIPT_TAG.sub(r"<\1div", tree.document.html))


# resiliparse 2.0's class and id patterns that drop an element in main-content mode
# (resiliparse/extract/html2text.pyx: signin, social, logo, ads, footer, header, navigation,
# recommended, search, sidebar, modal, gallery, print); matched case-insensitively anywhere.
RESILIPARSE_JUNK = re.compile("|".join((
    r"(?:^|[\s_-])(?:(?:log[_-]?in|sign[_-]?(?:in|up)|account)|user[_-](?:info|profile|settings|actions))(?:$|[\s_-])",
    r"(?:^|\s|__|--|mobile-|desktop-|l-|m-|c-)(?:social(?:media|search)?|share(?:daddy)?|syndication|newsletter|"
    r"sharing|follow|email|likes?|(?:give[_-]?)?feedback|(?:brand[_-])?engagement|facebook|twitter|subscribe|wa|jp|"
    r"aptf-follow)(?:[_-]?(?:post|links?|section|icons?|btn|buttons?|target))?(?:$|[\s_-])",
    r"(?:brand(?:ing)?[_-]*)?logo(?:$|\s)",
    r"(?:^|\s)(?:(?:google|wide)[_-]?ads?|ad(?:vert|vertise(?:ment|link)?|$|_[a-f0-9]+)|sponsor(?:ed)?|promoted|paid|"
    r"(?:wide)?banner|donate)(?:$|[\s_-])",
    r"(?:^|[\s_-])(?:global|page|site|copyright)?(?:footer|copyright|cookie|consent|legal|fcontainer)(?:$|[\s_-])",
    r"(?:^|\s)(?:l|m|wp|global|page|site|full|sticky)[_-]*header(?:[_-]?wrap(?:per)?|bar)?(?:$|\s)",
    r"(?:^|\s)(?:(?:l|m|wp|main|site|page|sub|article|global|sticky|main)[_-]*)?(?:nav(?:igation)?|menu(?:[_-]item)?|"
    r"drop[_-]?down|bread[_-]?crumbs?)|(?:links?[_-]?(?:bar|box|list|container|section|wrapp(?:er))?)(?:$|[\s_-])",
    r"(?:^|[\s_-])(?:trends|trending|recommended|featured|popular|editors?[_-]picks|related|read-next|"
    r"(?:related|more|other)[_-]?(?:links|articles|posts|guides|stories))(?:$|[\s_-])",
    r"(?:^|[\s_-])search(?:[_-]?(?:bar|facility|box))?(?:$|\s)",
    r"(?:^|\s)(?:(?:l|wp|right|left|global|sticky)[_-]*)?(?:(?:side|sticky)[_-]?(?:bars?|box)|one-third)(?:$|[\s_-])",
    r"(?:^|\s)(?:wp-|p-|-l)?(?:modal|popup|lightbox)(?:[_-]*(?:window|pane|box))?(?:$|[\s_-])",
    r"(?:^|[\s_-])(?:gallery|carousel)(?:$|[\s_-])",
    r"(?:^|\s)print[_-]",
)), re.I)

#: Semantic main blocks whose class/id resiliparse's patterns must not decide.
MAIN_BLOCKS = "article, main, [role=main], [itemprop=articleBody]"

#: Share of the page's text (characters) a main block must hold to be protected: a teaser or a
#: related-posts ``<article>`` holds little and keeps resiliparse's verdict.
MAIN_SHARE = 0.3


def _junk(el) -> bool:
    return bool(RESILIPARSE_JUNK.search(f"{el.getattr('class') or ''} {el.getattr('id') or ''}"))


_MAIN_WITH_ATTRS = "article[class], article[id], [itemprop=articleBody][class], [itemprop=articleBody][id]"


def junk_blocks(body, limit: int = 3) -> list:
    """Main blocks resiliparse's class rules may drop: of the first ``limit`` ``<article>``/articleBody
    elements with a class or id, those matching ``RESILIPARSE_JUNK``, and the first ``<main>``/``[role=main]``
    block if an ancestor matches. Few nodes: each Python node object costs up to a millisecond on a
    large page, so candidates are not walked (a page of many articles is a listing)."""
    out = []
    found = body.query_selector_all(_MAIN_WITH_ATTRS)
    for k in range(min(limit, len(found))):
        if _junk(found[k]):
            out.append(found[k])
    main = body.query_selector("main, [role=main]")
    if main is not None and _junk_ancestor(main, body):
        out.append(main)
    return out


def neutralise_main_blocks(body, blocks) -> bool:
    """Drop the class and id of each of ``blocks`` (``junk_blocks``) holding
    ``MAIN_SHARE`` of the page's text, and of its ancestors whose class or id matches
    ``RESILIPARSE_JUNK``. Returns whether the tree changed."""
    if not blocks:
        return False
    page = len(body.text)
    changed = False
    for el in blocks:
        if len(el.text) < MAIN_SHARE * page:
            continue
        node = el
        while node is not None and node != body:
            if _junk(node):
                for attr in ("class", "id"):
                    if node.hasattr(attr):
                        node.delattr(attr)
                changed = True
            node = node.parent
    return changed


def _junk_ancestor(el, body) -> bool:
    node = el.parent
    while node is not None and node != body:
        if _junk(node):
            return True
        node = node.parent
    return False
