"""Decontamination: documents holding test items of evaluation benchmarks (GSM8K, MMLU, HumanEval,
WikiText-2 test, ...) lose the matched paragraphs or are dropped.

A document matches an item when a run of ``n`` normalised words (13 by default, GPT-3's choice;
the index's ``n``) is one of the item's n-grams, or when it holds the whole normalised word
sequence of an item shorter than ``n`` words. Normalisation (:mod:`decontam_text`): HTML entities
unescaped, NFKC, casefold, punctuation stripped, whitespace collapsed, labels such as
``Question:`` and choice markers ``(B)`` dropped. The index is built beforehand by
``datapipe decontam index`` (``make models`` builds the default one from ``../shared/data``).

Signals, per document (null where nothing matched is never used: empty lists and 0 instead):

* ``decontam_ngrams`` int32: matched runs (n-grams and whole short items);
* ``decontam_benchmarks`` list<string>: the benchmarks matched, most matched runs first (ties by name);
* ``decontam_items`` list<string>: ``benchmark/item_id`` of every item matched, sorted;
* ``decontam_spans`` list<struct<start, end>>: the matched text as merged [start, end) code-point
  offsets into the text this stage saw (``text_before_decontam`` where it removed paragraphs);
* ``decontam_share`` float32: share of the document's non-space characters in paragraphs
  (``\\n``-separated lines) holding a match.

Actions (``action``): ``remove`` (default) cuts the paragraphs holding a match and keeps the rest,
dropping the document when those paragraphs hold ``drop_share`` or more of it (a page that is
mostly a benchmark dump; 1.0 = only when nothing is left); ``drop`` rejects every matched
document; ``signals`` only records. Reasons: ``decontam:<benchmark>`` (the first of
``decontam_benchmarks``). Why ``remove`` is the default: docs/guides/decontamination.md.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa

from datapipe.env import models_dir
from datapipe.manifest.ranges import PosInt, Probability
from datapipe.models import ModelError
from datapipe.stage import Rule, Stage, StageConfig, merge_reasons, register, with_column

#: File name of the default index in the models folder.
DEFAULT_INDEX = "decontam_index.npz"
BUILD = "`datapipe decontam index --out models/decontam_index.npz` (or `make models`)"
SPAN = pa.struct([pa.field("start", pa.int64()), pa.field("end", pa.int64())])


class DecontamConfig(StageConfig):
    #: Index file; None = ``<models folder>/decontam_index.npz``.
    index: str | None = None
    action: Literal["remove", "drop", "signals"] = "remove"
    #: A document counts as contaminated from this many matched runs on.
    min_ngrams: PosInt = 1
    #: With ``remove``: drop the document when the matched paragraphs hold at least this share of
    #: its non-space characters (1.0: only when nothing would be left).
    drop_share: Probability = 0.5
    #: Only these benchmarks of the index (empty: all).
    benchmarks: list[str] = []


def index_path(config: DecontamConfig) -> Path:
    return Path(config.index) if config.index else models_dir() / DEFAULT_INDEX


#: ``drop``: any document with ``min_ngrams`` matched n-gram runs; ``remove``: one whose matched
#: paragraphs hold ``drop_share`` or more of it; ``signals``: none. The reason names the benchmark
#: with the most matches (``decontam:<benchmark>``).
ENOUGH_NGRAMS = Rule("decontam", "decontam_ngrams", ">=", "min_ngrams")
RULES = (
    Rule("decontam", "decontam_ngrams", ">=", "min_ngrams", only_if=("action", "drop"),
         reason_from="decontam_benchmarks"),
    Rule("decontam", "decontam_share", ">=", "drop_share", only_if=("action", "remove"),
         requires=(ENOUGH_NGRAMS,), reason_from="decontam_benchmarks"),
)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def paragraphs_hit(text: str, spans: list[tuple[int, int]]) -> tuple[list[bool], list[str]]:
    """Lines of ``text`` (split at ``\\n``) and, per line, whether a span overlaps it."""
    lines = text.split("\n")
    hit, pos, j = [], 0, 0
    for line in lines:
        end = pos + len(line)
        while j < len(spans) and spans[j][1] <= pos:
            j += 1
        hit.append(j < len(spans) and spans[j][0] < max(end, pos + 1))
        pos = end + 1
    return hit, lines


def _nonspace(s: str) -> int:
    return len(s) - sum(s.count(c) for c in " \t\r\n\u00a0")


@register
class Decontam(Stage):
    """Benchmark-item matching against a prebuilt n-gram index; see the module docstring."""

    name = "decontam"
    Config = DecontamConfig
    edits = ("text",)  # ``remove`` cuts paragraphs
    rules = RULES
    fields = [
        pa.field("decontam_ngrams", pa.int32()),
        pa.field("decontam_benchmarks", pa.list_(pa.string())),
        pa.field("decontam_items", pa.list_(pa.string())),
        pa.field("decontam_spans", pa.list_(SPAN)),
        pa.field("decontam_share", pa.float32()),
    ]

    def assets(self) -> list:
        p = index_path(self.config)
        if not p.is_file():
            raise ModelError(f"decontam: index {p} not found; build it with {BUILD}")
        return [p]

    def setup(self) -> None:

        p = index_path(self.config)
        if not p.is_file():
            raise ModelError(f"decontam: index {p} not found; build it with {BUILD}")
        try:
            # Lazy: numba loads on the workers that match, not with the manifest.
            from datapipe.stages.lib import decontam_index, decontam_text

            self.index = decontam_index.DecontamIndex(p)
            self._words = decontam_text.words
        except (OSError, ValueError, KeyError) as e:
            raise ModelError(f"decontam: index {p} is unreadable ({e}); rebuild it with {BUILD}") from None
        unknown = sorted(set(self.config.benchmarks) - set(self.index.benchmarks))
        if unknown:
            raise ModelError(f"decontam.benchmarks: {unknown} not in index {p} (it has {', '.join(self.index.benchmarks)})")
        wanted = self.config.benchmarks or self.index.benchmarks
        self.wanted = np.isin(np.arange(len(self.index.benchmarks)),
                              [self.index.benchmarks.index(b) for b in wanted])

    def signals(self, texts: list[str | None]) -> list[dict]:
        """Per text: ``ngrams``, ``benchmarks``, ``items``, ``spans`` (merged, code-point offsets)."""

        self.ensure_setup()
        w = self._words(texts)
        hits = self.index.match(w)
        ix = self.index
        bench = ix.item_benchmark[hits.item]
        keep = self.wanted[bench]
        doc, first, last, item, bench = hits.doc[keep], hits.first[keep], hits.last[keep], hits.item[keep], bench[keep]
        out = [{"ngrams": 0, "benchmarks": [], "items": [], "spans": []} for _ in texts]
        order = np.argsort(doc, kind="stable")
        bounds = np.searchsorted(doc[order], np.arange(len(texts) + 1))
        for d in np.flatnonzero(np.diff(bounds)):
            sel = order[bounds[d]:bounds[d + 1]]
            runs = {(int(f), int(la)) for f, la in zip(first[sel], last[sel])}
            per_bench: dict[str, set] = {}
            for f, la, b in zip(first[sel].tolist(), last[sel].tolist(), bench[sel].tolist()):
                per_bench.setdefault(ix.benchmarks[b], set()).add((f, la))
            out[d] = {"ngrams": len(runs),
                      "benchmarks": sorted(per_bench, key=lambda b: (-len(per_bench[b]), b)),
                      "items": sorted({f"{ix.benchmarks[b]}/{ix.item_id[i]}" for b, i in zip(bench[sel].tolist(), item[sel].tolist())}),
                      "spans": _merge([(int(w.start[f]), int(w.end[la])) for f, la in runs])}
        return out

    def __call__(self, batch: pa.Table) -> pa.Table:
        cfg = self.config
        texts = batch.column("text").to_pylist()
        sig = self.signals(texts)
        new_texts, shares = list(texts), []
        for i, (t, s) in enumerate(zip(texts, sig)):
            if not s["spans"] or s["ngrams"] < cfg.min_ngrams:
                shares.append(0.0)
                continue
            hit, lines = paragraphs_hit(t, s["spans"])
            total = _nonspace(t)
            cut = sum(_nonspace(ln) for ln, h in zip(lines, hit) if h)
            shares.append(float(np.float32(cut / total if total else 1.0)))  # as stored: decide() agrees
            if cfg.action == "remove":
                new_texts[i] = "\n".join(ln for ln, h in zip(lines, hit) if not h)
        reasons = []
        for s, share in zip(sig, shares):
            row = {"decontam_benchmarks": s["benchmarks"], "decontam_ngrams": s["ngrams"], "decontam_share": share}
            reasons.append(self.decide(row, cfg))
        # A rejected document keeps the text that was judged (as C4 does).
        new_texts = [t if r is None else old for t, old, r in zip(new_texts, texts, reasons)]
        batch = with_column(batch, "decontam_ngrams", [s["ngrams"] for s in sig], pa.int32())
        batch = with_column(batch, "decontam_benchmarks", [s["benchmarks"] for s in sig], pa.list_(pa.string()))
        batch = with_column(batch, "decontam_items", [s["items"] for s in sig], pa.list_(pa.string()))
        batch = with_column(batch, "decontam_spans", [[{"start": a, "end": b} for a, b in s["spans"]] for s in sig],
                            pa.list_(SPAN))
        batch = with_column(batch, "decontam_share", np.array(shares, np.float32), pa.float32())
        if cfg.action == "remove":
            batch = with_column(batch, "text", new_texts, pa.string())
        return merge_reasons(batch, reasons)
