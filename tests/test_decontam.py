"""Decontamination: the normaliser and hash against a hand-worked example, offsets of a planted item,
whole matches of short items, the missing-index error, and a rerun after a config change.

The items here are made up for the tests (no benchmark text is committed); the index is built by
the documented command from a JSONL file of them.
"""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from datapipe.cli.main import main as cli_main
from datapipe.stages import get

MASK = (1 << 64) - 1
ITEMS = [
    {"id": "q7", "question": "A farmer has seventeen sheep and all but nine run away into the dark forest.",
     "answer": "How many sheep does the farmer have left? Nine sheep remain."},
    {"id": "s1", "question": "Which metal melts in a warm human hand?", "answer": "Gallium"},  # 8 words
    {"id": "s2", "question": "Name a bird", "answer": "Robin"},  # 3 words: under min_words, left out
]


def fmix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & MASK
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & MASK
    return x ^ (x >> 33)


def word_hash(word: str) -> int:
    """poly64 as documented: fmix64(sum_j (b_j + 1) * Q**j + L) over the word's UTF-8 bytes."""
    q, p = 0x243F6A8885A308D3, 0
    for j, b in enumerate(word.encode()):
        p = (p + (b + 1) * pow(q, j, 1 << 64)) & MASK
    return fmix64((p + len(word.encode())) & MASK)


def gram_hash(ws: list[str]) -> int:
    mult = [((0xB7E151628AED2A6B + 2 * k * 0x9E3779B97F4A7C15) & MASK) | 1 for k in range(len(ws))]
    return fmix64(sum(word_hash(w) * m for w, m in zip(ws, mult)) & MASK)


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("decontam")
    src = d / "items.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ITEMS))
    out = d / "index.npz"
    rc = cli_main(["decontam", "index", "--out", str(out), "--no-evalsets", "--no-wikitext", "--jsonl", str(src),
                   "--fields", "question,answer", "--name", "toyqa", "--id-field", "id"])
    assert rc == 0 and out.is_file()
    return out


def test_normalised_words_and_hashes_by_hand():
    from datapipe.stages.lib.decontam_text import gram_hashes, words

    text = "Q: The Ｑuick-Brown fox &amp; the\nlazy DOG!"
    w = words([text])
    # "Q:" is a label; NFKC folds the full-width Ｑ; "-", "&" (from &amp;), "!" separate; case folds.
    expect = ["the", "quick", "brown", "fox", "the", "lazy", "dog"]
    assert [text[a:b].casefold().replace("ｑ", "q") for a, b in zip(w.start, w.end)] == expect
    assert list(zip(w.start.tolist(), w.end.tolist()))[:3] == [(3, 6), (7, 12), (13, 18)]
    assert w.hashes.tolist() == [word_hash(x) for x in expect]
    h, pos = gram_hashes(w, 3)
    assert h.tolist() == [gram_hash(expect[i:i + 3]) for i in range(5)]
    assert pos.tolist() == [0, 1, 2, 3, 4]


def test_planted_item_offsets_and_drop(index):
    item = ITEMS[0]["question"] + "\n" + ITEMS[0]["answer"]
    before = "Weekend puzzles for the family.\nTry this one:\n"
    page = before + "Question: " + item.upper() + "\nMore puzzles next week, thanks for reading."
    st = get("decontam", index=str(index), action="drop")
    row = st.apply([page]).to_pylist()[0]
    start = len(before) + len("Question: ")
    # The span runs from the item's first word to the end of its last word ("remain", not the full stop).
    assert row["decontam_spans"] == [{"start": start, "end": start + len(item) - 1}]
    assert row["decontam_items"] == ["toyqa/q7"] and row["decontam_benchmarks"] == ["toyqa"]
    assert row["decontam_ngrams"] == 26 - 13 + 1  # 15 + 11 words in the item, every 13-gram matched
    assert row["reject_reason"] == "decontam:toyqa"


def test_remove_cuts_paragraphs_and_partial_quote(index):
    words = ITEMS[0]["question"].rstrip(".").split()
    quote = " ".join(words[1:14])  # any 13 contiguous words
    rest = ["Intro line stays, and it says what the page is about: old riddles and how they travel.",
            "Last line stays too; it is long enough to keep the matched part under half of the page."]
    page = rest[0] + "\nHe said: " + quote + " and laughed.\n" + rest[1]
    row = get("decontam", index=str(index)).apply([page]).to_pylist()[0]
    assert row["decontam_ngrams"] == 1
    assert row["text"] == "\n".join(rest)
    assert row["reject_reason"] is None and 0 < row["decontam_share"] < 0.5


def test_short_item_matches_whole_only(index):
    st = get("decontam", index=str(index), action="drop")
    full = "Trivia night! which METAL melts in a warm human hand? (A) gallium"
    part = "Trivia night! Which metal melts in a warm human hand? Nobody knew."
    tiny = "Name a bird: Robin."
    rows = st.apply([full, part, tiny]).to_pylist()
    assert rows[0]["decontam_items"] == ["toyqa/s1"] and rows[0]["decontam_ngrams"] == 1
    assert rows[0]["decontam_spans"] == [{"start": 14, "end": len(full)}]
    assert rows[1]["decontam_items"] == [] and rows[2]["decontam_items"] == []


def _manifest(tmp: Path, out: Path, inputs: Path, cfg: dict) -> Path:
    m = tmp / f"m-{abs(hash(json.dumps(cfg, sort_keys=True)))}.yaml"
    m.write_text(f"name: decontam-test\ninputs: {{paths: [{json.dumps(str(inputs))}]}}\noutput: {json.dumps(str(out))}\n"
                 f"cluster: {{workers: 1, dashboard_address: '127.0.0.1:0'}}\nbatch_size: 4\n"
                 f"stages:\n  - decontam: {json.dumps(cfg)}\nreport: {{enabled: false}}\n")
    return m


def _run(manifest: Path) -> tuple[int, str]:
    err = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        mp.setenv("COLUMNS", "400")  # one line as the terminal shows it unwrapped
        rc = cli_main(["run", str(manifest), "--no-progress"])
    return rc, err.getvalue()


def test_missing_index_is_one_line_exit_2(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "a", "text": "hello"}) + "\n")
    rc, err = _run(_manifest(tmp_path, tmp_path / "run", docs, {"index": str(tmp_path / "none.npz")}))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1, err
    assert "none.npz not found" in lines[0] and "datapipe decontam index" in lines[0]
    assert not (tmp_path / "run").exists()


def _tree(out: Path) -> dict:
    return {f"{k}/{f.name}": pq.read_table(f).to_pylist()
            for k in ("documents", "rejected", "errors") for f in sorted((out / k).glob("*.parquet"))}


OTHER = ["Puzzle corner: every week we print a riddle sent in by a reader, with the story of where it came from.",
         "See you next week for more puzzles, answers to last week's riddles, and the letters you sent us."]


def test_rerun_after_config_change_equals_fresh(index, tmp_path):
    item = ITEMS[0]["question"] + " " + ITEMS[0]["answer"]
    texts = ["A clean page about sheep farming in the hills, nothing else here.",
             OTHER[0] + "\n" + item + "\n" + OTHER[1],
             item, "Which metal melts in a warm human hand? Gallium, of course."]
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    a, b = {"index": str(index), "action": "signals"}, {"index": str(index), "action": "remove"}
    rerun, fresh = tmp_path / "rerun", tmp_path / "fresh"
    assert _run(_manifest(tmp_path, rerun, docs, a))[0] == 0
    assert _run(_manifest(tmp_path, rerun, docs, b))[0] == 0
    assert _run(_manifest(tmp_path, fresh, docs, b))[0] == 0
    got, want = _tree(rerun), _tree(fresh)
    assert got == want
    kept = {r["warc_record_id"]: r for f, rows in want.items() if f.startswith("documents") for r in rows}
    rej = {r["warc_record_id"]: r for f, rows in want.items() if f.startswith("rejected") for r in rows}
    assert kept["d1"]["text"] == "\n".join(OTHER)
    assert rej["d2"]["reject_reason"] == "decontam:toyqa" and "d0" in kept and "d3" in rej
