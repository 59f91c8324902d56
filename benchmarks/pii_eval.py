"""Scoring of PII detectors on the hand-annotated real-page spans (``data/pii_spans.jsonl``).

Shared by ``bench_pii.py`` and ``tests/test_pii.py``. The labelling rules are in
``data/PII_SPANS.md``. A prediction matches a gold span when the kinds agree and both cover the same
letters and digits (so ``(415) 555-0132`` and ``415) 555-0132`` are the same number, but a
number cut in two, or an address with a glued word, is not). Per kind:

* TP: gold spans matched; FN: gold spans not matched;
* FP: predictions matching no gold span of their kind (a non-PII candidate, a wrong kind, a wrong
  extent, or text no candidate covers);
* TN: candidates of that kind's family holding no gold span of the kind and no prediction of it.

Predictions overlapping a candidate labelled undecidable (``ignore``) are not counted.
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "pii_spans.jsonl"
KINDS = ("email", "phone", "ip")
Span = tuple[int, int, str]


def load(split: str | None = None, rounds: tuple[int, ...] | None = None, path: Path = DATA) -> list[dict]:
    """Annotated segments of ``split`` (``"dev"``, ``"test"``, None = both) and sampling ``rounds``
    (None = all), each with ``host`` taken from its URL as the WARC reader takes it."""
    from datapipe.io.items import host_of

    with open(path, encoding="utf-8") as f:
        segs = [json.loads(line) for line in f if line.strip()]
    segs = [s for s in segs if (split is None or s["split"] == split) and (rounds is None or s["round"] in rounds)]
    for s in segs:
        s.setdefault("host", host_of(s["url"]))
        s.setdefault("ignore", [])
    return segs


def _key(text: str, s: int, e: int) -> frozenset[int]:
    return frozenset(i for i in range(s, e) if text[i].isalnum())


def score(segments: list[dict], find: Callable[[dict], list[Span]]) -> tuple[dict, list[dict]]:
    """``({kind: {"tp", "fp", "fn", "tn"}}, errors)``; ``find(segment)`` returns predicted spans.

    ``errors`` lists each FP and FN with its segment id, kind and text, for reading.
    """
    counts = {k: {"tp": 0, "fp": 0, "fn": 0, "tn": 0} for k in KINDS}
    errors = []
    for seg in segments:
        text = seg["text"]
        ignore = seg.get("ignore", [])
        pred = [p for p in find(seg) if not any(p[0] < b and a < p[1] for a, b in ignore)]
        gold = [((k, _key(text, s, e)), s, e) for s, e, k in seg["gold"]]
        matched: set[int] = set()
        for s, e, k in pred:
            key = (k, _key(text, s, e))
            hit = next((i for i, g in enumerate(gold) if g[0] == key and i not in matched), None)
            if hit is not None:
                matched.add(hit)
                counts[k]["tp"] += 1
            else:
                counts[k]["fp"] += 1
                errors.append({"id": seg["id"], "error": "fp", "kind": k, "span": text[s:e], "text": text})
        for i, (key, s, e) in enumerate(gold):
            if i not in matched:
                counts[key[0]]["fn"] += 1
                errors.append({"id": seg["id"], "error": "fn", "kind": key[0], "span": text[s:e], "text": text})
        for s, e, fam in seg["candidates"]:
            if any(a < e and s < b for a, b in ignore):
                continue
            has_gold = any(k == fam and gs < e and s < ge for gs, ge, k in seg["gold"])
            has_pred = any(k == fam and ps < e and s < pe for ps, pe, k in pred)
            if not has_gold and not has_pred:
                counts[fam]["tn"] += 1
    return counts, errors


def precision_recall(c: dict) -> tuple[float, float]:
    """``(precision, recall)`` of one kind's counts (1.0 where the denominator is 0)."""
    p = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else 1.0
    r = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else 1.0
    return p, r


def module_at(commit: str, path: str = "stages/pii.py") -> ModuleType:
    """The detection functions of ``path`` as it was at ``commit`` (read with ``git show``).

    The stage class and its registration are cut off, so the old module can sit beside the
    current one. Raises ``subprocess.CalledProcessError`` where git or the commit is missing.
    """
    src = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=HERE.parent, check=True,
                         capture_output=True, text=True).stdout
    src = src.split("\n@register\n", 1)[0]
    mod = ModuleType(f"pii_at_{commit[:10]}")
    exec(compile(src, f"{commit[:10]}:{path}", "exec"), mod.__dict__)  # noqa: S102 - this repository's own history
    return mod
