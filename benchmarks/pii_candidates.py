"""Build the candidate segments of the PII evaluation set (``benchmarks/data/pii_spans.jsonl``).

    .venv/bin/python benchmarks/pii_candidates.py candidates OUT.jsonl     # unlabelled segments
    .venv/bin/python benchmarks/pii_candidates.py candidates-round OUT.jsonl N EARLIER.jsonl...  # round N >= 2
    .venv/bin/python benchmarks/pii_candidates.py merge OUT.jsonl LABELS.tsv ROUND.jsonl
    # data/pii_spans.jsonl = the merged rounds 1, 2 and 3, concatenated in that order

Pages: every HTML response of ``../shared/data/warc/*.warc.gz`` (realpages-1171 and the other WARC
samples), extracted whole-page (``extract_one(main_content=False)``: contact blocks and footers,
where most addresses and numbers live, stay in) and language-identified with the langid stage,
plus the 30 real CC documents of ``../shared/data/cc_text``.

Candidates are what a loose regex flags, chosen without any PII detector of this project, so the
set does not lean towards the detector it scores:

* ``email``: a whitespace-free token holding ``@`` (handles, file names and credentials included);
* ``ip``: digits with three or more dots (``1.2.3.4``, ``115.0.2.1``, ``1.121.319.953``) and
  colon-hex runs (``2001:db8::1``, ``12:30:45``);
* ``phone``: a run of digits and separators (space, ``-./()``, dashes) holding 7 or more digits.

Sampling (seeded, per page at most ``PER_PAGE`` seeds of each family, totals in ``QUOTAS``): every
ip-like run; email-like tokens; phone-like runs in two strata, those that phonenumbers' own matcher
(``Leniency.POSSIBLE``, the page's ccTLD region or US) overlaps and those it does not, so that
numbers the library misses can show up too. A segment is the text line around a seed, cut to about
``WINDOW`` characters either side at whitespace and never through a candidate; every candidate
inside a segment is listed and labelled, not only the seed. ``split`` is ``dev`` or ``test`` by the
first hex digit of the page URL's SHA-1 (0-7 dev), fixed before any tuning. Round 1 samples both
splits; rounds 2 and 3 are fresh samples of test-split pages only (lines of earlier rounds left
out), each drawn and labelled after the detector had been frozen.

The texts depend on the extract stage's decoding: re-running this after ``stages/extract.py`` or
the charset code changed can give slightly different segments (2 of 561 differed once the charset
detection changed); ``data/pii_spans.jsonl`` is the reference.
"""
from __future__ import annotations

import glob
import gzip
import hashlib
import json
import os
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEEDS = {1: 15, 2: 1502, 3: 1503}
PER_PAGE = 2
ALL = 10**9
QUOTAS = {1: {"email": 200, "ip": ALL, "colon": 15, "phone_hit": 230, "phone_miss": 110},
          2: {"email": 90, "ip": ALL, "colon": ALL, "phone_hit": 150, "phone_miss": 80},
          3: {"email": 60, "ip": ALL, "colon": ALL, "phone_hit": 120, "phone_miss": 60}}
WINDOW = 160

EMAILISH = re.compile(r"\S*@\S*[^\s@]|\S+@")
DOTTED = re.compile(r"\d+(?:\.\d+){3,}")
COLONHEX = re.compile(r"(?<![\w:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,}(?![\w:])")
_SEP = " \t().\\-/\u2010\u2011\u2012\u2013\u2014\uff0d\u00a0"
DIGITRUN = re.compile(r"\+?\(?\d(?:[" + _SEP + r"]{0,3}\d)+\)?")
_STRIP = "()[]{}<>\"'«»„“”‘’,;:!?.…"


def page_split(url: str) -> str:
    return "dev" if hashlib.sha1(url.encode("utf-8")).hexdigest()[0] in "01234567" else "test"


def candidates(line: str) -> list[tuple[int, int, str]]:
    """Loose candidate spans of one line: ``(start, end, family)``."""
    out = []
    for m in EMAILISH.finditer(line):
        s, e = m.start(), m.end()
        while s < e and line[s] in _STRIP:
            s += 1
        while e > s and line[e - 1] in _STRIP:
            e -= 1
        if "@" in line[s:e]:
            out.append((s, e, "email"))
    for m in DOTTED.finditer(line):
        out.append((m.start(), m.end(), "ip"))
    for m in COLONHEX.finditer(line):
        g = m.group()
        if any(c.isdigit() for c in g) and len(g.strip(":")) >= 2:
            out.append((m.start(), m.end(), "ip"))
    for m in DIGITRUN.finditer(line):
        if sum(c.isdigit() for c in m.group()) >= 7:
            s, e = m.start(), m.end()
            if line[s] == "(" and ")" not in line[s:e]:
                s += 1
            if line[e - 1] == ")" and "(" not in line[s:e]:
                e -= 1
            out.append((s, e, "phone"))
    return sorted(out)


def pages():
    """(source file, url, host, lang, text) of every page."""
    from datapipe.io.items import host_of
    from datapipe.io.readers import read_warc
    from datapipe.models import resolve_model
    from datapipe.stages.langid import load_fasttext, predict_languages
    from datapipe.stages.lib.extract_page import extract_one

    model = load_fasttext(resolve_model("lid.176.ftz"))
    data = ROOT.parent / "shared" / "data"
    for path in sorted(glob.glob(str(data / "warc" / "*.warc.gz"))):
        try:
            for item in read_warc(path):
                row = item.row
                if item.status != "document" or "payload" not in row:
                    continue
                try:
                    text = extract_one(row["payload"], row.get("charset"), main_content=False)[0]
                except Exception:  # noqa: BLE001 - a page that does not extract is no candidate
                    continue
                if text and text.strip():
                    lang = predict_languages(model, [text], 100_000)[0][0]
                    yield os.path.basename(path), row["url"], row["host"], lang, text
        except Exception:  # noqa: BLE001 - the clipped sample ends mid-stream; keep what was read
            continue
    for path in sorted(glob.glob(str(data / "cc_text" / "*.jsonl.gz"))):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                url = d.get("metadata", {}).get("url") or d["id"]
                lang = predict_languages(model, [d["text"]], 100_000)[0][0]
                yield os.path.basename(path), url, host_of(url), lang, d["text"]


def _matcher_spans(text: str, host: str | None) -> list[tuple[int, int]]:
    import phonenumbers
    from phonenumbers import Leniency, PhoneNumberMatcher

    tld = (host or "").rsplit(".", 1)[-1].upper()
    regions = {"US"} | ({tld} if tld in phonenumbers.SUPPORTED_REGIONS else set()) | ({"GB"} if tld == "UK" else set())
    out = []
    for region in sorted(regions):
        out += [(m.start, m.end) for m in PhoneNumberMatcher(text, region, leniency=Leniency.POSSIBLE)]
    return out


def build(out_path: str, rnd: int = 1, exclude: tuple[str, ...] = ()) -> None:
    """Round 1: both splits. Later rounds: test-split pages only, lines of the ``exclude`` files
    (earlier rounds) left out, another seed: fresh held-out samples drawn after the detector was frozen."""
    rng = random.Random(SEEDS[rnd])
    quota = QUOTAS[rnd]
    used = {}
    for path in exclude:
        with open(path, encoding="utf-8") as f:
            for line in f:
                seg = json.loads(line)
                used.setdefault(seg["url"], []).append(seg["text"])
    pools = {"email": [], "ip": [], "colon": [], "phone_hit": [], "phone_miss": []}
    lines_of = {}
    for src, url, host, lang, text in pages():
        if rnd > 1 and page_split(url) != "test":
            continue
        lines = text.split("\n")
        lines_of[url] = (src, host, lang, lines)
        page_pool = {k: [] for k in pools}
        for li, line in enumerate(lines):
            if any(t in line for t in used.get(url, ())):
                continue
            cands = candidates(line)
            hits = _matcher_spans(line, host) if any(f == "phone" for *_, f in cands) else []
            for s, e, fam in cands:
                if fam == "phone":
                    fam = "phone_hit" if any(a < e and s < b for a, b in hits) else "phone_miss"
                elif fam == "ip" and not DOTTED.fullmatch(line[s:e]):
                    fam = "colon"
                page_pool[fam].append((url, li, s, e))
        for k, v in page_pool.items():
            rng.shuffle(v)
            pools[k] += v if k == "ip" else v[:PER_PAGE]
    seeds = []
    for k, v in pools.items():
        rng.shuffle(v)
        seeds += [(k, *x) for x in v[:quota[k]]]
        print(f"{k}: {len(v)} in pool, {min(len(v), quota[k])} seeds", file=sys.stderr)
    # One segment per (page, line, window); seeds whose windows overlap share a segment.
    by_line = {}
    for stratum, url, li, s, e in seeds:
        by_line.setdefault((url, li), []).append((s, e, stratum))
    segments = []
    for (url, li), ss in sorted(by_line.items()):
        src, host, lang, lines = lines_of[url]
        line = lines[li]
        cands = candidates(line)
        windows = []
        for s, e, stratum in sorted(ss):
            a, b = _window(line, s, e, cands)
            if windows and a <= windows[-1][1]:
                windows[-1] = (windows[-1][0], max(b, windows[-1][1]), windows[-1][2] | {stratum})
            else:
                windows.append((a, b, {stratum}))
        for a, b, strata in windows:
            seg = line[a:b]
            inside = [(s - a, e - a, f) for s, e, f in cands if s >= a and e <= b]
            segments.append({"id": hashlib.sha1(f"{url}\n{li}\n{a}".encode()).hexdigest()[:12],
                             "split": page_split(url), "round": rnd, "source": src, "url": url, "host": host, "lang": lang,
                             "strata": sorted(strata), "text": seg, "candidates": [list(c) for c in inside]})
    with open(out_path, "w", encoding="utf-8") as f:
        for seg in segments:
            f.write(json.dumps(seg, ensure_ascii=False) + "\n")
    n = sum(len(s["candidates"]) for s in segments)
    print(f"{len(segments)} segments, {n} candidates -> {out_path}", file=sys.stderr)


def _window(line: str, s: int, e: int, cands) -> tuple[int, int]:
    if len(line) <= 2 * WINDOW + (e - s):
        return 0, len(line)
    a, b = max(0, s - WINDOW), min(len(line), e + WINDOW)
    changed = True
    while changed:  # never cut a candidate; snap to whitespace
        changed = False
        for cs, ce, _ in cands:
            if cs < a < ce:
                a, changed = cs, True
            if cs < b < ce:
                b, changed = ce, True
        while 0 < a < len(line) and not line[a - 1].isspace():
            a, changed = a - 1, True
        while b < len(line) and not line[b].isspace():
            b, changed = b + 1, True
    return a, b


def merge(cand_path: str, labels_path: str, out_path: str) -> None:
    """Labels TSV (``segment-id<TAB>candidate-index<TAB>label``) -> the annotated JSONL.

    ``label`` is ``-`` (no PII in the candidate), ``?`` (undecidable: left out of scoring) or
    ``kind:exact text`` entries joined by `` || ``; each text must overlap its candidate (a number
    may start before the loose run, as ``+49 - (40) - 300 30 - 1141`` does); a space in a label
    matches any one white-space character of the text.
    """
    labels = {}
    with open(labels_path, encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                sid, idx, lab = line.rstrip("\n").split("\t")
                labels[(sid, int(idx))] = lab
    with open(cand_path, encoding="utf-8") as f:
        segs = [json.loads(line) for line in f]
    out = []
    for seg in segs:
        gold, ignore = [], []
        for i, (s, e, fam) in enumerate(seg["candidates"]):
            lab = labels[(seg["id"], i)]  # KeyError: an unlabelled candidate
            if lab == "-":
                continue
            if lab == "?":
                ignore.append([s, e])
                continue
            for part in lab.split(" || "):
                kind, sub = part.split(":", 1)
                assert kind in ("email", "phone", "ip"), (seg["id"], i, part)
                # A space in the label stands for any one white-space character (no-break spaces).
                pat = re.compile("".join(r"\s" if ch == " " else re.escape(ch) for ch in sub))
                hits = [k for k in range(len(seg["text"])) if pat.match(seg["text"], k) and k < e and k + len(sub) > s]
                assert hits, (seg["id"], i, sub, seg["text"][s:e])
                if [hits[0], hits[0] + len(sub), kind] not in gold:
                    gold.append([hits[0], hits[0] + len(sub), kind])
        # host comes back from the URL (datapipe.io.items.host_of); source and strata stay in the candidates file.
        rec = {k: seg[k] for k in ("id", "split", "round", "url", "lang", "text", "candidates")}
        rec["gold"] = sorted(gold)
        if ignore:
            rec["ignore"] = ignore
        out.append(rec)
    with open(out_path, "w", encoding="utf-8") as f:
        for rec in out:
            f.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "candidates":
        build(sys.argv[2])
    elif sys.argv[1] == "candidates-round":
        build(sys.argv[2], rnd=int(sys.argv[3]), exclude=tuple(sys.argv[4:]))
    elif sys.argv[1] == "merge":
        merge(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)
