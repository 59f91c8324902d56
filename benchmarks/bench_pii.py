"""PII masking on hand-labelled real-page spans: precision / recall per kind of the pii stage next to
the implementation it replaced, on the test split of ``data/pii_spans.jsonl`` (rules: ``data/PII_SPANS.md``).

    .venv/bin/python benchmarks/bench_pii.py            # Markdown tables, then one JSON object (run.py's helper format)
    .venv/bin/python benchmarks/bench_pii.py --errors   # also every test-split FP / FN of the current stage

Rows: ``test`` (all test-split segments), ``test, rounds 2-3`` (samples drawn and labelled after the
detector was frozen: never looked at while tuning) and ``dev`` (what the rules were tuned on).
The previous implementation is ``stages/pii.py`` at ``OLD_COMMIT``, read with ``git show`` and run
live; without git its figures come from ``OLD_RECORDED``.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pii_eval

from datapipe.stages import pii

OLD_COMMIT = "42a309abc3bef79e84f1dbbe8a47951d5389e5ed"
SETS = (("test", "test", None), ("test, rounds 2-3", "test", (2, 3)), ("dev", "dev", None))
# The old stage's counts, measured live by this script (git show OLD_COMMIT) on 2026-12-01 on this
# data file; used only where git cannot show that commit (an export without history).
OLD_RECORDED = {
    "test": {"email": {"tp": 128, "fp": 5, "fn": 2, "tn": 144}, "phone": {"tp": 140, "fp": 51, "fn": 27, "tn": 485}, "ip": {"tp": 6, "fp": 1, "fn": 0, "tn": 26}},
    "test, rounds 2-3": {"email": {"tp": 70, "fp": 4, "fn": 2, "tn": 80}, "phone": {"tp": 99, "fp": 26, "fn": 14, "tn": 330}, "ip": {"tp": 0, "fp": 0, "fn": 0, "tn": 13}},
    "dev": {"email": {"tp": 49, "fp": 0, "fn": 0, "tn": 50}, "phone": {"tp": 38, "fp": 11, "fn": 8, "tn": 168}, "ip": {"tp": 5, "fp": 1, "fn": 0, "tn": 17}},
}


def new_find(seg: dict):
    return pii.find_pii(seg["text"], pii.region_for(seg["host"], seg["lang"]))


def measure(find) -> dict:
    return {name: pii_eval.score(pii_eval.load(split, rounds), find)[0] for name, split, rounds in SETS}


def table(name: str, new: dict, old: dict, old_source: str) -> str:
    rows = [f"### {name}", "",
            "| kind | gold | new TP | new FP | new FN | new TN | new P | new R | old P | old R |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind in pii_eval.KINDS:
        c, o = new[kind], old[kind]
        p, r = pii_eval.precision_recall(c)
        op, orr = pii_eval.precision_recall(o)
        rows.append(f"| {kind} | {c['tp'] + c['fn']} | {c['tp']} | {c['fp']} | {c['fn']} | {c['tn']} | "
                    f"{p:.3f} | {r:.3f} | {op:.3f} | {orr:.3f} |")
    rows.append(f"\nold = stages/pii.py at {OLD_COMMIT[:10]} ({old_source}); P or R of a kind without "
                "gold or predictions is shown as 1.000.\n")
    return "\n".join(rows)


def main() -> None:
    new = measure(new_find)
    try:
        old_mod = pii_eval.module_at(OLD_COMMIT)
        old = measure(lambda s: old_mod.find_pii(s["text"], old_mod.region_for_host(s["host"])))
        old_source = "measured now"
    except (subprocess.CalledProcessError, FileNotFoundError):
        old, old_source = OLD_RECORDED, "recorded figures: git could not show the commit"
    segs = pii_eval.load()
    n_spans = sum(len(s["candidates"]) for s in segs)
    print(f"PII evaluation set: {len(segs)} segments, {n_spans} candidate spans, "
          f"{sum(len(s['gold']) for s in segs)} gold PII spans\n")
    for name, _, _ in SETS:
        print(table(name, new[name], old[name], old_source))
    if "--errors" in sys.argv:
        for e in pii_eval.score(pii_eval.load("test"), new_find)[1]:
            print(f"{e['error']} {e['kind']} {e['span']!r} | {e['text'][:160]!r}")
    summary = {name: {kind: {"new": dict(zip(("precision", "recall"), pii_eval.precision_recall(new[name][kind])),
                                          **new[name][kind]),
                             "old": dict(zip(("precision", "recall"), pii_eval.precision_recall(old[name][kind])),
                                         **old[name][kind])}
                      for kind in pii_eval.KINDS} for name, _, _ in SETS}
    print(json.dumps({"pii": summary, "old_commit": OLD_COMMIT, "old_source": old_source}))


if __name__ == "__main__":
    main()
