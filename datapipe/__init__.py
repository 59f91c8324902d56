"""datapipe: Common Crawl to clean, deduplicated, mixed, tokenized shards on Dask.

From Python (the CLI is ``datapipe``): ``datapipe.Pipeline`` builds and runs a job,
``datapipe.stages.get(name, **config).apply(texts)`` runs one stage on plain texts,
``datapipe.dedup(texts)`` deduplicates a few documents in this process. Imported lazily, so
``import datapipe`` (the CLI, every Dask worker) stays cheap.
"""
from __future__ import annotations

import sys

__all__ = ["DedupResult", "Pipeline", "PipelineResult", "dedup", "stages"]


def __getattr__(name: str):
    # Plain imports of fixed modules (no dynamic import: see tests/test_security.py).
    if name == "stages":
        import datapipe.stages  # noqa: F401 - binds the submodule
        return sys.modules["datapipe.stages"]
    if name in ("Pipeline", "PipelineResult"):
        from datapipe.api import pipeline as api
        return getattr(api, name)
    if name in ("dedup", "DedupResult"):
        from datapipe.api import dedup as api_dedup
        return getattr(api_dedup, name)
    raise AttributeError(f"module 'datapipe' has no attribute {name!r}")
