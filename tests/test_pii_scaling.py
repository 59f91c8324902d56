"""PII masking costs linear time in the number of phone numbers, and a page's phone parsing is
capped by a count (``max_phone_candidates``), not by a clock."""
import time

import pyarrow as pa

from datapipe.stages.pii import PIIMask, TooManyCandidates, find_pii, mask_pii


def _numbers(n: int) -> str:
    # NANP numbers after a cue, one line: every one is masked (555-0000..555-9999 repeat, distinct spans)
    return " ".join(f"Tel: (415) 555-{i % 10000:04d}." for i in range(n))


def _cpu_seconds(text: str) -> tuple[float, int]:
    t = time.process_time()
    _, counts = mask_pii(text, "US")
    return time.process_time() - t, counts["phone"]


def test_phone_masking_is_linear():
    small, big = _numbers(1_000), _numbers(8_000)
    t_small, n_small = _cpu_seconds(small)
    t_big, n_big = _cpu_seconds(big)
    assert (n_small, n_big) == (1_000, 8_000)
    # 8x the numbers: linear work takes ~8x the time; the pairwise overlap test took ~64x
    # (measured before the fix: 2k 0.5 s, 16k 29 s of CPU).
    assert t_big < 20 * max(t_small, 0.05), (t_small, t_big)
    assert t_big < 20.0


def test_overlap_resolution_unchanged():
    # An e-mail holding digits beats a phone span over the same characters; the longer of two
    # overlapping spans of one kind wins; disjoint spans all stay.
    text = "mail 4155550132@example.com or call (415) 555-0132 and 10.0.0.1"
    spans = find_pii(text, "US")
    kinds = [(text[s:e], k) for s, e, k in spans]
    assert kinds == [("4155550132@example.com", "email"), ("(415) 555-0132", "phone"), ("10.0.0.1", "ip")]


def test_candidate_cap_rejects_the_page_not_the_batch():
    stage = PIIMask(PIIMask.Config(max_phone_candidates=100))
    texts = [_numbers(50), _numbers(150), "no numbers here"]
    out = stage(pa.table({"text": texts, "host": [None] * 3, "lang": ["en"] * 3}))
    assert out.column("reject_reason").to_pylist() == [None, "pii:too_many_phone_candidates", None]
    assert out.column("pii_phone_count").to_pylist() == [50, 0, 0]
    assert out.column("text").to_pylist()[1] == texts[1]  # not half masked
    assert out.column("text").to_pylist()[0].count("|||PHONE_NUMBER|||") == 50
    try:
        find_pii(_numbers(150), "US", max_phone_candidates=100)
    except TooManyCandidates:
        pass
    else:
        raise AssertionError("no TooManyCandidates over the cap")
