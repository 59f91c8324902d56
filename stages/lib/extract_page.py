"""One page's text: charset decoding, then main-content or whole-page extraction (the ``extract``
stage's work on one record, run in its sandbox child or in-process)."""
from __future__ import annotations

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

from datapipe.stages.lib.charset import decode_payload
from datapipe.stages.lib.mainblock import extract_main


def extract_one(payload: bytes, http_charset: str | None, main_content=True, alt_texts=False,
                links=False, list_bullets=True, noscript=False, clean=True, fallback_chars=200,
                thread_ratio=2.0, thread_gate=0.5, keep_ratio=0.3,
                trim_chars=100, trim_share=0.3, thread_block_chars=0) -> tuple[str | None, str, None, list[str]]:
    """Decode and extract one page. Returns ``(text, codec, None, warnings)``; the third slot is
    the error reason of the sandbox protocol (always None here), ``warnings`` the decoding's.

    Main-content mode applies ``datapipe.stages.lib.mainblock.extract_main`` (guarded skips, the
    thread rule, the no-worse-than-resiliparse fallback; ``clean=False`` keeps only the fallback to
    the whole page). Whole-page extraction (``main_content=False``) is resiliparse's plain output.
    """
    decoded = decode_payload(payload, http_charset)
    html, codec, warns = decoded.text, decoded.codec, decoded.warnings
    opts = dict(alt_texts=alt_texts, links=links, list_bullets=list_bullets, noscript=noscript)
    if not main_content:
        return extract_plain_text(html, main_content=False, **opts), codec, None, warns
    text = extract_main(HTMLTree.parse(html), opts, clean=clean, thread_gate=thread_gate,
                        thread_ratio=thread_ratio, keep_ratio=keep_ratio, fallback_chars=fallback_chars,
                        trim_chars=trim_chars, trim_share=trim_share, thread_block_chars=thread_block_chars)
    return text, codec, None, warns
