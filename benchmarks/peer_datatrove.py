"""The peer: datatrove 0.10.1, run in its own virtualenv (benchmarks/.venv-datatrove), offline.

    .venv-datatrove/bin/python benchmarks/peer_datatrove.py --warc W --texts T --lid M --work D [--reps 3]
        [--configs default,fast,resiliparse] [--stages]

Prints one JSON object: raw seconds per repetition (run.py summarizes ours and theirs the same way).

Pipelines (FineWeb's phase 1 as issue 9 names it), each through ``LocalPipelineExecutor`` (1 task,
1 worker: in-process, so the caller's ``taskset -c 0`` holds), writing kept documents with
``JsonlWriter`` as ours writes Parquet:

    WarcReader -> <extractor> -> LanguageFilter(en, 0.65) -> GopherRepetitionFilter
      -> GopherQualityFilter -> C4QualityFilter(filter_no_terminal_punct=False) -> FineWebQualityFilter

* ``default``: ``Trafilatura(favour_precision=True, timeout=1)`` as FineWeb runs it.
* ``fast``: the fastest configuration of its own extractor: ``Trafilatura(favour_precision=False,
  deduplicate=False, no_fallback=True)`` (trafilatura's fast mode, no justext/readability fallback).
* ``resiliparse``: datatrove's framework with our extraction bound plugged in as a custom
  ``BaseExtractor`` (resiliparse main content) -- datatrove as fast as it can be made at all,
  so the remaining gap is framework and filters.

Stages alone (same inputs as ours): WarcReader on the WARC, and each filter over the same
extracted English texts (``--texts``: JSON lines with ``text``), timed as a pipeline step.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections import deque
from importlib.metadata import version

from timing import repeat


def _lid(path: str) -> None:
    # Offline: the LanguageFilter "downloads" lid.176 into its cache from this file URL.
    from datatrove.utils.lid import FT176LID

    FT176LID.MODEL_URL = "file://" + os.path.abspath(path)


def _extractor(config: str):
    from datatrove.pipeline.extractors import Trafilatura

    if config == "default":
        return Trafilatura(favour_precision=True, timeout=1)
    if config == "fast":
        return Trafilatura(favour_precision=False, deduplicate=False, no_fallback=True, timeout=1)
    if config == "resiliparse":
        from datatrove.pipeline.extractors.base import BaseExtractor

        class Resiliparse(BaseExtractor):
            name = "resiliparse main content"

            def __init__(self, timeout: float = 1):
                super().__init__(timeout)

            def extract(self, text: str) -> str:
                from resiliparse.extract.html2text import extract_plain_text

                return extract_plain_text(text, main_content=True)

        return Resiliparse(timeout=1)
    raise ValueError(config)


def _filters():
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        LanguageFilter,
    )

    return [LanguageFilter(languages=["en"], language_threshold=0.65), GopherRepetitionFilter(),
            GopherQualityFilter(), C4QualityFilter(filter_no_terminal_punct=False), FineWebQualityFilter()]


def run_pipeline(warc: str, config: str, work: str, limit: int = -1) -> dict:
    """One run of the whole pipeline in a fresh logging/output folder; per-step seconds from its stats."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import JsonlWriter

    d = tempfile.mkdtemp(dir=work)
    try:
        steps = [WarcReader(os.path.dirname(warc), glob_pattern=os.path.basename(warc), limit=limit),
                 _extractor(config), *_filters(), JsonlWriter(os.path.join(d, "out"))]
        stats = LocalPipelineExecutor(steps, tasks=1, workers=1, logging_dir=os.path.join(d, "logs")).run()
        # Stats come in step order; name them by class (their display names are emoji).
        return {type(step).__name__: {"seconds": round(s.time_stats.total, 4), "docs": s.time_stats.n,
                                      "forwarded": int(s.stats["forwarded"].total) if "forwarded" in s.stats else None}
                for step, s in zip(steps, stats.stats)}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def bench_pipelines(warc: str, configs: list[str], work: str, reps: int) -> dict:
    out = {}
    for cfg in configs:
        run_pipeline(warc, cfg, work, limit=20)  # warm-up: model copy, spacy, imports
        steps: list[dict] = []
        secs = repeat(lambda: steps.append(run_pipeline(warc, cfg, work)), reps=reps, warmup=0)
        out[cfg] = {"seconds": secs, "steps": steps}
    return out


def _docs(texts: list[str]):
    from datatrove.data import Document

    return [Document(text=t, id=str(i), metadata={}) for i, t in enumerate(texts)]


def bench_stages(warc: str, texts_path: str, reps: int) -> dict:
    """Each step alone: the reader on the WARC, each filter over the same texts."""
    from datatrove.pipeline.readers import WarcReader

    with open(texts_path) as fh:
        rows = [json.loads(line) for line in fh]
    out = {}
    reader = WarcReader(os.path.dirname(warc), glob_pattern=os.path.basename(warc))
    n_read = []
    out["read"] = {"seconds": repeat(lambda: n_read.append(sum(1 for _ in reader.read_file(os.path.basename(warc)))),
                                     reps=reps), "items": None}
    out["read"]["docs_out"] = n_read[-1]
    all_texts = [r["text"] for r in rows]
    en_texts = [r["text"] for r in rows if r.get("en")]
    for step in _filters():
        texts = all_texts if type(step).__name__ == "LanguageFilter" else en_texts
        # Warm-up on a few documents (model, spacy); fresh documents per run: C4QualityFilter rewrites doc.text.
        deque(step.run(iter(_docs(texts[:20])), 0, 1), maxlen=0)
        secs = repeat(lambda: deque(step.run(iter(_docs(texts)), 0, 1), maxlen=0), reps=reps, warmup=0)
        out[type(step).__name__] = {"seconds": secs, "items": len(texts)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warc", required=True)
    ap.add_argument("--texts", required=True)
    ap.add_argument("--lid", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--configs", default="default,fast,resiliparse", help="pipelines to run ('' = none)")
    ap.add_argument("--stages", action="store_true", help="also time the reader and each filter alone")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    os.environ.setdefault("HF_HOME", os.path.join(a.work, "hf"))  # the model cache stays in work/
    _lid(a.lid)
    from loguru import logger

    logger.remove()  # its per-step log lines are not part of the figure
    logger.add(sys.stderr, level="ERROR")
    res = {"versions": {p: version(p) for p in ("datatrove", "trafilatura", "warcio", "spacy", "resiliparse")},
           "pipelines": bench_pipelines(a.warc, [c for c in a.configs.split(",") if c], a.work, a.reps)}
    if a.stages:
        res["stages"] = bench_stages(a.warc, a.texts, a.reps)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
