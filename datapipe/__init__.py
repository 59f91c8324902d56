"""datapipe: Common Crawl to clean, deduplicated, mixed, tokenized shards on Dask.

From Python (the CLI is ``datapipe``): ``datapipe.Pipeline`` builds and runs a job,
``datapipe.stages.get(name, **config).apply(texts)`` runs one stage on plain texts,
``datapipe.dedup(texts)`` deduplicates a few documents in this process. Imported lazily, so
``import datapipe`` (the CLI, every Dask worker) stays cheap.
"""
from __future__ import annotations

import os
import sys

# In a checkout, stages/ and classifiers/ sit beside datapipe/ (the agreed top level) while an
# install maps them to datapipe.stages and datapipe.classifiers (pyproject's package-dir): a plain
# checkout on sys.path finds them one level up. Only a datapipe checkout qualifies.
_checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_checkout, "stages", "__init__.py")) and \
        os.path.isfile(os.path.join(_checkout, "classifiers", "__init__.py")) and \
        os.path.isfile(os.path.join(_checkout, "pyproject.toml")):
    __path__.append(_checkout)  # noqa: F821 - the package's own __path__

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
