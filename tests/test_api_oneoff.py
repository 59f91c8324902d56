"""The Python API for one-off use: one text in, label and score out; one name (``score``,
``label``, ``skipped``) for every stage's main number; a warning and a column when a stage skips a
text for its language; typed ``dedup(texts=...)``/``dedup(paths=...)``; ``pii`` counts null for
kinds it was not asked to check, a bad kind refused at ``get``; one extraction sandbox child for
many ``get("extract")`` objects."""
from __future__ import annotations

import json
import threading
import warnings
from pathlib import Path

import pytest

import datapipe
from datapipe.api.stage_score import SkippedTextWarning
from datapipe.stages import get

REPO = Path(__file__).resolve().parent.parent
GERMAN = "Der Hund schläft im Haus, und die Katze sitzt auf dem warmen Dach in der Sonne."
SHOUT = "THIS IS A COMMENT WRITTEN IN CAPITAL LETTERS ABOUT THE WEATHER AND THE NEWS TODAY"


def test_score_one_text_returns_label_and_score():
    lid = get("langid")
    label, score = lid.score(GERMAN)
    row = lid.apply([GERMAN]).to_pylist()[0]
    assert label == "de" == row["lang"] and score == pytest.approx(row["lang_score"]) and 0.5 < score <= 1.0
    q = get("quality_classifier")
    res = q.score(GERMAN * 3, lang="en")
    labels = json.loads((REPO / "classifiers" / "models" / "quality_wiki_cc.json").read_text())["labels"]
    assert set(labels) == {"wiki", "cc"}
    assert res.label == ("wiki" if res.score >= 0.5 else "cc") and res.kept is (res.reason is None)
    assert res.signals["quality_score"] == pytest.approx(res.score) and res.skipped is None
    with pytest.raises(TypeError, match="one text"):
        q.score([GERMAN])


@pytest.mark.parametrize("name,column", [("langid", "lang_score"), ("quality_classifier", "quality_score"),
                                         ("nsfw", "nsfw_score"), ("toxicity", "toxicity_score")])
def test_every_scoring_stage_has_a_score_column(name, column):
    t = get(name).apply([GERMAN, "A plain English sentence about cooking rice and beans at home."], lang="en")
    assert t.column("score").to_pylist() == pytest.approx(t.column(column).to_pylist())
    assert all(v is not None for v in t.column("label").to_pylist())
    assert t.column("skipped").to_pylist() == [None, None]


def test_a_text_skipped_for_its_language_warns_and_says_why():
    nsfw = get("nsfw")
    with pytest.warns(SkippedTextWarning, match=r"nsfw: 1 of 2 text\(s\) not scored: language zh"):
        t = nsfw.apply([SHOUT, SHOUT], lang=["zh", "en"])
    rows = t.to_pylist()
    assert rows[0]["skipped"] == "lang zh not in nsfw.languages [en]" and rows[0]["score"] is None
    assert rows[0]["nsfw_score"] is None and rows[0]["kept"] and rows[0]["label"] is None
    assert rows[1]["skipped"] is None and rows[1]["score"] is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error", SkippedTextWarning)
        assert nsfw.score(SHOUT, lang="en").skipped is None


def test_dedup_takes_texts_or_paths_never_guessing(tmp_path):
    files = []
    for k, text in enumerate(["one two three four five six seven"] * 2 + ["something else entirely here"]):
        files.append(tmp_path / f"d{k}.txt")
        files[-1].write_text(text)
    names = [str(f) for f in files]
    with pytest.raises(ValueError, match=r"name existing files .*paths=\[\.\.\.\].*texts=\[\.\.\.\]"):
        datapipe.dedup(names)
    by_path = datapipe.dedup(paths=names)
    assert by_path.ids == names and by_path.clusters == [[names[0], names[1]]]
    as_text = datapipe.dedup(texts=names)  # the strings themselves: three distinct short texts
    assert as_text.ids == ["00000000", "00000001", "00000002"] and as_text.clusters == []
    assert datapipe.dedup(texts=["a b c d e f", "a b c d e f"]).reasons == {"00000001": "dedup:exact"}
    with pytest.raises(TypeError):
        datapipe.dedup(["x"], texts=["y"])


def test_pii_counts_null_for_kinds_not_checked_and_refuses_bad_kinds_at_get():
    row = get("pii", kinds=["email"]).apply(["write to ann@example.org or call +1 202 555 0143"],
                                            lang="en").to_pylist()[0]
    assert row["pii_email_count"] == 1 and row["pii_phone_count"] is None and row["pii_ip_count"] is None
    full = get("pii").apply(["write to ann@example.org or call +1 202 555 0143"], lang="en").to_pylist()[0]
    assert (full["pii_email_count"], full["pii_phone_count"], full["pii_ip_count"]) == (1, 1, 0)
    with pytest.raises(ValueError, match=r"pii\.kinds\.0: .*'email', 'ip' or 'phone'"):
        get("pii", kinds=["emial"])


def test_extract_objects_share_one_sandbox_child(monkeypatch):
    from datapipe.stages.lib import extract_sandbox

    starts = []
    real = extract_sandbox.Sandbox._start
    monkeypatch.setattr(extract_sandbox.Sandbox, "_start", lambda self: (starts.append(1), real(self)))
    page = "<html><body><article><p>" + "A paragraph of real text about gardens. " * 8 + "</p></article></body></html>"
    out = []

    def body():  # a thread of its own: no child of an earlier test in this thread
        for _ in range(3):
            out.append(get("extract").apply([page]).column("text").to_pylist()[0])

    th = threading.Thread(target=body)
    th.start()
    th.join()
    assert len(out) == 3 and len(set(out)) == 1 and "gardens" in out[0]
    assert len(starts) == 1
