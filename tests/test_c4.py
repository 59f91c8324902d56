"""C4 rules (stages/c4.py): B18, line cleaning by hand, page rules, LDNOOBW, decide()."""
import json

import pyarrow as pa
import pytest

from datapipe.stage import registry
from datapipe.stages import c4

GOOD = ("The farmers walked to their fields at dawn. The bakery sold warm bread to everyone. "
        "Children played near the old stone bridge. The river was calm in the evening. "
        "Everyone went home before the rain started.")  # 5 sentences of >= 3 words


def run(texts, lang="en", **cfg):
    langs = lang if isinstance(lang, list) else [lang] * len(texts)
    t = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts, "lang": langs, "url": [""] * len(texts)})
    return c4.C4(c4.C4Config(**cfg))(t).to_pylist()


def test_case_b18(cases_dir):
    rows = [json.loads(x) for x in (cases_dir / "B18.jsonl").read_text().splitlines() if x.strip()]
    out = dict(zip([x["id"] for x in rows], run([x["text"] for x in rows])))
    assert out["plain"]["reject_reason"] is None and out["plain"]["c4_curly_bracket"] is False
    assert out["braces"]["reject_reason"] == "c4:curly_bracket" and out["braces"]["c4_curly_bracket"] is True
    # Switched off, the brace is no longer a reason (the page then fails on its 3 sentences).
    off = run([rows[1]["text"]], filter_curly_bracket=False)[0]
    assert off["reject_reason"] == "c4:min_sentences" and off["c4_sentence_count"] == 3


def test_line_cleaning_by_hand():
    text = "\n".join([
        "Hello there my friend.",              # kept
        "This site uses cookies, okay.",       # policy phrase -> dropped
        "Short.",                              # 1 word < 3 -> dropped
        "Please enable JavaScript to view.",   # javascript -> dropped
        "The end is near [1].",                # kept, citation removed
        "",                                    # blank: not a line
        "Is it? Yes! It is.",                  # kept (3 sentences)
        "no terminal punctuation here",        # dropped
    ])
    r = run([text])[0]
    assert r["c4_lines"] == 7 and r["c4_lines_kept"] == 3
    # sentences: 1 + 1 + 3 = 5 -> kept, and the text is the cleaned lines.
    assert r["c4_sentence_count"] == 5 and r["reject_reason"] is None
    assert r["text"] == "Hello there my friend.\nThe end is near.\nIs it? Yes! It is."


def test_rejected_document_keeps_original_text():
    text = "Only one sentence here.\nAnd a second one."
    r = run([text])[0]
    assert r["reject_reason"] == "c4:min_sentences" and r["c4_sentence_count"] == 2
    assert r["text"] == text
    assert run([text], modify_text=False, min_sentences=1)[0]["text"] == text


def test_lorem_ipsum_and_order_of_page_rules():
    assert run([GOOD + " Lorem ipsum dolor sit amet."])[0]["reject_reason"] == "c4:lorem_ipsum"
    # A brace only in a line dropped for lacking punctuation does not reach the cleaned text.
    r = run([GOOD + "\nvar x = {a: 1}"])[0]
    assert r["c4_curly_bracket"] is False and r["reject_reason"] is None


def test_bad_words_whole_words_only():
    # "class", "assignment" and "grass" contain "ass" but are not the word.
    clean = GOOD + " The class assignment was about grass."
    dirty = GOOD + " He called him an ass twice, ass."
    out = run([clean, dirty])
    assert out[0]["c4_bad_word_count"] == 0 and out[0]["reject_reason"] is None
    assert out[1]["c4_bad_word_count"] == 2 and out[1]["reject_reason"] == "c4:bad_words"


def test_bad_words_phrases_and_languages(tmp_path):
    (tmp_path / "en").write_text("blue waffle\nfoo\n", encoding="utf-8")
    (tmp_path / "zh").write_text("乳\n坏词\n", encoding="utf-8")
    out = run([GOOD + " A blue waffle appeared.", GOOD, "这是坏词。牛乳很好。"],
              lang=["en", "en", "zh"], bad_words_dir=str(tmp_path), bad_words_langs=["en", "zh"], min_sentences=1)
    assert [r["c4_bad_word_count"] for r in out] == [1, 0, 1]  # zh: "坏词" substring; 1-char "乳" ignored
    # German has no list here and is not asked for: signal null, no rejection.
    de = run([GOOD], lang="de", bad_words_dir=str(tmp_path))[0]
    assert de["c4_bad_word_count"] is None and de["reject_reason"] is None


def test_missing_word_list_folder_fails_fast(tmp_path):
    st = c4.C4(c4.C4Config(bad_words_dir=str(tmp_path / "nope")))
    with pytest.raises(FileNotFoundError):
        st.check()


def test_decide_from_columns():
    sig = {"c4_lorem_ipsum": False, "c4_curly_bracket": True, "c4_bad_word_count": 0, "c4_sentence_count": 9}
    assert c4.C4.decide(sig, c4.C4Config()) == "c4:curly_bracket"
    assert c4.C4.decide(sig, c4.C4Config(filter_curly_bracket=False)) is None
    assert c4.C4.decide({**sig, "c4_curly_bracket": False, "c4_sentence_count": 4}, c4.C4Config()) == "c4:min_sentences"
    assert c4.C4.decide({**sig, "c4_curly_bracket": False, "c4_bad_word_count": None}, c4.C4Config()) is None


def test_wiki_reference_is_rejected_only_by_the_word_list(data_dir):
    text = (data_dir / "golden/cs336_a4/high_quality_wiki_reference.txt").read_text()
    r = run([text])[0]
    # The SEP "Anarchism" article uses "domination", an LDNOOBW entry: C4's list is that blunt.
    assert r["reject_reason"] == "c4:bad_words"
    assert run([text], filter_bad_words=False)[0]["reject_reason"] is None
    assert registry()["c4"] is c4.C4


def test_reference_code_line_rules():
    """Line rules as TFDS c4_utils (and datatrove's port) write them."""
    text = "\n".join([
        "We waited and waited for news...",    # ends in "...": dropped (c4_utils drops ellipsis lines)
        "Then it came to us…",                 # "…" too: dropped
        "x = y.",                              # 3 whitespace tokens ("=" counts): kept
        "Please enable JavaScript {now}.",     # javascript line: dropped before the brace test
    ])
    r = run([text], min_sentences=1)[0]
    assert r["c4_lines_kept"] == 1 and r["c4_curly_bracket"] is False and r["reject_reason"] is None
    assert r["text"] == "x = y."


def test_title_abbreviation_is_no_sentence_end():
    # "Dr." and "Mrs." precede names: 2 sentence ends, not 4.
    assert c4.W.count_sentences(["We met Dr. Amanda Pinder today. Mrs. Young came too."]).tolist() == [2]
    assert c4.W.count_tokens(["URL = f\"x{q}\"", "日本語", ""]).tolist() == [3, 3, 0]
