"""Rule families, ours vs datatrove 0.10.1: docs/s on one core and keep/reject agreement.

    .venv/bin/python benchmarks/bench_rules.py [--reps 3]       # BENCH_QUICK=1: 150 documents, 1 rep

Documents: the real pages (``../shared/data/warc/realpages-1171.warc.gz``) read with ``read_input``,
extracted with ``extract_one`` (resiliparse main content), tagged with our langid (lid.176); the
English ones (score >= 0.65, as FineWeb's LanguageFilter) go to both sides through a JSONL file.

Families (ours -> datatrove's, each with its defaults unless said):

* ``gopher_repetition`` -> ``GopherRepetitionFilter()``
* ``gopher_quality``    -> ``GopherQualityFilter()``
* ``c4`` (``filter_bad_words: false``: datatrove's ``C4QualityFilter`` has no bad-words rule,
  that is its separate ``C4BadWordsFilter``) -> ``C4QualityFilter()``
* ``fineweb``           -> ``FineWebQualityFilter()``

Ours runs here, datatrove in a subprocess with ``benchmarks/.venv-datatrove/bin/python`` (this same
file, ``--peer``), both pinned to core 0. Timing: ours = the stage on 256-row Arrow batches; datatrove
= ``filter.run`` over fresh ``Document`` objects (as its pipeline calls it); median of ``--reps``
runs after a warm-up, which is the pass that takes the decisions (datatrove: ``filter.filter(doc)``).

Prints one JSON object: per family ``ours_docs_s``, ``datatrove_docs_s``, ``speed_ratio``
(ours / datatrove), ``agreement_pct``, the counts of one-sided rejections and the most frequent
disagreeing (our reason, datatrove reason) pairs with example document ids.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from timing import repeat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / "work"
PEER_PY = HERE / ".venv-datatrove" / "bin" / "python"
FAMILIES = {  # ours: (stage name, config) ; datatrove filter class name
    "gopher_repetition": (("gopher_repetition", {}), "GopherRepetitionFilter"),
    "gopher_quality": (("gopher_quality", {}), "GopherQualityFilter"),
    "c4": (("c4", {"filter_bad_words": False}), "C4QualityFilter"),
    "fineweb": (("fineweb", {}), "FineWebQualityFilter"),
}
BATCH = 256
QUICK_DOCS = 150


def pin_core0() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


# ---------------------------------------------------------------- documents (ours, main venv)

def warc_path() -> Path:
    shared = Path(os.environ.get("DATAPIPE_SHARED_DATA", ROOT.parent / "shared" / "data"))
    return shared / "warc" / "realpages-1171.warc.gz"


def build_docs(out: Path) -> dict:
    """Extract + langid every HTML page once; cached by the WARC's sha256."""
    src = warc_path()
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    meta = out.with_suffix(".meta.json")
    if out.exists() and meta.exists() and json.loads(meta.read_text()).get("sha256") == digest:
        return json.loads(meta.read_text())
    from datapipe.io.readers import read_input
    from datapipe.models import resolve_model
    from datapipe.stages.langid import load_fasttext, predict_languages
    from datapipe.stages.lib.extract_page import extract_one

    rows = []
    for it in read_input(str(src)):
        if it.status != "document" or not it.row.get("payload"):
            continue
        try:
            text = extract_one(it.row["payload"], it.row.get("charset"))[0]
        except Exception:  # noqa: BLE001 - a page resiliparse cannot parse is simply not a document here
            continue
        if text and text.strip():
            rows.append({"id": it.row["id"], "text": text})
    model = load_fasttext(resolve_model("lid.176.ftz"))
    for r, (lang, score) in zip(rows, predict_languages(model, [r["text"] for r in rows])):
        r["lang"], r["lang_score"] = lang, round(score, 4)
    en = [r for r in rows if r["lang"] == "en" and r["lang_score"] >= 0.65]
    with open(out, "w") as fh:
        for r in en:
            fh.write(json.dumps(r) + "\n")
    m = {"sha256": digest, "source": str(src), "extracted": len(rows), "english": len(en)}
    meta.write_text(json.dumps(m))
    return m


def run_ours(rows: list[dict], reps: int) -> dict:
    import pyarrow as pa

    from datapipe.engine.task import build_chain

    table = pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows],
                      "lang": [r["lang"] for r in rows]})
    batches = [table.slice(i, BATCH) for i in range(0, table.num_rows, BATCH)]
    out = {}
    for fam, ((name, cfg), _) in FAMILIES.items():
        stage = build_chain([{name: cfg}])[0]
        res = [stage(b) for b in batches]  # warm-up and decisions
        secs = repeat(lambda: [stage(b) for b in batches], reps=reps, warmup=0)
        reasons = [x for b in res for x in b.column("reject_reason").to_pylist()]
        out[fam] = {"seconds": secs, "decisions": reasons}
    return out


# ---------------------------------------------------------------- the peer (datatrove venv)

def run_peer(docs_path: str, reps: int) -> dict:
    from datatrove.data import Document
    from datatrove.pipeline import filters as F

    with open(docs_path) as fh:
        rows = [json.loads(line) for line in fh]

    def fresh():
        return [Document(text=r["text"], id=r["id"], metadata={}) for r in rows]

    out = {}
    for fam, (_, cls) in FAMILIES.items():
        flt = getattr(F, cls)()
        decisions = []
        for d in fresh():
            v = flt.filter(d)
            decisions.append(None if v is True else (v[1] if isinstance(v, tuple) else "rejected"))
        # The decision pass above is the warm-up (spaCy loaded). Fresh documents per run:
        # C4QualityFilter rewrites doc.text.
        secs = repeat(lambda: sum(1 for _ in flt.run(iter(fresh()), 0, 1)), reps=reps, warmup=0)
        out[fam] = {"seconds": secs, "decisions": decisions}
    return out


# ---------------------------------------------------------------- comparison

def compare(ids: list[str], ours: dict, peer: dict) -> dict:
    res = {}
    for fam in FAMILIES:
        a, b = ours[fam]["decisions"], peer[fam]["decisions"]
        n = len(a)
        same = sum((x is None) == (y is None) for x, y in zip(a, b))
        pairs = Counter((x, y) for x, y in zip(a, b) if (x is None) != (y is None))
        examples = {}
        for i, (x, y) in enumerate(zip(a, b)):
            if (x is None) != (y is None):
                examples.setdefault(f"{x} | {y}", []).append(ids[i])
        rate_o = n / statistics.median(ours[fam]["seconds"])
        rate_p = n / statistics.median(peer[fam]["seconds"])
        res[fam] = {
            "docs": n,
            "ours_docs_s": round(rate_o, 1), "datatrove_docs_s": round(rate_p, 1),
            "speed_ratio": round(rate_o / rate_p, 2),
            "agreement_pct": round(100 * same / n, 2) if n else None,
            "ours_reject": sum(x is not None for x in a), "datatrove_reject": sum(y is not None for y in b),
            "only_ours_reject": sum(x is not None and y is None for x, y in zip(a, b)),
            "only_datatrove_reject": sum(x is None and y is not None for x, y in zip(a, b)),
            "disagreements": [{"ours": k[0], "datatrove": k[1], "count": c, "ids": examples[f"{k[0]} | {k[1]}"][:3]}
                              for k, c in pairs.most_common(8)],
            "ours_seconds": [round(s, 4) for s in ours[fam]["seconds"]],
            "datatrove_seconds": [round(s, 4) for s in peer[fam]["seconds"]],
        }
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--peer", metavar="DOCS_JSONL", help="(internal) run datatrove's filters on these documents")
    ap.add_argument("--keep-docs", action="store_true", help="write the compared documents to work/rules_docs.jsonl")
    a = ap.parse_args()
    quick = os.environ.get("BENCH_QUICK") == "1"
    reps = a.reps or (1 if quick else 3)
    pin_core0()
    if a.peer:
        from loguru import logger

        logger.remove()
        json.dump(run_peer(a.peer, reps), sys.stdout)
        return
    WORK.mkdir(parents=True, exist_ok=True)
    docs_path = WORK / "rules_docs.jsonl"
    meta = build_docs(docs_path)
    rows = [json.loads(line) for line in open(docs_path)]
    if quick:
        rows = rows[:QUICK_DOCS]
    result = {"input": dict(meta, compared=len(rows), quick=quick, reps=reps, core=sorted(os.sched_getaffinity(0)))}
    if not PEER_PY.exists():
        result["error"] = f"{PEER_PY} missing: datatrove peer not run"
        print(json.dumps(result))
        return
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", dir=WORK, delete=False) as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    try:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(HERE), HF_HOME=str(WORK / "hf"))
        p = subprocess.run(["taskset", "-c", "0", str(PEER_PY), str(Path(__file__).resolve()), "--peer", fh.name,
                            "--reps", str(reps)], env=env, capture_output=True, text=True, cwd=ROOT)
        if p.returncode != 0:
            raise SystemExit(f"datatrove peer failed: {p.stderr[-2000:]}")
        peer = json.loads(p.stdout.strip().splitlines()[-1])
        ver = subprocess.run([str(PEER_PY), "-c", "import importlib.metadata as m; print(m.version('datatrove'))"],
                             capture_output=True, text=True).stdout.strip()
    finally:
        os.unlink(fh.name)
    ours = run_ours(rows, reps)
    result["datatrove_version"] = ver
    result["families"] = compare([r["id"] for r in rows], ours, peer)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
