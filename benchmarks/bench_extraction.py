"""Extraction quality per page type and speed: ours vs plain resiliparse and trafilatura 2.3.1, same run.

    .venv/bin/python benchmarks/bench_extraction.py                 # TEST split, BENCH_REPS timed passes (3)
    .venv/bin/python benchmarks/bench_extraction.py --split dev --ablate   # dev-set ablation of each rule
    BENCH_QUICK=1 .venv/bin/python benchmarks/bench_extraction.py   # every 5th page, one timed pass (BENCH_REPS)

Pages: ``benchmarks/extraction_sets.py`` (the fetched public sets, checked by sha256, plus
trafilatura's evaluation set and the AEB from ../shared/data/extraction), split by site before any
tuning; the rules were tuned on ``dev`` only. Without the fetched sets the run says so and scores
the shared sets alone.

Scores. Pages with human gold text: bag-of-words F1 per page (lower-cased ``\\w+`` tokens, multiset
overlap; precision = overlap / predicted, recall = overlap / gold; an empty output scores 0), averaged
over the pages of a type and over all. trafilatura's evaluation set has strings instead of gold text:
a "with" string found is a true positive, missing a false negative, a "without" string present a
false positive; P/R/F1 over all strings of a type (micro, as trafilatura's evaluation does).
Differences ours - other come with a paired bootstrap 95% interval that resamples sites (pages of one
site move together; 1,000 draws, seed 0).

Extractors: ``ours`` = the stage's ``extract_one`` with its default config (charset decoding
included; no sandbox child); ``ours_sandbox`` (speed only) = the same through the stage's sandbox
child with its per-page time limit; ``resiliparse`` = ``extract_plain_text(main_content=True)`` with
its defaults on the same decoded text; ``trafilatura`` = ``trafilatura.extract(raw bytes)``;
``trafilatura_precision`` = the same with ``favor_precision=True``. The process is pinned to one
core; timed passes are interleaved at chunk level (32 pages run by every extractor in turn, the
order rotating; ``timed_passes``); rate = pages / median seconds; each ratio to trafilatura is
given with its min-max over the passes. Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import extraction_sets  # noqa: E402

from datapipe.env import shared_data  # noqa: E402
from datapipe.stages.extract import ExtractConfig  # noqa: E402
from datapipe.stages.lib.charset import decode_payload  # noqa: E402
from datapipe.stages.lib.extract_page import extract_one  # noqa: E402

_WORD = re.compile(r"\w+")


# ---------------------------------------------------------------- scores

def word_prf(pred: str | None, gold: str) -> tuple[float, float, float]:
    """Bag-of-words precision, recall, F1 of one page (lower-cased ``\\w+`` tokens)."""
    p, g = Counter(_WORD.findall((pred or "").lower())), Counter(_WORD.findall(gold.lower()))
    both = sum((p & g).values())
    if not both:
        return 0.0, 0.0, 0.0
    prec, rec = both / sum(p.values()), both / sum(g.values())
    return prec, rec, 2 * prec * rec / (prec + rec)


def string_counts(pred: str | None, with_: list[str], without: list[str]) -> tuple[int, int, int]:
    """(tp, fp, fn) of trafilatura's string test on one page."""
    t = pred or ""
    found = sum(s in t for s in with_)
    return found, sum(s in t for s in without), len(with_) - found


def micro_prf(counts) -> dict:
    tp, fp, fn = (sum(c[i] for c in counts) for i in range(3))
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def paired_bootstrap(sites: list[str], diffs: list[float], draws: int = 1000, seed: int = 0) -> list[float]:
    """95% interval of the mean per-page difference, resampling sites (clusters) with replacement."""
    by_site = defaultdict(list)
    for s, d in zip(sites, diffs):
        by_site[s].append(d)
    groups = [(sum(v), len(v)) for v in by_site.values()]
    rng = random.Random(seed)
    means = []
    for _ in range(draws):
        tot = n = 0
        for _ in range(len(groups)):
            s, k = groups[rng.randrange(len(groups))]
            tot, n = tot + s, n + k
        means.append(tot / n)
    means.sort()
    return [round(means[int(0.025 * draws)], 4), round(means[int(0.975 * draws) - 1], 4)]


def score_table(pages: list[dict], texts: dict[str, list], ref: str = "ours") -> dict:
    """Per type and overall: word F1 (gold-text pages) and string F1 (trafilatura's set), with
    paired bootstrap intervals of ``ref`` - each other extractor."""
    out = {"word_f1": {}, "string_f1": {}}
    gold_idx = [i for i, p in enumerate(pages) if p["gold"] is not None]
    str_idx = [i for i, p in enumerate(pages) if p["gold"] is None]
    f1 = {e: {i: word_prf(texts[e][i], pages[i]["gold"]) for i in gold_idx} for e in texts}
    groups = defaultdict(list)
    for i in gold_idx:
        groups[pages[i]["type"]].append(i)
    groups["overall"] = gold_idx
    for typ, idx in sorted(groups.items(), key=lambda kv: (kv[0] == "overall", kv[0])):
        row = {"pages": len(idx), "sites": len({pages[i]["site"] for i in idx})}
        for e in texts:
            row[e] = {k: round(statistics.fmean(f1[e][i][j] for i in idx), 4)
                      for j, k in enumerate(("precision", "recall", "f1"))}
            row[e]["f1_below_0.2"] = sum(f1[e][i][2] < 0.2 for i in idx)
        for e in texts:
            if e != ref:
                d = [f1[ref][i][2] - f1[e][i][2] for i in idx]
                row[f"{ref}_minus_{e}"] = {"diff": round(statistics.fmean(d), 4),
                                           "ci95": paired_bootstrap([pages[i]["site"] for i in idx], d)}
        out["word_f1"][typ] = row
    sgroups = defaultdict(list)
    for i in str_idx:
        sgroups[pages[i]["type"]].append(i)
    if str_idx:
        sgroups["overall"] = str_idx
    for typ, idx in sorted(sgroups.items(), key=lambda kv: (kv[0] == "overall", kv[0])):
        row = {"pages": len(idx)}
        for e in texts:
            row[e] = {k: round(v, 4) for k, v in micro_prf(
                [string_counts(texts[e][i], pages[i]["with"], pages[i]["without"]) for i in idx]).items()}
        out["string_f1"][typ] = row
    return out


# ---------------------------------------------------------------- extractors

def stage_opts(**over) -> dict:
    cfg = ExtractConfig()
    opts = dict(main_content=cfg.main_content, alt_texts=cfg.alt_texts, links=cfg.links,
                list_bullets=cfg.list_bullets, noscript=cfg.noscript, clean=cfg.clean,
                fallback_chars=cfg.fallback_chars, thread_gate=cfg.thread_gate,
                thread_ratio=cfg.thread_ratio, keep_ratio=cfg.keep_ratio, trim_chars=cfg.trim_chars,
                trim_share=cfg.trim_share, thread_block_chars=cfg.thread_block_chars)
    opts.update(over)
    return opts


def resiliparse_plain(b: bytes) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(decode_payload(b, None).text, main_content=True)


def extractors() -> tuple[dict, list[str]]:
    notes = []
    opts = stage_opts()
    fns = {"ours": lambda b: extract_one(b, None, **opts)[0], "resiliparse": resiliparse_plain}
    try:
        import trafilatura

        fns["trafilatura"] = lambda b: trafilatura.extract(b)
        fns["trafilatura_precision"] = lambda b: trafilatura.extract(b, favor_precision=True)
    except ImportError:
        notes.append("trafilatura not installed: no comparison (pip install trafilatura==2.3.1)")
    return fns, notes


def guarded(fn, doc: bytes) -> str | None:
    try:
        return fn(doc)
    except Exception:  # noqa: BLE001 - a failing page counts as an empty extraction
        return None


class SandboxRun:
    """The stage's sandbox child, whole list in batches of 256 (as the stage gets batches)."""

    def __init__(self):
        from datapipe.stages.lib.extract_sandbox import Sandbox

        self.sb = Sandbox(stage_opts())
        self.sb.start()
        self.timeout = ExtractConfig().timeout_s

    def __call__(self, docs: list[bytes]) -> list:
        out = []
        for k in range(0, len(docs), 256):
            out += [r[0] for r in self.sb.run([(d, None) for d in docs[k:k + 256]], self.timeout)]
        return out


CHUNK = 32  # pages per timing slot: one slot of trafilatura is ~2 s, of ours ~0.2 s


def timed_passes(fns: dict, docs: list[bytes], reps: int, sandbox: SandboxRun | None):
    """Seconds of each pass per extractor, and the texts of the first pass.

    Interleaved at chunk level: the pages go in chunks of ``CHUNK``; each chunk is run by every
    extractor in turn (the order rotating from chunk to chunk), so a change of the machine's load
    reaches all extractors alike instead of the one whose whole pass it falls into. A pass's
    seconds per extractor are the sum over its chunks; the sandbox gets each chunk as one batch
    (as the stage gets a batch)."""
    for fn in fns.values():
        for d in docs[:5]:
            guarded(fn, d)
    names = list(fns) + (["ours_sandbox"] if sandbox else [])
    seconds = {k: [] for k in names}
    texts = {k: [] for k in fns}
    chunks = [docs[k:k + CHUNK] for k in range(0, len(docs), CHUNK)]
    for r in range(reps):
        spent = dict.fromkeys(names, 0.0)
        for c, chunk in enumerate(chunks):
            for j in range(len(names)):
                name = names[(c + r + j) % len(names)]
                t = time.perf_counter()
                out = sandbox(chunk) if name == "ours_sandbox" else [guarded(fns[name], d) for d in chunk]
                spent[name] += time.perf_counter() - t
                if r == 0 and name != "ours_sandbox":
                    texts[name] += out
        for k in names:
            seconds[k].append(spent[k])
        print(f"[bench_extraction] pass {r + 1}/{reps}: " + ", ".join(
            f"{k} {len(docs) / v[-1]:.0f} docs/s" for k, v in seconds.items()), file=sys.stderr, flush=True)
    return seconds, texts


def speed_table(seconds: dict, n: int) -> dict:
    out = {}
    for k, v in seconds.items():
        out[k] = {"docs_s": round(n / statistics.median(v), 1), "seconds": [round(s, 2) for s in v]}
    if "trafilatura" in seconds:
        for k in seconds:
            if k.startswith("ours") or k == "resiliparse":
                ratios = [t / s for s, t in zip(seconds[k], seconds["trafilatura"])]
                out[k]["ratio_vs_trafilatura"] = {"median": round(statistics.median(ratios), 2),
                                                  "min": round(min(ratios), 2), "max": round(max(ratios), 2)}
    return out


# ---------------------------------------------------------------- ablation (dev only)

def ablation_configs() -> dict[str, dict]:
    from datapipe.stages.lib.mainblock import SKIP_CANDIDATES

    cfgs = {"ours (all rules)": {}, "no clean-up (plain + whole-page fallback)": {"clean": False},
            "- thread rule (comments always dropped)": {"thread_ratio": 0},
            "thread rule by size only (before: no schema / block test)": {"thread_schema": False},
            "+ thread rule also on pages without a 150-char block": {"thread_block_chars": 150},
            "keep-ratio fallback always with comments (before)": {"plain_comments": True},
            "keep-ratio fallback never with comments": {"plain_comments": False},
            "- keep-ratio fallback": {"keep_ratio": 0},
            "- whole-page fallback": {"fallback_chars": 0},
            "- block trim": {"trim_chars": 0},
            "post meta dropped (post_meta=False, before)": {"post_meta": False},
            "- main-block guard on skips": {"guard": False},
            "- all skips": {"skips": ()}}
    for s in SKIP_CANDIDATES:
        cfgs[f"- skip {s}"] = {"skips": tuple(x for x in SKIP_CANDIDATES if x != s)}
    for s in OLD_SKIPS:
        if s not in SKIP_CANDIDATES:
            cfgs[f"+ skip {s} (dropped)"] = {"skips": SKIP_CANDIDATES + (s,)}
    return cfgs


OLD_SKIPS = ("figure", "figcaption", "h1", "footer", "[class*=caption]", "[class*=footer]",
             "[class*=related]", "[class*=newsletter]")


def old_rules(b: bytes) -> str:
    """The stage before issue 20: unguarded class-substring skips, comments=False, 200-char fallback."""
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(decode_payload(b, None).text)
    kw = dict(comments=False, post_meta=False, skip_elements=list(OLD_SKIPS))
    text = extract_plain_text(tree, main_content=True, **kw)
    if len(text) < 200:
        whole = extract_plain_text(tree, main_content=False, **kw)
        text = whole if len(whole) > len(text) else text
    return text


def ablate(pages: list[dict]) -> dict:
    from resiliparse.parse.html import HTMLTree

    from datapipe.stages.lib.mainblock import extract_main

    rows = {}
    docs = [p["html"] for p in pages]
    texts = {"before issue 20 (old rules)": [guarded(old_rules, d) for d in docs],
             "plain resiliparse": [guarded(resiliparse_plain, d) for d in docs]}
    base = stage_opts()
    # The stage's output options (alt texts off, ...): every row differs from "ours" by its rule only.
    out_opts = {k: base[k] for k in ("alt_texts", "links", "list_bullets", "noscript")}
    for name, over in ablation_configs().items():
        kw = dict(clean=base["clean"], thread_gate=base["thread_gate"], thread_ratio=base["thread_ratio"],
                  keep_ratio=base["keep_ratio"], fallback_chars=base["fallback_chars"],
                  trim_chars=base["trim_chars"], trim_share=base["trim_share"],
                  thread_block_chars=base["thread_block_chars"])
        kw.update(over)

        def fn(b, kw=kw):
            return extract_main(HTMLTree.parse(decode_payload(b, None).text), out_opts, **kw)

        texts[name] = [guarded(fn, d) for d in docs]
        print(f"[bench_extraction] ablation: {name}", file=sys.stderr, flush=True)
    table = score_table(pages, texts, ref="ours (all rules)")
    for name in texts:
        rows[name] = {"word_f1": {t: r[name]["f1"] for t, r in table["word_f1"].items()},
                      "string_f1": {t: r[name]["f1"] for t, r in table["string_f1"].items()}}
        ci = table["word_f1"]["overall"].get(f"ours (all rules)_minus_{name}")
        if ci:
            rows[name]["ours_minus_this_overall"] = ci
    return rows


# ---------------------------------------------------------------- report

LABELS = {"ours": "ours", "resiliparse": "resiliparse", "trafilatura": "trafilatura",
          "trafilatura_precision": "trafilatura precision"}


def markdown(result: dict) -> list[str]:
    """The per-type word-F1 table (with ours - other and its 95% interval), the string-test table
    and the speed ratios of one ``bench_extraction`` result, as Markdown lines."""
    q = result.get("quality")
    if not q:
        return []
    ext = [e for e in LABELS if e in q["word_f1"]["overall"]]
    out = ["", f"Extraction, {result['split'].upper()} split (benchmarks/bench_extraction.py; word F1 per page, "
           "mean; ours - other with a paired site-bootstrap 95% interval):", "",
           "| type | pages (sites) | " + " | ".join(LABELS[e] for e in ext) + " | " +
           " | ".join(f"ours - {LABELS[e]}" for e in ext if e != "ours") + " |",
           "|---|---:|" + "---:|" * (2 * len(ext) - 1)]
    for typ, row in q["word_f1"].items():
        cells = [f"{row[e]['f1']:.3f}" for e in ext]
        cells += [f"{row[f'ours_minus_{e}']['diff']:+.3f} [{row[f'ours_minus_{e}']['ci95'][0]:+.3f}, "
                  f"{row[f'ours_minus_{e}']['ci95'][1]:+.3f}]" for e in ext if e != "ours"]
        out.append(f"| {typ} | {row['pages']} ({row['sites']}) | " + " | ".join(cells) + " |")
    if q["string_f1"]:
        out += ["", "trafilatura's evaluation set, same split (string test, micro F1):", "",
                "| type | pages | " + " | ".join(LABELS[e] for e in ext) + " |", "|---|---:|" + "---:|" * len(ext)]
        for typ, row in q["string_f1"].items():
            out.append(f"| {typ} | {row['pages']} | " + " | ".join(f"{row[e]['f1']:.3f}" for e in ext) + " |")
    sp = result.get("speed", {})
    if "trafilatura" in sp:
        out += ["", "Speed, same run, one core (docs/s, median of the passes; ratio to trafilatura: median "
                "[min, max] of the per-pass ratios):", ""]
        for k, v in sp.items():
            r = v.get("ratio_vs_trafilatura")
            out.append(f"- {k}: {v['docs_s']} docs/s" + (f", {r['median']}x [{r['min']}, {r['max']}]" if r else ""))
    return out


# ---------------------------------------------------------------- main

def pin_one_core() -> None:
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    except (AttributeError, OSError):
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description="extraction quality per page type and speed vs trafilatura")
    ap.add_argument("--split", choices=("test", "dev"), default="test")
    ap.add_argument("--ablate", action="store_true", help="dev-set ablation of each rule (needs --split dev)")
    ap.add_argument("--no-speed", action="store_true", help="quality only (one pass, no sandbox run)")
    a = ap.parse_args()
    if a.ablate and a.split != "dev":
        ap.error("the ablation tunes rules: it runs on --split dev only")
    quick = os.environ.get("BENCH_QUICK") == "1"
    reps = 1 if a.no_speed else int(os.environ.get("BENCH_REPS", "1" if quick else "3"))
    pin_one_core()
    t0 = time.time()
    pages, notes = extraction_sets.load_all(shared_data() / "extraction")
    pages = [p for p in pages if p["split"] == a.split][::5 if quick else 1]
    result = {"what": f"extraction word F1 per page type ({a.split.upper()} split) and speed, same run, one core",
              "split": a.split, "quick": quick, "reps": reps, "notes": notes,
              "pages_by_source": dict(Counter(p["source"] for p in pages)), "versions": {}}
    for pkg in ("resiliparse", "trafilatura", "lxml"):
        try:
            result["versions"][pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    if a.ablate:
        result["ablation"] = ablate(pages)
    else:
        fns, more = extractors()
        notes += more
        sandbox = None if a.no_speed else SandboxRun()
        seconds, texts = timed_passes(fns, [p["html"] for p in pages], reps, sandbox)
        result["quality"] = score_table(pages, texts)
        q = result["quality"]["word_f1"]["overall"]
        sp = {} if a.no_speed else speed_table(seconds, len(pages))  # one pass, not interleaved: no speed figure
        if sp:
            result["speed"] = sp
        if "trafilatura" in texts:
            result["goal"] = {
                "overall_f1_at_least_trafilatura": q["ours"]["f1"] >= q["trafilatura"]["f1"],
                "every_type_at_least_resiliparse": all(
                    r["ours"]["f1"] >= r["resiliparse"]["f1"] for r in result["quality"]["word_f1"].values()),
                "speed_at_least_10x": (sp.get("ours_sandbox", sp["ours"])["ratio_vs_trafilatura"]["median"] >= 10
                                       if sp and "ratio_vs_trafilatura" in sp["ours"] else None)}
    result["seconds"] = round(time.time() - t0, 1)
    print("\n".join(markdown(result)), file=sys.stderr)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
