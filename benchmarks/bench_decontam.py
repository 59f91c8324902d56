"""Decontamination on planted benchmark items and on benign look-alikes; cost per page and memory.

    .venv/bin/python benchmarks/bench_decontam.py [--split test] [--per-benchmark 40] [--out FILE]

The set is built at run time (deterministic, nothing of it is committed): real pages (main-content
text of the English pages of ``warc/realpages-1171.warc.gz``, as ``benchmarks/safety_set.py``
extracts them) and test items read from ``../shared/data/evalsets`` and WikiText-2 test through
the index's own readers. Items and pages are split dev/test by a hash of their id before anything
was tuned; the figures reported are the test half's.

* **planted**: a page with one item inserted between two of its paragraphs, in one of the surface
  forms of ``FORMS`` (verbatim; split across lines; wrapped in ``Question:``/``A.``/``Answer:``
  labels; a partial quote of 13-25 contiguous words; upper case with punctuation changed; HTML
  entities and full-width letters). Recall = share of planted pages whose ``decontam_items``
  holds the planted item.
* **benign**: the same pages with a look-alike of an item: its words in runs of at most 6, every
  7th word replaced by another word of the page (same topic, short shared phrases, no run of 13
  item words), under the same labels. Changed = share of benign pages the stage would change or
  drop (``decontam_ngrams`` > 0) beyond what the page alone gives (pages that match without the
  insert are reported apart, never counted as benign).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
FORMS = ("verbatim", "line_split", "labels", "partial", "case_punct", "entities")


def split_of(key: str) -> str:
    return "dev" if int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % 2 == 0 else "test"


def _items(per_benchmark: int, split: str, seed: int):
    from datapipe.env import shared_data
    from datapipe.stages.lib import decontam_sources as S

    items = S.evalset_items(shared_data() / "evalsets") + S.wikitext_items(shared_data() / S.WIKITEXT)
    rng = random.Random(seed)
    out = []
    for b in sorted({it.benchmark for it in items}):
        pool = [it for it in items if it.benchmark == b and split_of(f"{b}/{it.item_id}") == split
                and it.texts and len(max(it.texts, key=len).split()) >= 15]
        out += rng.sample(pool, min(per_benchmark, len(pool)))
    return out


def _labels(text: str, mc: bool) -> str:
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        return text
    head = "Question: " + lines[0]
    if mc and len(lines) > 1:
        return "\n".join([head] + [f"{'ABCDE'[i % 5]}. {ln}" for i, ln in enumerate(lines[1:])] + ["Answer: B"])
    return "\n".join([head, "Answer: " + " ".join(lines[1:])] if len(lines) > 1 else [head, "Answer:"])


def surface(text: str, form: str, rng: random.Random, mc: bool) -> str:
    """``text`` in one of FORMS."""
    words = text.split()
    if form == "verbatim":
        return text
    if form == "line_split":
        out, i = [], 0
        while i < len(words):
            k = rng.randint(3, 8)
            out.append(" ".join(words[i:i + k]))
            i += k
        return "\n".join(out)
    if form == "labels":
        return _labels(text, mc)
    if form == "partial":
        k = min(len(words), rng.randint(15, 25))
        a = rng.randint(0, len(words) - k)
        return "As the worksheet puts it, \"" + " ".join(words[a:a + k]) + "\" and so on."
    if form == "case_punct":
        t = text.upper() if rng.random() < 0.5 else text.title()
        return re.sub(r"[,;]", lambda m: {",": ";", ";": ","}[m.group()], t).replace(". ", "! ").replace("'", "’")
    if form == "entities":
        t = text.replace("&", "&amp;").replace("'", "&#39;").replace('"', "&quot;").replace(" ", "&nbsp;", 3)
        return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalpha() and rng.random() < 0.1 else c for c in t)
    raise ValueError(form)


def lookalike(text: str, page_words: list[str], rng: random.Random) -> str:
    """The item's normalised words (as the matcher splits them) with every 7th replaced by a word
    of the page: runs of at most 6 item words, so no n-gram of the item survives."""
    from datapipe.stages.lib.decontam_text import words

    w = words([text])
    raw = [text[a:b] for a, b in zip(w.start.tolist(), w.end.tolist())]
    def other(x: str) -> str:
        while (r := rng.choice(page_words)).casefold() == x.casefold():
            pass
        return r

    return " ".join(other(x) if (i + 1) % 7 == 0 else x for i, x in enumerate(raw))


def _insert(page: str, block: str, rng: random.Random) -> str:
    paras = page.split("\n")
    i = rng.randint(1, max(1, len(paras) - 1))
    return "\n".join(paras[:i] + [block] + paras[i:])


MC = {"mmlu", "arc_easy", "arc_challenge", "openbookqa", "commonsenseqa", "piqa", "hellaswag"}


def build(split: str, per_benchmark: int = 40, seed: int = 28) -> tuple[list[dict], list[dict]]:
    """(planted, benign) examples of ``split``: dicts with ``text``, ``benchmark``, ``item``, ``form``."""
    from safety_set import english_pages

    pages = [p for p in english_pages() if split_of(p["url"]) == split]
    rng = random.Random(seed + (split == "test"))
    planted, benign = [], []
    for k, it in enumerate(_items(per_benchmark, split, seed)):
        page = pages[k % len(pages)]["text"]
        form = FORMS[k % len(FORMS)]
        text = max(it.texts, key=len) if not it.whole else it.texts[0]  # WikiText: its longest piece
        block = surface(text, form, rng, it.benchmark in MC)
        planted.append({"text": _insert(page, block, rng), "benchmark": it.benchmark,
                        "item": f"{it.benchmark}/{it.item_id}", "form": form, "page": pages[k % len(pages)]["url"]})
        look = lookalike(text, [x for x in page.split() if x.isalpha() and len(x) >= 4] or ["zebra", "quartz"], rng)
        look = _labels(look, it.benchmark in MC) if k % 2 else look
        benign.append({"text": _insert(page, look, rng), "benchmark": it.benchmark, "item": "", "source": f"{it.benchmark}/{it.item_id}", "look": look,
                       "form": "lookalike", "page": pages[k % len(pages)]["url"]})
    return planted, benign


def evaluate(split: str, per_benchmark: int) -> dict:
    from datapipe.stages import get

    planted, benign = build(split, per_benchmark)
    st = get("decontam")
    st.ensure_setup()
    pages = sorted({e["page"] for e in planted})
    from safety_set import english_pages

    by_url = {p["url"]: p["text"] for p in english_pages()}
    base = dict(zip(pages, st.signals([by_url[u] for u in pages])))
    dirty = {u for u, s in base.items() if s["ngrams"]}
    sig_p = st.signals([e["text"] for e in planted])
    sig_b = st.signals([e["text"] for e in benign])
    per_form: dict[str, list[int]] = {}
    per_bench: dict[str, list[int]] = {}
    misses = []
    for e, s in zip(planted, sig_p):
        ok = int(e["item"] in s["items"])
        per_form.setdefault(e["form"], []).append(ok)
        per_bench.setdefault(e["benchmark"], []).append(ok)
        if not ok:
            misses.append({"item": e["item"], "form": e["form"]})
    changed = [e["item"] or e["benchmark"] for e, s in zip(benign, sig_b) if s["ngrams"] and e["page"] not in dirty]
    hits = [ok for v in per_form.values() for ok in v]
    return {"split": split, "planted": len(planted), "recall": sum(hits) / len(hits),
            "recall_per_form": {f: round(sum(v) / len(v), 4) for f, v in per_form.items()},
            "recall_per_benchmark": {b: round(sum(v) / len(v), 4) for b, v in per_bench.items()},
            "benign": len(benign), "benign_changed": len(changed), "benign_changed_benchmarks": changed,
            "pages_matching_alone": len(dirty), "misses": misses[:20]}


def _rss_mb() -> float:
    """Current resident set size of this process (Linux ``/proc/self/statm``), MB."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**20


def cost(n_pages: int = 400) -> dict:
    """CPU ms per page of the stage on real pages, setup (index load), and the resident memory the
    loaded index adds to a process that already runs the matcher (a worker)."""
    import pyarrow as pa
    from safety_set import english_pages

    from datapipe.stages import get
    from datapipe.stages.lib.decontam_text import words

    texts = [p["text"] for p in english_pages()][:n_pages]
    st = get("decontam", action="remove")
    words(["warm up"])  # the matcher's kernels and tables, without the index
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    st.ensure_setup()
    st(pa.table({"text": texts[:8]}))  # warm-up: index loaded, its buckets built
    setup = time.perf_counter() - t0
    rss1 = _rss_mb()
    t0 = time.process_time()
    for i in range(0, len(texts), 256):
        st(pa.table({"text": texts[i:i + 256]}))
    per = (time.process_time() - t0) / len(texts)
    return {"pages": len(texts), "cpu_ms_per_page": round(per * 1e3, 3), "setup_s": round(setup, 2),
            "rss_mb_before_index": round(rss0, 1), "rss_mb_with_index": round(rss1, 1),
            "index_rss_mb": round(rss1 - rss0, 1),
            "index_entries": int(len(st.index.keys)), "mean_chars": round(sum(map(len, texts)) / len(texts))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="test", choices=["dev", "test"])
    ap.add_argument("--per-benchmark", type=int, default=40)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    res = {"quality": evaluate(args.split, args.per_benchmark), "cost": cost()}
    text = json.dumps(res, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
