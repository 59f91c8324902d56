"""What each rule family of the main manifest removes on the sample, and a hand-checked sample of it.

    datapipe run manifests/cc-2026.yaml --input ../shared/data/warc --output runs/sample    # = make run
    .venv/bin/python benchmarks/rule_audit.py runs/sample                    # fractions per family (JSON)
    .venv/bin/python benchmarks/rule_audit.py runs/sample --show c4_bad_words  # print the audit sample to read
    .venv/bin/python benchmarks/rule_audit.py runs/sample --table            # README table with the verdicts

English documents = every document of the run with ``lang == "en"`` (lid.176, after ``langid``).
For each family two fractions: **in the chain** (rejected by that family as the manifest runs it,
so only documents earlier families kept can reach it; over all English documents) and **alone**
(the family's stages with the manifest's configs applied to every English document: on the text as
extracted, or, for the stages after ``c4``, on it cleaned by c4's line rules as in the chain). The
audit sample: 30 rejections per family (all when fewer), its chain rejections first, topped up
with its rejections alone, drawn with a fixed seed; each was read and judged by hand (``data/rule_audit.jsonl``: ``id``, ``family``,
``verdict`` right / wrong / debatable, ``reason``; the rules for the verdicts are in the README).
"""
from __future__ import annotations

import argparse
import glob
import json
import random
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
AUDIT = HERE / "data" / "rule_audit.jsonl"
SAMPLE = 30
SEED = 15
#: family -> (stages of the main manifest, a reason prefix test). ``c4`` is split in two: its
#: bad-words rule (the default in question) and its other page rules.
FAMILIES = {
    "url_blocklist": (["url_blocklist"], lambda r: r.startswith("url_blocklist")),
    "gopher_repetition": (["gopher_repetition"], lambda r: r.startswith("gopher_repetition")),
    "gopher_quality": (["gopher_quality"], lambda r: r.startswith("gopher_quality")),
    "c4_bad_words": (["c4"], lambda r: r == "c4:bad_words"),
    "c4_other": (["c4"], lambda r: r.startswith("c4") and r != "c4:bad_words"),
    "fineweb": (["fineweb"], lambda r: r.startswith("fineweb")),
    "quality_classifier": (["quality_classifier"], lambda r: r.startswith("quality_classifier")),
    "safety": (["toxicity", "nsfw", "profanity"], lambda r: r.split(":")[0] in ("toxicity", "nsfw", "profanity")),
}


def manifest_configs() -> dict:
    import yaml

    m = yaml.safe_load((ROOT / "manifests" / "cc-2026.yaml").read_text())
    return {k: (v or {}) for st in m["stages"] for k, v in st.items()}


def english_docs(run: Path) -> list[dict]:
    """Every English document of a run (kept, rejected), with its text as extracted."""
    rows = []
    for sub in ("_filtered", "rejected"):
        for f in sorted(glob.glob(str(run / sub / "*.parquet"))):
            t = pq.read_table(f)
            cols = set(t.column_names)
            for r in t.to_pylist():
                if r.get("lang") != "en" or not r.get("text"):
                    continue
                # c4 and pii edit the text; their snapshots hold it as it was before them.
                orig = r.get("text_before_c4") if "text_before_c4" in cols else None
                orig = orig or (r.get("text_before_pii") if "text_before_pii" in cols else None) or r["text"]
                rows.append({"id": r["id"], "url": r["url"], "host": r.get("host"), "lang": "en",
                             "lang_score": r.get("lang_score"), "text": orig,
                             "chain_reason": r.get("reject_reason")})
    rows.sort(key=lambda r: r["id"])
    return rows


def alone(docs: list[dict]) -> dict[str, list[str | None]]:
    """Per family: the reason each document gets from that family's stages alone (None = kept)."""
    from datapipe.engine.task import build_chain

    cfgs = manifest_configs()
    table = pa.table({k: [d[k] for d in docs] for k in ("id", "url", "host", "lang", "text")})
    def run(name: str, cfg: dict, src: pa.Table | None = None) -> pa.Table:
        src = table if src is None else src
        stage = build_chain([{name: cfg}])[0]
        return pa.concat_tables([stage(src.slice(i, 256)) for i in range(0, src.num_rows, 256)])

    # The stages after c4 see its cleaned lines in the chain: give them every text so cleaned (c4's
    # line rules only, its page rules off so that no text is left uncleaned).
    c4_lines = {**cfgs.get("c4", {}), "filter_lorem_ipsum": False, "filter_curly_bracket": False,
                "min_sentences": None, "filter_bad_words": False}
    cleaned = run("c4", c4_lines).select(["id", "url", "host", "lang", "text"])
    after_c4 = {"fineweb", "quality_classifier", "toxicity", "nsfw", "profanity"}

    cache: dict[str, pa.Table] = {}
    out = {}
    for fam, (stages, test) in FAMILIES.items():
        if fam == "c4_bad_words":
            # c4 reports its first failing rule; a page with a listed word is a bad-words rejection
            # whatever else it fails.
            # measured with the rule on, whatever the manifest says (it is the rule in question)
            t = run("c4", {**cfgs.get("c4", {}), "filter_bad_words": True})
            out[fam] = [("c4:bad_words" if (n or 0) > 0 else None) for n in t.column("c4_bad_word_count").to_pylist()]
            continue
        if fam == "c4_other":
            t = run("c4", {**cfgs.get("c4", {}), "filter_bad_words": False})
            out[fam] = t.column("reject_reason").to_pylist()
            continue
        reasons = [None] * len(docs)
        for name in stages:
            if name not in cache:
                cache[name] = run(name, cfgs.get(name, {}), cleaned if name in after_c4 else None)
            t = cache[name]
            reasons = [a or (b if b and test(b) else None) for a, b in zip(reasons, t.column("reject_reason").to_pylist())]
        out[fam] = reasons
    return out


def fractions(docs: list[dict], al: dict) -> dict:
    n = len(docs)
    res = {"english_docs": n, "families": {}}
    for fam, (_, test) in FAMILIES.items():
        chain = sum(1 for d in docs if d["chain_reason"] and test(d["chain_reason"]))
        solo = sum(1 for r in al[fam] if r)
        res["families"][fam] = {"chain": chain, "chain_frac": round(chain / n, 4) if n else None,
                                "alone": solo, "alone_frac": round(solo / n, 4) if n else None,
                                "reasons_alone": dict(Counter(r for r in al[fam] if r).most_common())}
    return res


def audit_sample(docs: list[dict], al: dict, fam: str) -> list[dict]:
    """SAMPLE rejections of a family: its chain rejections first (what the manifest removes), topped
    up with rejections it makes alone; each group in a seeded random order."""
    test = FAMILIES[fam][1]
    in_chain = [(d, d["chain_reason"]) for d in docs if d["chain_reason"] and test(d["chain_reason"])]
    ids = {d["id"] for d, _ in in_chain}
    only_alone = [(d, r) for d, r in zip(docs, al[fam]) if r and d["id"] not in ids]
    rng = random.Random(f"{SEED}:{fam}")
    rng.shuffle(in_chain)
    rng.shuffle(only_alone)
    return [dict(d, reason=r, in_chain=d["id"] in ids) for d, r in (in_chain + only_alone)[:SAMPLE]]


def verdicts() -> list[dict]:
    if not AUDIT.is_file():
        return []
    return [json.loads(line) for line in AUDIT.read_text(encoding="utf-8").splitlines() if line.strip()]


def table(fr: dict) -> str:
    v = verdicts()
    rows = ["| family | removed in the chain | removed alone | audited | right | wrong | debatable |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    n = fr["english_docs"]
    for fam, f in fr["families"].items():
        c = Counter(x["verdict"] for x in v if x["family"] == fam)
        k = sum(c.values())
        rows.append(f"| {fam} | {f['chain']} ({100 * f['chain'] / n:.1f}%) | {f['alone']} ({100 * f['alone'] / n:.1f}%) "
                    f"| {k} | {c['right']} | {c['wrong']} | {c['debatable']} |")
    return "\n".join(rows) + f"\n\n{n} English documents."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="a run directory of the main manifest on the sample (make run: runs/sample)")
    ap.add_argument("--show", metavar="FAMILY", help="print that family's audit sample, to read")
    ap.add_argument("--chars", type=int, default=1200, help="characters of each document to print (--show)")
    ap.add_argument("--table", action="store_true", help="the README table: fractions and the verdicts")
    a = ap.parse_args()
    docs = english_docs(Path(a.run))
    al = alone(docs)
    if a.show:
        from datapipe.env import shared_data
        from datapipe.stages.lib import wordlists as wl

        auto = wl.ldnoobw_automaton(str(shared_data() / "wordlists" / "ldnoobw"), "en")
        for i, d in enumerate(audit_sample(docs, al, a.show)):
            text = " / ".join(x.strip() for x in d["text"].splitlines() if x.strip())
            hits = ""
            if a.show == "c4_bad_words":
                hits = "\n    listed: " + " | ".join(f"{w}: ...{text[max(0, s0 - 50):e0 + 50]}..."
                                                      for s0, e0, w in wl.find_listed_words(text, auto, "en")[:4])
            print(f"=== {i} {d['id']} {d['url']}\n    reason {d['reason']} (chain: {d['chain_reason']}){hits}"
                  f"\n    {text[:a.chars]}\n")
        return
    fr = fractions(docs, al)
    print(table(fr) if a.table else json.dumps(fr, indent=1))


if __name__ == "__main__":
    main()
