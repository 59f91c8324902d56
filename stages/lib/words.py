"""Language-aware segmentation shared by the rule-based quality stages (Gopher, C4, FineWeb).

Everything works on whole Arrow columns (RE2 through ``pyarrow.compute``) so a batch of documents
is segmented without creating a Python string per word.

**Words.** Segmentation goes by *script*, so mixed text (English names in a Chinese page) is split
correctly whatever the document's language:

* Scripts written with spaces (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Hangul, ...):
  split on whitespace, then strip leading/trailing punctuation and symbols (Unicode ``P``/``S``)
  from each token and drop tokens that become empty. ``don't``, ``U.S`` and ``3.14`` stay one word;
  ``#``, ``...``, ``•`` and ``—`` are not words.
* Han, Hiragana, Katakana, Bopomofo: every character is one unit. Chinese and Japanese have no
  spaces, and a dictionary segmenter (jieba, MeCab) needs dictionaries and is 10-100x slower; a
  character is the unit that needs neither. Rules whose thresholds assume words (mean word length,
  short lines) are therefore skipped for these languages (see ``UNSEGMENTED``).
* Thai, Lao, Khmer, Myanmar, Tibetan: one unit per base character with its combining marks
  (an approximate grapheme). Same caveat as above.

The document's ``lang`` decides which *rules* apply (stop words, word-length rules), not how text
is cut. **Lines** are the text split on line breaks, stripped, blank ones dropped ("blank lines are
not lines", Rae et al. 2021). **Paragraphs** are separated by one or more blank lines.
**Sentences** end at ``. ! ? …`` (followed by space or end of text) or at ``。！？`` (no space
needed); only a short list of English titles (``Dr.``, ``Mrs.``, ``St.`` ...) is not an end (C4 used
NLTK punkt, whose learned abbreviations need a download).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Languages written without spaces between words: word units are characters/graphemes there.
UNSEGMENTED = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "dz", "yue", "wuu", "gan", "lzh"})

_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Bopomofo}"
_SEA = r"\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}"
# Put spaces around every CJK character and every SE-Asian base+marks cluster.
_UNIT = rf"([{_CJK}]|[{_SEA}]\pM*)"
_EDGE_PUNCT = r"^[\pP\pS]+|[\pP\pS]+$"
_BREAKS = r"\r\n|[\r\x{0b}\x{0c}\x{85}\x{2028}\x{2029}]"

#: Characters that end a sentence or a "line with terminal punctuation": C4's period, exclamation
#: and question marks and closing quotes, plus their CJK, Devanagari, Arabic and Ethiopic forms.
TERMINAL = ".!?\"'”’»」』…。！？．।॥؟۔።"
_TERMINAL_END = "[" + TERMINAL.replace('"', '\\"') + "]$"
# A sentence ends at Latin-style marks followed by space/end, or at CJK full stops anywhere.
_SENT_END = r"[.!?…।॥؟۔።]+[\"'”’»」』)]*(?:\s+|$)|[。！？．]+[」』”’)]*"
# Titles before a name ("Dr. Amanda Pinder") end no sentence: subtracted from the sentence ends.
# A short English list instead of punkt's learned one (which needs a download).
_TITLE_ABBREV = r"\b(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Mt|Rev|Gen|Col|Capt|Lt|Sgt|Gov|Sen|Rep|vs)\.\s+\S"
_TRAILING_FRAGMENT = r"[\pL\pN][^.!?…。！？．।॥؟۔።]*$"


def base_lang(lang: str | None) -> str:
    """``'zh-Hant'`` -> ``'zh'``; None -> ``'unknown'``."""
    if not lang:
        return "unknown"
    return lang.replace("_", "-").split("-")[0].lower()


def is_unsegmented(lang: str | None) -> bool:
    return base_lang(lang) in UNSEGMENTED


def _as_array(texts) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not isinstance(texts, pa.Array):
        texts = pa.array(list(texts), type=pa.string())
    if pa.types.is_large_string(texts.type):
        texts = texts.cast(pa.string())
    return pc.fill_null(texts, "")


def normalize_breaks(texts) -> pa.Array:
    """All line-break conventions become ``\\n``."""
    return pc.replace_substring_regex(_as_array(texts), _BREAKS, "\n")


def _edge_chars() -> str:
    """Every code point RE2 counts as ``[\\pP\\pS]`` (punctuation or symbol), as one string.

    Asked of RE2 itself (one match over all code points, ~0.1 s once per process), so trimming
    with ``utf8_trim`` strips exactly what ``_EDGE_PUNCT`` strips, whatever Unicode version the
    installed pyarrow carries; the trim is ~7x faster than the regex on every token.
    """
    global _EDGE_SET
    if _EDGE_SET is None:
        cps = np.concatenate([np.arange(0xD800), np.arange(0xE000, 0x110000)])
        enc = "".join(map(chr, cps.tolist())).encode("utf-8")
        nbytes = 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)
        offsets = np.concatenate([[0], np.cumsum(nbytes)]).astype(np.int32)
        allc = pa.StringArray.from_buffers(len(cps), pa.py_buffer(offsets), pa.py_buffer(enc))
        hit = pc.match_substring_regex(allc, r"^[\pP\pS]$").to_numpy(zero_copy_only=False)
        _EDGE_SET = "".join(map(chr, cps[hit].tolist()))
    return _EDGE_SET


_EDGE_SET: str | None = None


def prepare() -> None:
    """Build the per-process tables ``split_words`` needs (``_edge_chars``: ~0.4 s once) now. The
    word-splitting stages call it in ``setup``, at worker start, so the first batch's stage time
    does not carry it (measured: it was most of ``gopher_repetition``'s time on a one-page run)."""
    _edge_chars()
# Arrow's utf8_split_whitespace splits on these too; the word rule ([\s\p{Z}]) does not.
_WS_ARROW_ONLY = r"[\x{0b}\x{1c}-\x{1f}\x{85}]"


def _whitespace_tokens(arr: pa.Array) -> pa.ListArray:
    """``arr`` split on runs of ``[\\s\\p{Z}]`` (a token may be empty at the edges of a text).

    ``utf8_split_whitespace`` (~3x faster than the regex split) for rows holding none of the
    characters only Arrow calls whitespace (``_WS_ARROW_ONLY``), the regex split for the others.
    """
    odd = pc.match_substring_regex(arr, _WS_ARROW_ONLY).to_numpy(zero_copy_only=False)
    if not odd.any():
        return pc.utf8_split_whitespace(arr)
    if odd.all():
        return pc.split_pattern_regex(arr, r"[\s\p{Z}]+")
    fast, slow = np.nonzero(~odd)[0], np.nonzero(odd)[0]
    both = pa.concat_arrays([pc.utf8_split_whitespace(arr.take(pa.array(fast))),
                             pc.split_pattern_regex(arr.take(pa.array(slow)), r"[\s\p{Z}]+")])
    where = np.empty(len(arr), dtype=np.int64)
    where[np.concatenate([fast, slow])] = np.arange(len(arr))
    return both.take(pa.array(where))


def _spaced_units(arr: pa.Array) -> pa.Array:
    """Spaces around every Han/kana/SE-Asian unit; ``arr`` itself when it has none (the usual case)."""
    if not pc.any(pc.match_substring_regex(arr, _UNIT)).as_py():
        return arr
    return pc.replace_substring_regex(arr, _UNIT, r" \1 ")


def _split_words(arr: pa.Array) -> pa.ListArray:
    tokens = _whitespace_tokens(_spaced_units(arr))
    return _map_flat(tokens, lambda f: pc.utf8_trim(f, _edge_chars()), drop_empty=True)


class RowMemo:
    """Results of a row-wise function of texts (text -> list), remembered for this thread's last calls.

    The rule stages of one chain segment the same documents again and again (Gopher repetition,
    Gopher quality and FineWeb all need the words), each time on the rows the stage before kept.
    Keyed by the text itself, a hit is exact whatever filtering or reordering happened in between;
    the rows missed are computed in one call. Memory: the texts and results of ``keep`` calls.
    """

    def __init__(self, fn, keep: int = 3):
        import threading

        self.fn, self.keep, self.local = fn, keep, threading.local()

    def __call__(self, arr: pa.Array) -> pa.ListArray:
        entries = getattr(self.local, "entries", None)
        if entries is None:
            entries = self.local.entries = []
        keys = arr.to_pylist()
        src = np.full(len(keys), -1, dtype=np.int64)  # remembered call per row; -1: to compute
        pos = np.zeros(len(keys), dtype=np.int64)
        for i, k in enumerate(keys):
            for e in range(len(entries) - 1, -1, -1):
                j = entries[e][0].get(k)
                if j is not None:
                    src[i], pos[i] = e, j
                    break
        miss = np.nonzero(src < 0)[0]
        if len(miss) == len(keys):
            out = self.fn(arr)
            self._remember(entries, keys, out)
            return out
        parts, base, start = [], {}, 0
        for e in sorted(set(src[src >= 0].tolist())):
            base[e] = start
            parts.append(entries[e][1])
            start += len(entries[e][1])
        take = np.array([base[e] + p if e >= 0 else 0 for e, p in zip(src.tolist(), pos.tolist())], dtype=np.int64)
        if len(miss):
            new = self.fn(arr.take(pa.array(miss)))
            self._remember(entries, [keys[i] for i in miss], new)
            take[miss] = start + np.arange(len(miss))
            parts.append(new)
        both = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
        return both.take(pa.array(take))

    def _remember(self, entries: list, keys: list, lists: pa.ListArray) -> None:
        entries.append(({k: i for i, k in enumerate(keys)}, lists))
        del entries[:-self.keep]


_words_memo = RowMemo(_split_words)


def split_words(texts) -> pa.ListArray:
    """Words of each text as a list array (one list per text), see the module docstring.

    A text is segmented once per chain, not once per rule stage (``RowMemo``)."""
    return _words_memo(_as_array(texts))


def count_tokens(strings) -> np.ndarray:
    """Whitespace-separated tokens per string, punctuation-only tokens included (``"a = b"`` -> 3),
    with every Han/kana/SE-Asian unit a token of its own. This is ``len(line.split())`` of the C4
    reference code (TensorFlow Datasets ``c4_utils``) for spaced scripts."""
    spaced = _spaced_units(_as_array(strings))
    return pc.count_substring_regex(spaced, r"[^\s\p{Z}]+").to_numpy(zero_copy_only=False).astype(np.int64)


def split_lines(texts) -> pa.ListArray:
    """Non-blank, stripped lines of each text."""
    parts = pc.split_pattern(normalize_breaks(texts), "\n")
    return _map_flat(parts, pc.utf8_trim_whitespace, drop_empty=True)


def split_paragraphs(texts) -> pa.ListArray:
    """Paragraphs (text between blank lines), stripped, empty ones dropped."""
    parts = pc.split_pattern_regex(normalize_breaks(texts), r"\n[ \t\x{a0}\x{3000}]*\n\s*")
    return _map_flat(parts, pc.utf8_trim_whitespace, drop_empty=True)


def count_sentences(texts) -> np.ndarray:
    """Number of sentences per text: sentence ends (less title abbreviations such as ``Dr.``) plus one
    for an unterminated trailing fragment."""
    arr = _as_array(texts)
    ends = pc.count_substring_regex(arr, _SENT_END).to_numpy(zero_copy_only=False)
    ends = ends - pc.count_substring_regex(arr, _TITLE_ABBREV).to_numpy(zero_copy_only=False)
    tail = pc.match_substring_regex(arr, _TRAILING_FRAGMENT).to_numpy(zero_copy_only=False)
    return ends.astype(np.int64) + tail.astype(np.int64)


def ends_with_terminal(strings) -> np.ndarray:
    """Bool per string: ends with a terminal punctuation mark (``TERMINAL``)."""
    return pc.match_substring_regex(_as_array(strings), _TERMINAL_END).to_numpy(zero_copy_only=False)


def has_letter(strings) -> np.ndarray:
    """Bool per string: contains at least one alphabetic character (any script)."""
    return pc.match_substring_regex(_as_array(strings), r"\pL").to_numpy(zero_copy_only=False)


def _map_flat(lists: pa.ListArray, fn, drop_empty: bool) -> pa.ListArray:
    """Apply ``fn`` to the flat values of ``lists`` and (optionally) drop empty strings, keeping rows."""
    offsets = lists.offsets.to_numpy()
    flat = fn(lists.values.slice(offsets[0], offsets[-1] - offsets[0]))
    offsets = offsets - offsets[0]
    if drop_empty:
        keep = pc.greater(pc.utf8_length(flat), 0).to_numpy(zero_copy_only=False)
        flat = flat.filter(pa.array(keep))
        kept_before = np.concatenate([[0], np.cumsum(keep)])
        offsets = kept_before[offsets]
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), flat)


def row_index(lists: pa.ListArray) -> np.ndarray:
    """For each flat value of ``lists``, the index of the row it belongs to."""
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    return np.repeat(np.arange(len(lengths)), lengths)


def lengths(lists: pa.ListArray) -> np.ndarray:
    return pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)


def flat_values(lists: pa.ListArray) -> pa.Array:
    offsets = lists.offsets.to_numpy()
    return lists.values.slice(offsets[0], offsets[-1] - offsets[0])


def char_lengths(strings: pa.Array) -> np.ndarray:
    return pc.utf8_length(strings).to_numpy(zero_copy_only=False).astype(np.int64)


def words(text: str) -> list[str]:
    """Words of one text (convenience for tests and ad-hoc use)."""
    return split_words([text])[0].as_py()


def lines(text: str) -> list[str]:
    return split_lines([text])[0].as_py()


def paragraphs(text: str) -> list[str]:
    return split_paragraphs([text])[0].as_py()


def per_row_sum(values: np.ndarray, rows: np.ndarray, n_rows: int) -> np.ndarray:
    """Sum ``values`` grouped by ``rows`` (row index per value) into ``n_rows`` bins."""
    return np.bincount(rows, weights=values, minlength=n_rows)


_ROW_MIX = np.uint64(0xD6E8FEB86659FD93)


def row_keys(keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """One uint64 per (row, key) pair; distinct pairs collide with probability ~n^2/2^64."""
    with np.errstate(over="ignore"):
        return keys.astype(np.uint64) ^ ((rows.astype(np.uint64) + np.uint64(1)) * _ROW_MIX)


def group_ids(keys: np.ndarray):
    """Group equal keys: (group id per item, index of each group's first item)."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(keys)  # one-key sort; first occurrences found below, no stable sort needed
    k = keys[order]
    new = np.ones(len(keys), dtype=bool)
    new[1:] = k[1:] != k[:-1]
    starts = np.nonzero(new)[0]
    gid = np.empty(len(keys), dtype=np.int64)
    gid[order] = np.cumsum(new) - 1
    return gid, np.minimum.reduceat(order, starts)


def duplicate_mask(keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """True for every item whose (row, key) already occurred earlier in the same row.

    ``keys`` are uint64 hashes or dictionary ids; ``rows`` the row of each item.
    """
    gid, first = group_ids(row_keys(keys, rows))
    out = np.ones(len(keys), dtype=bool)
    out[first] = False
    return out


def string_ids(strings: pa.Array) -> np.ndarray:
    """An integer id per string, equal ids for equal strings (dictionary encoding over the array)."""
    enc = pc.dictionary_encode(strings)
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)


# --- decision helpers shared by the rule stages -------------------------------------------------


def reasons_for_batch(rules, columns: dict, config, n: int) -> list:
    """``stage.first_reason`` for a whole batch of ``n`` rows: ``rules`` are ``stage.Rule``s,
    ``columns`` maps signal name -> array (NaN = null). One reason (or None) a row."""
    out = np.full(n, None, dtype=object)
    open_ = np.ones(n, dtype=bool)
    for rule in rules:
        hit = rule.rejects_array(columns[rule.column], config) & open_
        out[hit] = rule.reason
        open_ &= ~hit
    return out.tolist()


def nan_where(values: np.ndarray, null: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).copy()
    v[null] = np.nan
    return v


def to_arrow(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    """numpy float array with NaN for null -> Arrow array of ``type_`` with nulls."""
    v = np.asarray(values, dtype=np.float64)
    mask = np.isnan(v)
    if pa.types.is_integer(type_):
        return pa.array(np.where(mask, 0, v).astype(np.int64), mask=mask).cast(type_)
    if pa.types.is_boolean(type_):
        return pa.array(np.where(mask, 0, v).astype(bool), mask=mask)
    return pa.array(v, mask=mask, type=type_)
