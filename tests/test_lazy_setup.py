"""Issue 16, fixed cost of a run: what the client loads, and when (no timing here: each test checks
the mechanism that keeps a cost off a small run's critical path)."""
from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def test_loading_the_main_manifest_imports_no_heavy_library():
    """scipy (the LSH banding's integrator: ~1 s), numba (~0.3 s) and the libraries of the stages'
    models were imported by every manifest load; a run's client needs none of them before its
    report. A fresh interpreter, as `datapipe run` starts."""
    code = ("import sys\n"
            "from datapipe.manifest.load import load_manifest\n"
            "from datapipe.phase import phases\n"
            "m = load_manifest('manifests/cc-2026.yaml', {'inputs.paths': ['x.warc.gz'], 'inputs.crawl': None})\n"
            "m.build_stages(); [p.name for p in phases()]\n"
            "assert m.section('dedup').minhash.band_rows() == (18, 7)\n"
            "print(sorted(x for x in ('scipy', 'numba', 'sklearn', 'matplotlib', 'duckdb', 'tiktoken')"
            " if x in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_near_dup_sets_of_no_rows_read_nothing_and_equal_the_kernels_empty_result():
    """A shard with no candidate edge (every shard of a one-page run) loaded numba's kernels for an
    empty call: 1.1 s of the dedup phase on a worker that had no phase-1 task."""
    from datapipe.stages.lib.minhash import shingle_sets
    from datapipe.stages.phases.dedup.config import DedupConfig
    from datapipe.stages.phases.dedup.near import _sets

    for verify in ("exact", "estimate"):
        cfg = DedupConfig(minhash={"verify": verify})
        vals, off = _sets(types.SimpleNamespace(cfg=cfg), None, np.zeros(0, np.uint64))  # no shard is read
        kv, ko = shingle_sets([], cfg.minhash.ngram)
        assert vals.dtype == kv.dtype == np.uint64 and vals.size == kv.size == 0
        assert off.dtype == ko.dtype and off.tolist() == ko.tolist() == [0]
