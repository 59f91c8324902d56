"""The safety evaluation set: real pages, the same pages with toxic or sexual sentences inserted,
and benign pages about sex education, medicine, crime news and names that contain listed words.

Built at run time (deterministic) from ``warc/realpages-1171.warc.gz`` and
``benchmarks/data/safety_sentences.jsonl``; rules and provenance in ``benchmarks/data/SAFETY_SET.md``.
Every item has a ``split``: ``dev`` pages and sentences were used to choose thresholds (and the
models never saw ``test`` pages: their recipes read only ``dev`` pages), ``test`` is reported.
"""
from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
SENTENCES = HERE / "data" / "safety_sentences.jsonl"
PAGE_LABELS = HERE / "data" / "safety_pages.json"
POSITIONS = ("start", "middle", "end")


@lru_cache(maxsize=1)
def english_pages() -> tuple[dict, ...]:
    """Main-content text of the English pages of realpages (extract stage defaults, lid.176 en >= 0.65,
    >= 50 words), each with ``url``, ``split`` and ``text``."""
    from datapipe.classifiers.data import page_split
    from datapipe.env import shared_data
    from datapipe.io.readers import read_warc
    from datapipe.models import resolve_model
    from datapipe.stages.langid import load_fasttext, predict_languages
    from datapipe.stages.lib.extract_page import extract_one

    lid = load_fasttext(resolve_model("lid.176.ftz"))
    out = []
    for item in read_warc(str(shared_data() / "warc" / "realpages-1171.warc.gz")):
        row = item.row
        if item.status != "document" or "payload" not in row:
            continue
        try:
            text = extract_one(row["payload"], row.get("charset"), main_content=True)[0]
        except Exception:  # noqa: BLE001 - a page that does not extract is not in the set
            continue
        if not text or len(text.split()) < 50:
            continue
        lang, score = predict_languages(lid, [text], 100_000)[0]
        if lang == "en" and score >= 0.65:
            out.append({"url": row["url"], "split": page_split(row["url"]), "text": text})
    return tuple(out)


def sentences() -> list[dict]:
    return [json.loads(line) for line in SENTENCES.read_text(encoding="utf-8").splitlines() if line.strip()]


def jigsaw_toxic() -> list[dict]:
    """The 13 toxic Jigsaw comments as insertable items, alternately dev / test (by row order)."""
    from datapipe.classifiers.recipes import read_jigsaw

    texts, y = read_jigsaw()
    tox = [" ".join(t.split()) for t, lab in zip(texts, y) if lab]
    return [{"id": f"jigsaw-{i:02d}", "split": "dev" if i % 2 == 0 else "test", "kind": "toxic",
             "topic": "jigsaw", "text": t} for i, t in enumerate(tox)]


def page_labels() -> dict[str, str]:
    """URL -> why the page is not clean as crawled (hand-checked; see SAFETY_SET.md)."""
    return json.loads(PAGE_LABELS.read_text(encoding="utf-8")) if PAGE_LABELS.is_file() else {}


def insert(text: str, extra: list[str], position: str) -> str:
    """``text`` with the ``extra`` lines put before its first line, after its middle line or after its last."""
    lines = text.split("\n")
    at = {"start": 0, "middle": len(lines) // 2, "end": len(lines)}[position]
    return "\n".join(lines[:at] + extra + lines[at:])


def build(split: str, seed: int = 15) -> list[dict]:
    """Items of one split: ``{"id", "kind", "text", "k", "position", "topic"}``.

    ``kind``: ``clean`` (a page as crawled), ``toxic`` / ``sexual`` (that page with k = 1, 2, 3
    sentences of the split's pool inserted at the start, middle or end, cycling), ``benign`` (each
    benign paragraph alone, and inserted into three pages at the three positions), ``unclean``
    (a page that held toxic or sexual text already: reported apart, in neither rate).
    """
    rng = random.Random(f"{seed}:{split}")
    pages = [p for p in english_pages() if p["split"] == split]
    unclean = page_labels()
    pool = {k: [s for s in sentences() + jigsaw_toxic() if s["split"] == split and s["kind"] == k]
            for k in ("toxic", "sexual", "benign")}
    items = []
    clean = []
    for p in pages:
        if p["url"] in unclean:
            items.append({"id": p["url"], "kind": "unclean", "text": p["text"], "k": 0, "position": None,
                          "topic": unclean[p["url"]]})
        else:
            clean.append(p)
            items.append({"id": p["url"], "kind": "clean", "text": p["text"], "k": 0, "position": None, "topic": None})
    for kind in ("toxic", "sexual"):
        for i, p in enumerate(clean):
            k, pos = 1 + i % 3, POSITIONS[(i // 3) % 3]
            picked = rng.sample(pool[kind], k)
            items.append({"id": f"{kind}:{p['url']}", "kind": kind, "text": insert(p["text"], [s["text"] for s in picked], pos),
                          "k": k, "position": pos, "topic": ",".join(s["id"] for s in picked)})
    for j, b in enumerate(pool["benign"]):
        items.append({"id": b["id"], "kind": "benign", "text": b["text"], "k": 1, "position": "alone", "topic": b["topic"]})
        for q, pos in enumerate(POSITIONS):
            p = clean[(3 * j + q) % len(clean)]
            items.append({"id": f"{b['id']}:{pos}", "kind": "benign", "text": insert(p["text"], [b["text"]], pos),
                          "k": 1, "position": pos, "topic": b["topic"]})
    return items
