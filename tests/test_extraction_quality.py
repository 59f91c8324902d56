"""Extraction quality floors on trafilatura's evaluation set and the Article Extraction Benchmark.

The scores are computed here, independently of benchmarks/bench_extraction.py (which scores the
dev/test split of the multi-genre set per page type and times trafilatura and us in the same run).
Floors were measured on all pages first, then pinned a little below (2026-12-01, stage defaults after
issue 20: guarded skips, thread rule, block trim, keep-ratio and whole-page fallbacks):

    set                 config                          precision  recall  F1
    trafilatura eval    defaults                        0.851      0.921   0.885
    trafilatura eval    clean=False, fallback_chars=0   0.770      0.942   0.847
    AEB                 defaults                        0.907      0.967   0.936
    AEB                 clean=False, fallback_chars=0   0.864      0.986   0.921

(Before issue 20 the defaults scored 0.874 and 0.957: the dropped ``h1`` skip removed the page
title, which AEB's gold leaves out and the other sets' gold mostly keeps; on the dev split of the
multi-genre set keeping it scores better, see benchmarks/EXTRACTION_SETS.md.)
"""
from __future__ import annotations

from collections import Counter

import pytest

from datapipe import evalsets
from datapipe.stages.lib.extract_page import extract_one

# ---------------------------------------------------------------- scoring (written for this test)

def string_scores(texts, pages):
    """trafilatura's evaluation: 'with' found = TP, missing = FN; 'without' present = FP."""
    tp = fn = fp = 0
    for text, (_, with_, without) in zip(texts, pages):
        for s in with_:
            if s in text:
                tp += 1
            else:
                fn += 1
        fp += sum(1 for s in without if s in text)
    p, r = tp / (tp + fp), tp / (tp + fn)
    return p, r, 2 * p * r / (p + r)


def token_scores(texts, pages):
    """Whitespace tokens, multiset overlap; per-page P and R averaged, F1 of the averages."""
    ps, rs = [], []
    for text, (_, body) in zip(texts, pages):
        pred, true = Counter(text.split()), Counter(body.split())
        both = sum(min(n, true[w]) for w, n in pred.items())
        ps.append(both / sum(pred.values()) if pred else 0.0)
        rs.append(both / sum(true.values()) if true else 0.0)
    p, r = sum(ps) / len(ps), sum(rs) / len(rs)
    return p, r, 2 * p * r / (p + r)


def test_token_scores_by_hand():
    # pred a a b c / true a b b d: overlap {a:1, b:1} = 2 of 4 predicted, 2 of 4 true.
    assert token_scores(["a a b c"], [(None, "a b b d")]) == (0.5, 0.5, 0.5)
    # Page 2 predicts nothing: precision and recall 0 there; averages (1+0)/2.
    p, r, f = token_scores(["x y", ""], [(None, "x y"), (None, "z")])
    assert (p, r) == (0.5, 0.5) and f == 0.5


def test_string_scores_by_hand():
    pages = [(None, ["alpha", "beta"], ["gamma"]), (None, ["delta"], ["eps", "zeta"])]
    # TP alpha, delta; FN beta; FP gamma, eps -> P 2/4, R 2/3.
    p, r, f = string_scores(["alpha gamma", "delta eps"], pages)
    assert (p, r) == (0.5, 2 / 3)
    assert f == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))


# ---------------------------------------------------------------- the two measures on made-up pages

ARTICLE = "<p>" + " ".join(f"Sentence number {i} of the article body tells its story." for i in range(40)) + "</p>"


def test_dragnet_gold_leaves_out_the_comments():
    """Dragnet's gold files append the page's comments after a separator line (its "content and
    comments" target); the main-text gold is the part before it. Loading all of it made comments
    (566k of the 790k words on the 395 such pages) count as main text."""
    from extraction_sets import DRAGNET_COMMENTS, dragnet_gold

    assert dragnet_gold(f"Title\n\nThe article body.\n\n{DRAGNET_COMMENTS}\n\nFirst!\nNice post.") == \
        "Title\n\nThe article body.\n\n"
    assert dragnet_gold("No comments on this page.") == "No comments on this page."


def test_clean_drops_newsletter_box_and_trailing_footer():
    html = (f"<html><body><article><h1>The Headline Of Page</h1>{ARTICLE}"
            f"{ARTICLE}<div class='newsletter-box'><p>Sign up for our daily letter now</p></div>"
            "<div class='article-footer'><p>Article footer text is here</p></div>"
            "</article></body></html>").encode()
    cleaned = extract_one(html, "utf-8")[0]
    plain = extract_one(html, "utf-8", clean=False, fallback_chars=0)[0]
    assert "Sentence number 39 of the article body" in cleaned
    assert cleaned.count("Sentence number 7 of") == plain.count("Sentence number 7 of") == 2
    assert "The Headline Of Page" in cleaned  # the heading right before the body stays
    for boiler in ("Sign up for our daily", "Article footer text"):
        assert boiler in plain and boiler not in cleaned, boiler


def test_fallback_to_whole_page_when_main_content_is_short():
    # A short page: main-content mode keeps too little of it (below fallback_chars).
    html = (b"<html><body><div class='nav'><a href='/'>Home</a></div>"
            b"<div class='sidebar'><p>Opening hours are Monday to Friday from nine to five.</p></div>"
            b"</body></html>")
    main_only = extract_one(html, "utf-8", fallback_chars=0)[0]
    assert len(main_only) < 200
    whole = extract_one(html, "utf-8", main_content=False)[0]
    with_fallback = extract_one(html, "utf-8")[0]
    assert len(whole) > len(main_only)
    assert "Opening hours are Monday to Friday" in with_fallback
    # fallback_chars=0 switches it off: the text is main content's, whatever it is.
    assert with_fallback != main_only


# ---------------------------------------------------------------- floors on the real sets

@pytest.fixture(scope="module")
def aeb_pages(data_dir):
    return evalsets.aeb_pages(data_dir / "extraction" / "scrapinghub_aeb")


def _texts(pages, **cfg):
    return [extract_one(page[0], None, **cfg)[0] or "" for page in pages]


def test_trafilatura_eval_f1_floor(trafilatura_pages, trafilatura_default_texts):
    """trafilatura_pages and their default texts: conftest's (shared with test_extract.py)."""
    assert len(trafilatura_pages) == 990
    p, r, f1 = string_scores(trafilatura_default_texts, trafilatura_pages)
    # Measured 2026-12-01 after issue 20's second round: P 0.844, R 0.925, F1 0.883 (the first
    # round's floors were P 0.845, R 0.915, F1 0.878: keeping post meta and the sentences around the
    # body trade a little precision for recall here, and gain word F1 on the dev split).
    assert p >= 0.84 and r >= 0.92 and f1 >= 0.88, (p, r, f1)
    _, _, f1_plain = string_scores(_texts(trafilatura_pages, clean=False, fallback_chars=0), trafilatura_pages)
    assert f1 - f1_plain >= 0.03, (f1, f1_plain)  # the clean + fallback measures earn their keep


def test_aeb_token_f1_floor(aeb_pages):
    assert len(aeb_pages) == 181
    p, r, f1 = token_scores(_texts(aeb_pages), aeb_pages)
    assert p >= 0.90 and r >= 0.96 and f1 >= 0.93, (p, r, f1)
    _, _, f1_plain = token_scores(_texts(aeb_pages, clean=False, fallback_chars=0), aeb_pages)
    assert f1 - f1_plain >= 0.01, (f1, f1_plain)
