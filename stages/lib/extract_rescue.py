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


def neutralise_main_blocks(body) -> bool:
    """Drop the class and id of each main block (``MAIN_BLOCKS``) holding ``MAIN_SHARE`` of the
    page's text whose class or id matches ``RESILIPARSE_JUNK``, and of its ancestors that match.
    Returns whether the tree changed. One selector query on pages without a matching block."""
    blocks = [el for el in body.query_selector_all(MAIN_BLOCKS) if _junk(el) or _junk_ancestor(el, body)]
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


#: Post containers of forum engines and Q&A pages, by class or id (phpBB ``div.post``, vBulletin
#: ``li.postcontainer`` / ``#post_123``, XenForo ``article.message``, Phorum ``div.message``, ...).
POST_CONTAINERS = "[class*=post i], [class*=message i], [id^=post i], article"

#: Repeated post containers that make a page a thread: this many of one kind (tag and class, digits
#: removed), each with at least ``POST_MIN_CHARS`` characters of text.
POST_REPEATS = 3
POST_MIN_CHARS = 80

_DIGITS = re.compile(r"\d+")


def repeated_posts(body) -> bool:
    """Whether ``body`` holds ``POST_REPEATS`` post containers of one kind with text: a thread whose
    replies are content, whatever the length of its opening post."""
    seen: dict[tuple, int] = {}
    for el in body.query_selector_all(POST_CONTAINERS):
        key = (el.tag, _DIGITS.sub("", el.getattr("class") or ""))
        if len(el.text.strip()) >= POST_MIN_CHARS:
            seen[key] = seen.get(key, 0) + 1
            if seen[key] >= POST_REPEATS:
                return True
    return False
