"""Held-out evaluation texts vs the training pool: the decontamination matcher run before training.

A held-out loss means something only if the proxy never trained on the held-out text. Held-out
documents are disjoint from the training documents by id, but the same text can sit in two
documents (a near-duplicate the run's dedup kept, a Wikipedia article copied onto a crawled page
for the WikiText-2 test). So before any proxy trains, every held-out text (each domain's eval
documents, decoded with the run's tokenizer, and each ``heldout.extra`` text as read from its
files) is indexed with the decontamination stage's matcher (:mod:`decontam_text` normalisation,
``n``-word runs, texts shorter than ``n`` words matched whole from 8 words on) and every training
document of the pool is decoded and scanned against it.

``heldout.overlap``: ``report`` (default) writes and prints what was found; ``refuse`` stops with
one line (exit 2) when any training document overlaps a held-out text; ``off`` skips the check.
The result is written to ``eval/overlap.json`` under the ablation's output (reused on rerun while
the training fingerprint and ``n`` are unchanged) and appears in ranking.md, report.html and
summary.json (``eval_overlap``).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from datapipe.ablate.data import Pool, read_extra_texts, run_tokenizer
from datapipe.stages.lib.decontam_index import DecontamIndex
from datapipe.stages.lib.decontam_sources import Item, wikitext_pieces
from datapipe.stages.lib.decontam_text import words

#: Format tag of ``overlap.json`` (bump when its content changes: a cached file is then recomputed).
FORMAT = "datapipe.ablate.overlap/1"
#: Training documents decoded and matched per batch.
BATCH_DOCS = 1024
#: Example matches kept per held-out set.
EXAMPLES = 5
#: Characters of a training document's matched text shown in an example.
SNIPPET = 200


class EvalOverlap(ValueError):
    """``heldout.overlap: refuse`` and a training document shares text with a held-out text."""


def _decode(tok, table) -> list[str]:
    col = table.column("input_ids").combine_chunks()
    flat = col.flatten().to_numpy(zero_copy_only=False)
    return tok.decode_docs(flat, table.column("num_tokens").to_numpy().astype(np.int64))


def heldout_items(pool: Pool, extra: list, tok) -> tuple[list, list[str], dict[str, int]]:
    """Items of every held-out text (``decontam_sources.Item``, benchmark = held-out set name,
    item id = the text's id) and, per item, its text's key ``"<set>/<id>"``; with the number of
    texts per set. An extra text is indexed as written and, when it reads like WikiText (``<unk>``,
    `` @-@ ``, ``do n't``), also with that tokenisation undone (``wikitext_pieces``: the form a
    crawled copy of the article has)."""

    items, keys, counts = [], [], {}
    for d, t in sorted(pool.heldout.items()):
        texts = _decode(tok, t) if t.num_rows else []
        for doc_id, text in zip(t.column("doc_id").to_pylist(), texts):
            items.append(Item(d, str(doc_id), [text]))
            keys.append(f"{d}/{doc_id}")
        counts[d] = len(texts)
    for e in extra:
        texts = read_extra_texts(e.paths, e.per_line)
        for i, text in enumerate(texts):
            items.append(Item(e.name, f"extra-{i}", [text]))
            keys.append(f"{e.name}/extra-{i}")
            pieces = wikitext_pieces(text)
            if pieces != [text]:  # fragments between <unk>: matched by their n-grams only
                items.append(Item(e.name, f"extra-{i}", pieces, whole=False))
                keys.append(f"{e.name}/extra-{i}")
        counts[e.name] = len(texts)
    return items, keys, counts


def scan(pool: Pool, extra: list, n: int, tok=None, batch_docs: int = BATCH_DOCS) -> dict:
    """Match every training document of ``pool`` against the held-out texts.

    Returns ``{"format", "n", "heldout_texts": {set: texts}, "train_docs_scanned",
    "train_docs_overlapping" (documents overlapping any held-out text), "sets": {set: {"texts",
    "texts_hit", "train_docs", "train_docs_by_domain": {domain: docs}, "ngrams" (matched runs in
    training documents), "examples": [{"train_doc", "domain", "heldout", "text"}]}}, "seconds"}``.
    ``tok``: the run's tokenizer (default: loaded from the run's ``index.json``).
    """

    t0 = time.time()
    tok = tok or run_tokenizer(pool.index)
    items, keys, counts = heldout_items(pool, extra, tok)
    names = sorted(counts)
    sets = {s: {"texts": counts[s], "texts_hit": 0, "train_docs": 0, "train_docs_by_domain": {}, "ngrams": 0,
                "examples": []} for s in names}
    scanned = overlapping = 0
    hit_texts: dict[str, set] = {s: set() for s in names}
    if items:
        index = DecontamIndex.from_items(items, n=n)
        src_of = np.array([names.index(b) for b in index.benchmarks], np.int64)[index.item_benchmark]
        key_of = np.array(keys, dtype=object)
        for domain, t in sorted(pool.train.items()):
            for a in range(0, t.num_rows, batch_docs):
                part = t.slice(a, batch_docs)
                texts = _decode(tok, part)
                w = words(texts)
                hits = index.match(w)
                scanned += part.num_rows
                if not len(hits.doc):
                    continue
                overlapping += len(np.unique(hits.doc))
                src = src_of[hits.item]
                ids = part.column("doc_id").to_pylist()
                for s in np.unique(src).tolist():
                    sel = src == s
                    name, rec = names[s], sets[names[s]]
                    docs = np.unique(hits.doc[sel])
                    rec["train_docs"] += len(docs)
                    rec["train_docs_by_domain"][domain] = rec["train_docs_by_domain"].get(domain, 0) + len(docs)
                    runs = np.unique(np.stack([hits.doc[sel], hits.first[sel], hits.last[sel]]), axis=1)
                    rec["ngrams"] += runs.shape[1]
                    hit_texts[name].update(key_of[hits.item[sel]].tolist())
                    for d in docs[: max(0, EXAMPLES - len(rec["examples"]))].tolist():
                        on = np.flatnonzero(sel & (hits.doc == d))  # first to last matched run of the doc
                        a_, b_ = int(w.start[hits.first[on].min()]), int(w.end[hits.last[on].max()])
                        rec["examples"].append({"train_doc": ids[d], "domain": domain,
                                                "heldout": str(key_of[hits.item[on[0]]]).split("/", 1)[1],
                                                "text": texts[d][a_:b_][:SNIPPET]})
    for s in names:
        sets[s]["texts_hit"] = len(hit_texts[s])
        sets[s]["train_docs_by_domain"] = dict(sorted(sets[s]["train_docs_by_domain"].items()))
    return {"format": FORMAT, "n": n, "heldout_texts": counts, "train_docs_scanned": scanned,
            "train_docs_overlapping": overlapping, "sets": sets, "seconds": round(time.time() - t0, 3)}


def _n(k: int, noun: str) -> str:
    return f"{k} {noun}{'s' * (k != 1)}"


def summary_line(rep: dict, timing: bool = False) -> str:
    """One line: overlapping training documents per held-out set, or that there are none
    (``timing``: with the scan's seconds, which the written reports leave out: a rerun equals a fresh run)."""
    took = f" in {rep['seconds']:.1f} s" if timing else ""
    head = f"held-out overlap ({rep['n']}-word runs, {rep['train_docs_scanned']} training documents scanned{took}): "
    bad = [f"{s}: {_n(r['train_docs'], 'training document')} share{'s' * (r['train_docs'] == 1)} text with "
           f"{r['texts_hit']} of its {_n(r['texts'], 'text')}" for s, r in rep["sets"].items() if r["train_docs"]]
    return head + ("; ".join(bad) if bad else "none (no training document shares a run with a held-out text)")


def report_lines(rep: dict | None) -> list[str]:
    """Sentences for ranking.md / report.html."""
    if rep is None:
        return ["not checked (heldout.overlap: off)."]
    out = [summary_line(rep) + "."]
    for s, r in rep["sets"].items():
        if r["train_docs"]:
            by = ", ".join(f"{d} {k}" for d, k in r["train_docs_by_domain"].items())
            ex = "; ".join(f"{x['train_doc']} ~ {x['heldout']}: \"{x['text']}\"" for x in r["examples"][:2])
            out.append(f"{s}: {r['ngrams']} matched runs; training documents by domain: {by}; e.g. {ex}")
    return out


def check(pool: Pool, m, out: Path, log=print) -> dict | None:
    """Run (or reuse) the scan for manifest ``m``, write ``out/eval/overlap.json``, log one line;
    return the report (None with ``heldout.overlap: off``). Raises EvalOverlap (one line) in
    ``refuse`` mode when any training document overlaps a held-out text."""
    h = m.heldout
    if h.overlap == "off":
        return None
    path = out / "eval" / "overlap.json"
    key = m.train_fingerprint()
    rep = None
    if path.is_file():
        old = json.loads(path.read_text())
        if old.get("key") == key and old.get("n") == h.overlap_n and old.get("format") == FORMAT:
            rep = old
    if rep is None:
        rep = scan(pool, h.extra, h.overlap_n) | {"key": key}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(rep, indent=2, sort_keys=True, ensure_ascii=False))
        os.replace(tmp, path)
    log(f"  {summary_line(rep, timing=True)}")
    if h.overlap == "refuse" and rep["train_docs_overlapping"]:
        bad = ", ".join(f"{s} {r['train_docs']}" for s, r in rep["sets"].items() if r["train_docs"])
        raise EvalOverlap(f"heldout.overlap is refuse and {rep['train_docs_overlapping']} training documents share "
                          f"a {rep['n']}-word run with held-out texts (per held-out set: {bad}; which ones: {path}); "
                          "decontaminate the run against these texts or set heldout.overlap: report")
    return rep
