"""The fast word segmentation (utf8_trim / utf8_split_whitespace, per-text memo) equals the rule's
regex definition (module doc of stages/lib/words.py) exactly, on the edge cases where the two
kernels' character classes differ."""
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from datapipe.stages.lib import words as W

TRICKY = ["", " ", None, "a\x0bb  c\x85d e\x1cf\x1fg", "中文 text 日本語です", "  lead and trail  ", "...", "—",
          "x\u3000y\u00a0z\u2028w", "ร้านอาหาร test", "#tag (paren) «quote» don't U.S. 3.14", "a\tb\nc\rd\x0ce",
          "emoji 😀 word 😀x x😀", "\u200bzero\u200bwidth", "end."]


def regex_words(texts) -> list:
    """The definition: units spaced, split on runs of [\\s\\p{Z}], P/S stripped at both ends, empties dropped."""
    spaced = pc.replace_substring_regex(W._as_array(texts), W._UNIT, r" \1 ")
    out = []
    for toks in pc.split_pattern_regex(spaced, r"[\s\p{Z}]+").to_pylist():
        stripped = pc.replace_substring_regex(pa.array(toks, pa.string()), W._EDGE_PUNCT, "").to_pylist()
        out.append([t for t in stripped if t])
    return out


def test_fast_words_equal_regex_definition():
    arr = pa.array(TRICKY, pa.string())
    assert W.split_words(arr).to_pylist() == regex_words(arr)
    # Hand-checked: vertical tab / NEL / U+001C are no word breaks for the rule (Arrow alone splits there).
    assert W.words("a\x0bb c") == ["a\x0bb", "c"]
    assert W.words("中文 ok") == ["中", "文", "ok"]
    assert W.words("«quote» don't...") == ["quote", "don't"]


def test_edge_set_is_re2s_punctuation_and_symbols():
    s = W._edge_chars()
    probe = pa.array([c for c in "a.,;—«»$€+<=>^`|~#%&*@\\/_-" + "\u00a7\u2020\U0001F600" + "é9 \u0301中"])
    regex = pc.match_substring_regex(probe, r"^[\pP\pS]$").to_pylist()
    assert [c in s for c in probe.to_pylist()] == regex
    assert "." in s and "😀" in s and "a" not in s and "9" not in s


def test_memo_gives_subsets_and_reorders_exactly():
    texts = pa.array([f"word{i} the same, text {i % 3}." for i in range(20)] + TRICKY[3:], pa.string())
    full = regex_words(texts)
    assert W.split_words(texts).to_pylist() == full
    idx = np.array([5, 0, 19, 3, 3, 22, 7])  # subset, reordered, one repeated
    sub = texts.take(pa.array(idx))
    assert W.split_words(sub).to_pylist() == [full[i] for i in idx]
    mixed = pa.concat_arrays([sub, pa.array(["brand new text", "中文"], pa.string())])  # hits and misses
    assert W.split_words(mixed).to_pylist() == [full[i] for i in idx] + [["brand", "new", "text"], ["中", "文"]]
