"""Extraction quality and speed: our extraction vs trafilatura 2.3.1, in the same run.

    .venv/bin/python benchmarks/bench_extraction.py          # all pages, BENCH_REPS timed passes (default 3)
    BENCH_QUICK=1 .venv/bin/python benchmarks/bench_extraction.py   # every 5th page, one timed pass

Two sets, read from ../shared/data/extraction/ (or $DATAPIPE_SHARED_DATA/extraction/):

* trafilatura's evaluation set (990 pages, each with strings that must appear in the main text and
  strings that must not). Scored as trafilatura's own evaluation scores it: a "with" string found is a
  true positive, one missing a false negative; a "without" string present is a false positive, one
  absent a true negative; precision, recall and F1 over all strings of all pages (micro).
* the Article Extraction Benchmark (181 pages, ground-truth ``articleBody``). Scored on tokens:
  whitespace-split tokens, overlap = size of the multiset intersection of predicted and true tokens;
  per page precision = overlap / predicted tokens and recall = overlap / true tokens (0 when the side
  is empty); precision and recall averaged over pages, F1 from the two averages (as the AEB repo
  aggregates).

Extractors: ``ours`` = ``datapipe.stages.extract.extract_one`` with the stage's default config (charset
decoding included, no sandbox child: its overhead is bench_phase1's ``extract.ours`` vs
``extract.ours_no_sandbox``); ``ours_plain`` = the same without the ``clean`` and ``fallback_chars``
measures (the stage before them); ``trafilatura`` = ``trafilatura.extract(raw bytes)`` with its defaults.
Each gets the raw page bytes. The process is pinned to one core. Timed passes of the extractors are
taken in turn (A B C A B C ...); the rate is pages / median seconds. Quality comes from the first
timed pass (extraction is deterministic). Prints one JSON object.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from timing import summarize  # noqa: E402

from datapipe.env import shared_data  # noqa: E402
from datapipe.evalsets import aeb_pages, trafilatura_eval_pages  # noqa: E402
from datapipe.stages.extract import ExtractConfig, extract_one  # noqa: E402


# ---------------------------------------------------------------- data

load_trafilatura_eval = trafilatura_eval_pages
load_aeb = aeb_pages


# ---------------------------------------------------------------- scores

def prf(tp: float, fp: float, fn: float) -> dict:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def score_strings(texts: list[str | None], pages) -> dict:
    """trafilatura's evaluation: with-string found = TP, missing = FN; without-string present = FP."""
    tp = fn = fp = tn = 0
    for text, (_, with_, without) in zip(texts, pages):
        text = text or ""
        found = sum(s in text for s in with_)
        present = sum(s in text for s in without)
        tp, fn = tp + found, fn + len(with_) - found
        fp, tn = fp + present, tn + len(without) - present
    return dict(prf(tp, fp, fn), tp=tp, fn=fn, fp=fp, tn=tn)


def token_overlap(pred: str, true: str) -> tuple[int, int, int]:
    """(overlap, predicted tokens, true tokens) with whitespace tokens and multiset intersection."""
    p, t = Counter(pred.split()), Counter(true.split())
    return sum((p & t).values()), sum(p.values()), sum(t.values())


def score_tokens(texts: list[str | None], pages) -> dict:
    """AEB-style: per-page token precision/recall, averaged over pages; F1 of the two averages."""
    ps, rs = [], []
    for text, (_, body) in zip(texts, pages):
        both, n_pred, n_true = token_overlap(text or "", body)
        ps.append(both / n_pred if n_pred else 0.0)
        rs.append(both / n_true if n_true else 0.0)
    p, r = statistics.fmean(ps), statistics.fmean(rs)
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


# ---------------------------------------------------------------- extractors

def extractors() -> tuple[dict, list[str]]:
    notes = []
    cfg = ExtractConfig()
    ours_opts = dict(main_content=cfg.main_content, alt_texts=cfg.alt_texts, links=cfg.links,
                     list_bullets=cfg.list_bullets, noscript=cfg.noscript, clean=cfg.clean,
                     fallback_chars=cfg.fallback_chars)
    plain_opts = dict(ours_opts, clean=False, fallback_chars=0)
    fns = {"ours": lambda b: extract_one(b, None, **ours_opts)[0],
           "ours_plain": lambda b: extract_one(b, None, **plain_opts)[0]}
    try:
        import trafilatura
        fns["trafilatura"] = lambda b: trafilatura.extract(b)
    except ImportError:
        notes.append("trafilatura not installed: no comparison (pip install trafilatura==2.3.1)")
    return fns, notes


def guarded(fn, doc: bytes) -> str | None:
    try:
        return fn(doc)
    except Exception:  # noqa: BLE001 - a failing page counts as an empty extraction
        return None


def timed_passes(fns: dict, docs: list[bytes], reps: int) -> tuple[dict, dict]:
    """Seconds of each timed pass per extractor (taken in turn) and the texts of the first pass."""
    for fn in fns.values():  # warm-up: imports, lazy tables, first-call costs
        for d in docs[:5]:
            guarded(fn, d)
    seconds = {k: [] for k in fns}
    texts = {}
    for _ in range(reps):
        for name, fn in fns.items():
            t = time.perf_counter()
            out = [guarded(fn, d) for d in docs]
            seconds[name].append(time.perf_counter() - t)
            texts.setdefault(name, out)
    return seconds, texts


def bench_set(name: str, pages, docs: list[bytes], scorer, fns: dict, reps: int) -> dict:
    seconds, texts = timed_passes(fns, docs, reps)
    out = {"pages": len(docs)}
    for ext in fns:
        speed = summarize(seconds[ext], len(docs), "docs/s")
        q = scorer(texts[ext], pages)
        out[ext] = {**{k: round(v, 4) if isinstance(v, float) else v for k, v in q.items()},
                    "docs_s": speed["value"], "docs_s_range": [speed["min"], speed["max"]],
                    "spread_pct": speed["spread_pct"], "seconds": speed["seconds"],
                    "empty_pages": sum(not (t or "").strip() for t in texts[ext])}
    for ext in ("ours", "ours_plain"):
        if "trafilatura" in out:
            out[f"{ext}_vs_trafilatura"] = {
                "f1_ratio": round(out[ext]["f1"] / out["trafilatura"]["f1"], 4),
                "f1_diff": round(out[ext]["f1"] - out["trafilatura"]["f1"], 4),
                "speed_ratio": round(out[ext]["docs_s"] / out["trafilatura"]["docs_s"], 2)}
    print(f"[bench_extraction] {name}: " + ", ".join(
        f"{e} F1 {out[e]['f1']:.3f} {out[e]['docs_s']:.0f} docs/s" for e in fns), file=sys.stderr, flush=True)
    return out


def pin_one_core() -> None:
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    except (AttributeError, OSError):
        pass


def main() -> None:
    quick = os.environ.get("BENCH_QUICK") == "1"
    reps = 1 if quick else int(os.environ.get("BENCH_REPS", "3"))
    step = 5 if quick else 1
    pin_one_core()
    data = shared_data() / "extraction"
    fns, notes = extractors()
    t0 = time.time()
    traf = load_trafilatura_eval(data / "trafilatura_eval.tar.xz")[::step]
    aeb = load_aeb(data / "scrapinghub_aeb")[::step]
    cfg = ExtractConfig()
    result = {
        "what": "extraction quality (precision/recall/F1) and speed: ours vs trafilatura, same run, one core",
        "units": {"precision": "fraction", "recall": "fraction", "f1": "fraction", "docs_s": "docs/s",
                  "f1_ratio": "ours/trafilatura", "speed_ratio": "ours/trafilatura (docs/s)"},
        "quick": quick, "reps": reps,
        "config": {"ours": {"main_content": cfg.main_content, "alt_texts": cfg.alt_texts, "clean": cfg.clean,
                            "fallback_chars": cfg.fallback_chars},
                   "ours_plain": "the same with clean=False, fallback_chars=0",
                   "trafilatura": "trafilatura.extract(html bytes), defaults"},
        "versions": {},
        "trafilatura_eval": bench_set("trafilatura_eval", traf, [p[0] for p in traf], score_strings, fns, reps),
        "aeb": bench_set("aeb", aeb, [p[0] for p in aeb], score_tokens, fns, reps),
        "notes": notes,
    }
    for pkg in ("resiliparse", "trafilatura", "lxml"):
        try:
            result["versions"][pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    goal = {}
    for s in ("trafilatura_eval", "aeb"):
        cmp_ = result[s].get("ours_vs_trafilatura")
        if cmp_:
            goal[s] = {"f1_at_least_trafilatura": cmp_["f1_diff"] >= 0, "speed_at_least_10x": cmp_["speed_ratio"] >= 10}
    result["goal"] = goal
    result["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
