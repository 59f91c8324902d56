"""Segmentation used by the Gopher, C4 and FineWeb rules (stages/words.py)."""
import numpy as np

from datapipe.stages.lib import words as W


def test_space_delimited_words_strip_edge_punctuation():
    # '#', '...' and ',' are not words; inner apostrophes and dots stay inside a word.
    assert W.words("Hello, world! don't U.S. #tag ... 3.14") == ["Hello", "world", "don't", "U.S", "tag", "3.14"]


def test_unicode_spaces_separate_words():
    assert W.words("a\u00a0b\u3000c\u2009d") == ["a", "b", "c", "d"]


def test_chinese_is_cut_into_characters_not_on_whitespace():
    assert W.words("我爱北京。") == ["我", "爱", "北", "京"]
    # Latin inside Chinese stays one word: segmentation goes by script, not by document language.
    assert W.words("我用Python写代码") == ["我", "用", "Python", "写", "代", "码"]


def test_japanese_kana_and_kanji_are_units():
    assert W.words("東京へ行く") == ["東", "京", "へ", "行", "く"]


def test_thai_units_keep_combining_marks():
    # สวัสดี = ส, ว+ั (mark), ส, ด+ี (mark): four base characters with their marks.
    assert W.words("สวัสดี") == ["ส", "วั", "ส", "ดี"]


def test_lines_drop_blank_and_strip():
    assert W.lines("a\r\n\n  b  \n \t\n\nc\u2028d") == ["a", "b", "c", "d"]


def test_paragraphs_split_on_blank_lines():
    assert W.paragraphs("a\nb\n\n \nc\r\n\r\nd\n") == ["a\nb", "c", "d"]


def test_sentence_count():
    # 3 terminated sentences + 1 unterminated trailing fragment.
    assert W.count_sentences(["One. Two! Three? four"]).tolist() == [4]
    # A decimal point is not a sentence end.
    assert W.count_sentences(["3.14 is pi."]).tolist() == [1]
    # CJK full stops need no following space.
    assert W.count_sentences(["你好。我很好！谢谢"]).tolist() == [3]
    assert W.count_sentences([""]).tolist() == [0]


def test_terminal_punctuation():
    got = W.ends_with_terminal(["Hi.", "Hi", '"Hi"', "你好。", "wait…", "list:"]).tolist()
    assert got == [True, False, True, True, True, False]


def test_duplicate_mask_is_per_row_and_keeps_first_occurrence():
    keys = np.array([1, 2, 1, 1, 2], dtype=np.uint64)
    rows = np.array([0, 0, 0, 1, 1])
    assert W.duplicate_mask(keys, rows).tolist() == [False, False, True, False, False]


def test_language_codes():
    assert W.base_lang("zh-Hant") == "zh" and W.is_unsegmented("zh-Hant")
    assert W.base_lang(None) == "unknown" and not W.is_unsegmented("en")


def test_batch_rows_stay_aligned_with_empty_and_null_texts():
    ws = W.split_words(["", None, "a b", "  "])
    assert ws.to_pylist() == [[], [], ["a", "b"], []]
    assert W.row_index(ws).tolist() == [2, 2]
