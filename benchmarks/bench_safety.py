"""Safety stages on the safety set (``safety_set.py``, rules in ``data/SAFETY_SET.md``): recall on
pages with inserted toxic / sexual sentences and false rejections of clean and benign pages, for
the span-level stages next to the whole-document scoring they replaced, and docs/s of both.

    .venv/bin/python benchmarks/bench_safety.py            # Markdown tables, then one JSON object (run.py's helper format)
    .venv/bin/python benchmarks/bench_safety.py --sweep    # dev-split grid over the nsfw / profanity thresholds (how the defaults were chosen)
    .venv/bin/python benchmarks/bench_safety.py --errors   # test-split misses and false rejections of the new chain

"old" = the stages at ``OLD_COMMIT``, run live: the toxicity model of that commit (read with
``git show``) on each whole document (its first 200 tokens), alt-profanity-check on the whole
document (first 100,000 characters), both rejecting above 0.5; no NSFW model shipped then.
"prev" = the span-level chain before the re-tune (``PREV_COMMIT``: its NSFW model and thresholds,
this checkout's segmentation). "new" = the stages of this checkout with their default configs
(``toxicity`` / ``nsfw`` / ``profanity``); "chain" = rejected by any stage of the main manifest's
safety set.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import safety_set  # noqa: E402

OLD_COMMIT = "e512905"  # last commit with whole-document scoring (issue 15's report)
# The span-level chain before the re-tune: its NSFW model (read with git show) and thresholds, scored
# with this checkout's segmentation. Its README figures (test 0.899 / 2.2%) came from this commit.
PREV_COMMIT = "5898349"
PREV_NSFW_MODEL = "classifiers/models/nsfw_ut1_en.ftz"
PREV_CHAIN = {"toxicity": {"threshold": None}, "nsfw": {"threshold": 0.95},
              "profanity": {"threshold": 0.98, "max_flagged": 2, "span_threshold": 0.5}}
OLD_TOX_MODEL = "classifiers/models/toxicity_weak_en.ftz"
# The main manifest's safety stages and configs (manifests/cc-2026.yaml).
MAIN_CHAIN = {"toxicity": {"threshold": None}, "nsfw": {}, "profanity": {}}


def _manifest_chain() -> dict:
    """Safety stage configs from the main manifest (falls back to MAIN_CHAIN)."""
    import yaml

    try:
        m = yaml.safe_load((HERE.parent / "manifests" / "cc-2026.yaml").read_text())
        stages = {k: (v or {}) for st in m["stages"] for k, v in st.items()}
        return {k: stages[k] for k in ("toxicity", "nsfw", "profanity") if k in stages}
    except Exception:  # noqa: BLE001 - the benchmark still runs on the recorded chain
        return MAIN_CHAIN


def new_stage(name: str, cfg: dict):
    from datapipe.stage import registry

    cls = registry()[name]
    return cls(cls.Config(**cfg))


def new_signals(items: list[dict], chain: dict) -> dict[str, dict[str, np.ndarray]]:
    """Per stage: the aggregate signals (numpy) of every item, and the reject flags under its config."""
    out = {}
    texts = [it["text"] for it in items]
    langs = ["en"] * len(items)
    for name, cfg in chain.items():
        st = new_stage(name, cfg)
        agg = st.aggregate(texts, langs)
        sig = {f"{name}_score": agg["max"], f"{name}_flagged": agg["flagged"],
               f"{name}_flagged_char_frac": agg["flagged_char_frac"]}
        rej = np.array([st.decide({k: float(v[i]) for k, v in sig.items()} | {"lang": "en"}, st.config) is not None
                        for i in range(len(items))])
        out[name] = {**agg, "reject": rej}
    return out


_OLD_MODEL: list = []


def old_toxicity_model():
    """The toxicity classifier of OLD_COMMIT (read with git show, loaded once), or None without git."""
    from datapipe.classifiers.model import load_classifier

    if not _OLD_MODEL:
        try:
            blob = subprocess.run(["git", "show", f"{OLD_COMMIT}:{OLD_TOX_MODEL}"], cwd=HERE.parent, check=True,
                                  capture_output=True).stdout
            side = subprocess.run(["git", "show", f"{OLD_COMMIT}:{OLD_TOX_MODEL[:-4]}.json"], cwd=HERE.parent,
                                  check=True, capture_output=True).stdout
        except (subprocess.CalledProcessError, FileNotFoundError):
            _OLD_MODEL.append(None)
            return None
        tmp = Path(tempfile.mkdtemp(prefix="old_tox_"))
        (tmp / "old_tox.ftz").write_bytes(blob)
        (tmp / "old_tox.json").write_bytes(side)
        _OLD_MODEL.append(load_classifier(tmp / "old_tox.ftz"))
    return _OLD_MODEL[0]


def prev_chain() -> dict | None:
    """PREV_CHAIN with the NSFW model of PREV_COMMIT (extracted with git show), or None without git."""
    try:
        tmp = Path(tempfile.mkdtemp(prefix="prev_nsfw_"))
        for suffix in (".ftz", ".json"):
            blob = subprocess.run(["git", "show", f"{PREV_COMMIT}:{PREV_NSFW_MODEL[:-4]}{suffix}"], cwd=HERE.parent,
                                  check=True, capture_output=True).stdout
            (tmp / f"prev_nsfw{suffix}").write_bytes(blob)
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    return {**PREV_CHAIN, "nsfw": {**PREV_CHAIN["nsfw"], "model_path": str(tmp / "prev_nsfw.ftz")}}


def old_scores(items: list[dict]) -> dict[str, np.ndarray]:
    """Whole-document scores of the previous stages (see the module doc); no toxicity without git."""
    from profanity_check import predict_prob

    texts = [it["text"] for it in items]
    out = {"profanity": np.asarray(predict_prob([t[:100_000] for t in texts]), dtype=np.float64)}
    clf = old_toxicity_model()
    if clf is not None:
        out["toxicity"] = np.asarray(clf.score(texts), dtype=np.float64)
    return out


def rates(items: list[dict], reject: np.ndarray) -> dict:
    kinds = np.array([it["kind"] for it in items])
    ks = np.array([it["k"] for it in items])
    pos = np.array([str(it["position"]) for it in items])

    def frac(mask):
        n = int(mask.sum())
        return {"n": n, "rejected": int(reject[mask].sum()), "rate": round(float(reject[mask].mean()), 4) if n else None}

    r = {"recall_toxic": frac(kinds == "toxic"), "recall_sexual": frac(kinds == "sexual"),
         "recall": frac((kinds == "toxic") | (kinds == "sexual")),
         "false_rejection_clean": frac(kinds == "clean"), "false_rejection_benign": frac(kinds == "benign"),
         "false_rejection": frac((kinds == "clean") | (kinds == "benign")),
         "unclean_rejected": frac(kinds == "unclean")}
    for k in (1, 2, 3):
        r[f"recall_k{k}"] = frac(((kinds == "toxic") | (kinds == "sexual")) & (ks == k))
    for p in safety_set.POSITIONS:
        r[f"recall_{p}"] = frac(((kinds == "toxic") | (kinds == "sexual")) & (pos == p))
    return r


def evaluate(split: str, chain: dict) -> dict:
    items = safety_set.build(split)
    sig = new_signals(items, chain)
    new = {name: rates(items, s["reject"]) for name, s in sig.items()}
    new["chain"] = rates(items, np.any([s["reject"] for s in sig.values()], axis=0))
    old_s = old_scores(items)
    old = {name: rates(items, s > 0.5) for name, s in old_s.items()}
    old["chain"] = rates(items, np.any([s > 0.5 for s in old_s.values()], axis=0))
    out = {"items": items, "signals": sig, "new": new, "old": old}
    prev = prev_chain()
    if prev is not None:
        psig = new_signals(items, prev)
        out["prev"] = {"chain": rates(items, np.any([s["reject"] for s in psig.values()], axis=0))}
    return out


def table(split: str, res: dict) -> str:
    rows = [f"### {split} split ({len(res['items'])} pages)", "",
            "| scorer | recall toxic | recall sexual | recall | false rej. clean | false rej. benign | false rej. all | unclean rej. |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def cell(r):
        return f"{r['rate']:.3f} ({r['rejected']}/{r['n']})" if r["n"] else "-"

    for who in ("new", "prev", "old"):
        for name, r in res.get(who, {}).items():
            rows.append(f"| {who} {name} | {cell(r['recall_toxic'])} | {cell(r['recall_sexual'])} | {cell(r['recall'])} | "
                        f"{cell(r['false_rejection_clean'])} | {cell(r['false_rejection_benign'])} | "
                        f"{cell(r['false_rejection'])} | {cell(r['unclean_rejected'])} |")
    c = res["new"]["chain"]
    rows.append("")
    rows.append("new chain recall by inserted sentences k: " + ", ".join(
        f"k={k} {c[f'recall_k{k}']['rate']:.3f}" for k in (1, 2, 3)) + "; by position: " + ", ".join(
        f"{p} {c[f'recall_{p}']['rate']:.3f}" for p in safety_set.POSITIONS))
    return "\n".join(rows) + "\n"


def throughput(chain: dict, reps: int = 1) -> dict:
    """docs/s over the clean English pages (all splits) for the old whole-document scoring and the
    new span-level stages, one process (run.py pins helpers to one core)."""
    from profanity_check import predict_prob

    pages = [p["text"] for p in safety_set.english_pages()]
    old = old_scores([{"text": t} for t in pages[:8]])  # warm-up, model load
    t0 = time.perf_counter()
    for _ in range(reps):
        old = old_scores([{"text": t} for t in pages])
    t_old = (time.perf_counter() - t0) / reps
    predict_prob(["warm up"])
    stages = {name: new_stage(name, cfg) for name, cfg in chain.items()}
    for st in stages.values():
        st.aggregate(pages[:8], ["en"] * 8)
    per = {}
    for name, st in stages.items():
        t0 = time.perf_counter()
        for _ in range(reps):
            st.aggregate(pages, ["en"] * len(pages))
        per[name] = (time.perf_counter() - t0) / reps
    t_new = sum(per.values())
    chars = sum(len(t) for t in pages)
    return {"docs": len(pages), "chars": chars, "old_docs_per_s": round(len(pages) / t_old, 1),
            "new_docs_per_s": round(len(pages) / t_new, 1),
            "new_docs_per_s_by_stage": {k: round(len(pages) / v, 1) for k, v in per.items()},
            "old_scorers": sorted(old)}


#: The grid ``--sweep`` searches on the dev half, and the rule that picked the defaults from it.
SWEEP_GRID = {"nsfw_threshold": (0.9, 0.95, 0.97, 0.98, 0.99, 0.995),
              "profanity_threshold": (0.95, 0.97, 0.98, 0.99, 0.995),
              "profanity_max_flagged": (0, 1, 2, 3), "profanity_span_threshold": (0.5, 0.7, 0.8, 0.9)}
SWEEP_RULE = "highest dev recall with dev false rejection <= 1% (half the 2% target); ties: lower false rejection"


def dev_unit_scores() -> tuple[list[dict], dict[str, dict[str, np.ndarray]]]:
    """Dev items and, per stage, the max unit score and per-unit scores with their document index."""
    items = safety_set.build("dev")
    texts = [it["text"] for it in items]
    out = {}
    for name in ("nsfw", "profanity"):
        st = new_stage(name, {})
        st.ensure_setup()
        spans, docs, _, cores = st.spans_of(texts, ["en"] * len(texts), with_cores=True)
        out[name] = {"scores": st.unit_scores(spans, cores), "docs": docs}
    return items, out


def sweep(chain: dict) -> dict:
    """Dev split: recall and false rejections over SWEEP_GRID; prints the best settings, returns the pick."""
    import itertools

    items, sc = dev_unit_scores()
    n = len(items)
    kinds = np.array([it["kind"] for it in items])
    pos = (kinds == "toxic") | (kinds == "sexual")
    neg = (kinds == "clean") | (kinds == "benign")

    def doc_max(s, d):
        mx = np.zeros(n)
        np.maximum.at(mx, d, s)
        return mx

    nmax = doc_max(sc["nsfw"]["scores"], sc["nsfw"]["docs"])
    pmax = doc_max(sc["profanity"]["scores"], sc["profanity"]["docs"])
    rows = []
    for nt, pt, pk, ps in itertools.product(*SWEEP_GRID.values()):
        cnt = np.bincount(sc["profanity"]["docs"], weights=sc["profanity"]["scores"] > ps, minlength=n)
        r = (nmax > nt) | (pmax > pt) | (cnt > pk)
        rows.append({"nsfw_threshold": nt, "profanity_threshold": pt, "profanity_max_flagged": pk,
                     "profanity_span_threshold": ps, "recall": round(float(r[pos].mean()), 4),
                     "false_rejection": round(float(r[neg].mean()), 4), "false_rejected": int(r[neg].sum())})
    ok = sorted((x for x in rows if x["false_rejection"] <= 0.01), key=lambda x: (-x["recall"], x["false_rejection"]))
    print(f"dev split, {int(pos.sum())} inserted / {int(neg.sum())} clean+benign pages; rule: {SWEEP_RULE}")
    for x in ok[:8]:
        print("  " + json.dumps(x))
    print("pick: " + json.dumps(ok[0]))
    return ok[0]


def main() -> None:
    chain = _manifest_chain()
    if "--sweep" in sys.argv:
        sweep(chain)
        return
    print(f"safety stages as in the main manifest: {json.dumps(chain)}\n")
    res = {split: evaluate(split, chain) for split in ("test", "dev")}
    for split in ("test", "dev"):
        print(table(split, res[split]))
    if "--errors" in sys.argv:
        r = res["test"]
        rej = np.any([s["reject"] for s in r["signals"].values()], axis=0)
        for it, x in zip(r["items"], rej):
            if (it["kind"] in ("toxic", "sexual") and not x) or (it["kind"] in ("clean", "benign") and x):
                why = {n: round(float(s["max"][r["items"].index(it)]), 3) for n, s in r["signals"].items()}
                print(f"{'MISS' if not x else 'FALSE'} {it['kind']} k={it['k']} {it['position']} {it['topic']} {why} {it['id'][:80]}")
    tp = throughput(chain, reps=int(os.environ.get("BENCH_REPS", "1")))
    print(f"throughput, {tp['docs']} English pages ({tp['chars']:,} chars), one process: "
          f"old whole-document scoring {tp['old_docs_per_s']} docs/s, new span-level {tp['new_docs_per_s']} docs/s "
          f"(by stage: {tp['new_docs_per_s_by_stage']})\n")
    summary = {split: {k: res[split][k] for k in ("new", "prev", "old") if k in res[split]} for split in res}
    print(json.dumps({"safety": summary, "throughput": tp}))


if __name__ == "__main__":
    main()
