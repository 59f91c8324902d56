"""datapipe: Common Crawl to clean, deduplicated, mixed, tokenized shards on Dask.

From Python (the CLI is ``datapipe``): ``datapipe.Pipeline`` builds and runs a job,
``datapipe.stages.get(name, **config).apply(texts)`` runs one stage on plain texts,
``datapipe.dedup(texts)`` deduplicates a few documents in this process. Imported lazily, so
``import datapipe`` (the CLI, every Dask worker) stays cheap.
"""
from __future__ import annotations

import importlib.util
import os
import sys

# In a checkout, stages/ and classifiers/ sit beside datapipe/ (the agreed top level) while an
# install maps them to datapipe.stages and datapipe.classifiers (pyproject's package-dir). A plain
# checkout on sys.path finds them through this finder, asked last (an install's own mapping wins).
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _CheckoutFinder:
    """Finds ``datapipe.stages`` / ``datapipe.classifiers`` in the checkout's top-level folders."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        sub = name.partition("datapipe.")[2]
        init = os.path.join(_CHECKOUT, sub, "__init__.py")
        if sub in ("stages", "classifiers") and os.path.isfile(init):
            return importlib.util.spec_from_file_location(name, init, submodule_search_locations=[os.path.dirname(init)])
        return None


if os.path.isfile(os.path.join(_CHECKOUT, "pyproject.toml")):
    # First: the stages of this checkout, even where an install of another checkout maps them elsewhere.
    sys.meta_path.insert(0, _CheckoutFinder())

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
