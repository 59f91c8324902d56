"""Page repairs of the extract stage (stages/lib/extract_rescue.py): hand-made pages of each failure
class, checked through the stage's ``extract_one`` with its default settings."""
from __future__ import annotations

from datapipe.stages.extract import extract_one

BODY = ("The committee met on Tuesday to review the proposal for the new river crossing. "
        "Members discussed the cost estimates, the environmental survey and the timetable. ") * 4


def run(html: str) -> str:
    return extract_one(html.encode(), "utf-8")[0]


def test_noscript_wrapped_page_is_read_as_markup():
    # An unclosed tag-manager <iframe> inside <noscript>: lexbor reads the rest of the page as raw text.
    html = (f"<html><body><noscript><iframe src='https://example.org/ns.html'></noscript>"
            f"<noscript><div class='thread'><h1>Garden question</h1><p>{BODY * 3}</p>"
            "<p>Second post: water the lemon tree twice a week in summer.</p></div></noscript></body></html>")
    text = run(html)
    assert "river crossing" in text
    assert "lemon tree" in text
    assert "<div" not in text


def test_article_with_a_resiliparse_boilerplate_class_is_kept():
    html = (f"<html><body><nav><a href='/'>Home</a></nav><div class='layout'><div class='col'>"
            f"<article class='newsletter-post'><h1>Weekly notes</h1><p>{BODY}</p></article>"
            f"</div><div class='col'><p>{'Our office is open on weekdays and closed on public holidays. ' * 5}</p>"
            "</div></div></body></html>")
    assert "river crossing" in run(html)


def test_teaser_with_a_boilerplate_class_stays_dropped():
    # A small "newsletter" box next to the article holds little of the page: resiliparse's verdict stands.
    html = (f"<html><body><div class='a'><div class='b'><article><p>{BODY}</p></article>"
            "<article class='newsletter-post'><p>Sign up for our weekly letter today.</p></article>"
            "</div></div></body></html>")
    text = run(html)
    assert "river crossing" in text
    assert "weekly letter" not in text


def test_fallback_leaves_navigation_out():
    links = "".join(f"<li><a href='/s{i}'>Section number {i}</a></li>" for i in range(40))
    html = (f"<html><body><header><ul>{links}</ul></header><nav><ul>{links}</ul></nav>"
            "<div><h2>Opening hours</h2><div>Monday to Friday, nine to five.</div></div>"
            f"<footer><ul>{links}</ul></footer></body></html>")
    text = run(html)
    assert "Opening hours" in text and "nine to five" in text
    assert "Section number" not in text


def test_declared_thread_keeps_short_replies_after_a_long_opening_post():
    replies = "".join(f"<div class='post'><p>Reply {i} same here thanks</p></div>" for i in range(6))
    html = ("<html><head><script type='application/ld+json'>{\"@type\": \"DiscussionForumPosting\"}"
            f"</script></head><body><div class='topic'><div class='post'><p>{BODY}</p></div>{replies}"
            "</div></body></html>")
    text = run(html)
    assert "river crossing" in text
    assert "Reply 5 same here" in text
