"""Global deduplication: normalization, MinHash signatures (phase 1 stage
``dedup_signatures``) and the Dask phase-2 :func:`run_dedup` (exact, line, MinHash LSH)."""
from datapipe.stages.phases.dedup.config import DedupConfig, LinesConfig, MinHashConfig
from datapipe.stages.lib.normalize import normalize_text

__all__ = ["DedupConfig", "LinesConfig", "MinHashConfig", "normalize_text", "run_dedup"]


def run_dedup(*args, **kwargs):
    """See :func:`datapipe.stages.phases.dedup.phase.run_dedup` (imported lazily: it pulls Dask-side code)."""
    from datapipe.stages.phases.dedup.phase import run_dedup as _run

    return _run(*args, **kwargs)
