"""Issue 16, fixed cost of a run: what the client loads, and when (no timing here: each test checks
the mechanism that keeps a cost off a small run's critical path)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def test_loading_the_main_manifest_imports_no_heavy_library():
    """scipy (the LSH banding's integrator: ~1 s), numba (~0.3 s) and the libraries of the stages'
    models were imported by every manifest load; a run's client needs none of them before its
    report. A fresh interpreter, as `datapipe run` starts."""
    code = ("import sys\n"
            "from datapipe.manifest import load_manifest\n"
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


def test_the_runner_prefetches_every_enabled_phase_in_a_background_thread(monkeypatch):
    from datapipe import runner
    from datapipe.manifest import load_manifest
    from datapipe.phase import phases

    seen = []

    def record(self):
        seen.append((self.name, threading.current_thread().name))
        if self.name == "tokenize":
            raise RuntimeError("tokenizer file not found")  # left to the phase: not raised here

    for cls in phases():
        monkeypatch.setattr(cls, "prefetch", record)
    m = load_manifest(ROOT / "manifests" / "cc-2026.yaml", {"inputs.paths": ["x.warc.gz"], "inputs.crawl": None})
    runner._prefetch(m).join(30)
    enabled = [c.name for c in phases() if c.enabled(m)]
    assert seen == [(n, "datapipe-prefetch") for n in enabled] and "report" in enabled


def test_the_drivers_tokenizer_is_loaded_once_per_file_identity(tmp_path, monkeypatch):
    """The tokenize phase's driver loads the tokenizer for its sha256 and dtype; the prefetch loads
    it while phase 1 runs, so the phase must get that same load, and a changed file a new one."""
    import os

    from datapipe.env import shared_data
    from datapipe.stages.phases.tokenize import phase as tp
    from datapipe.stages.phases.tokenize.tokenizer import TokenizeConfig

    ranks = tmp_path / "r50k_base.tiktoken"
    shutil.copy(shared_data() / "tokenizers" / "r50k_base.tiktoken", ranks)
    loads = []
    real = tp.load_tokenizer
    monkeypatch.setattr(tp, "load_tokenizer", lambda cfg: loads.append(cfg) or real(cfg))
    monkeypatch.setattr(tp, "_DRIVER", {})
    cfg = TokenizeConfig(tokenizer=str(ranks))
    first = tp.driver_tokenizer(cfg)
    assert tp.driver_tokenizer(TokenizeConfig(tokenizer=str(ranks))) is first and len(loads) == 1
    st = ranks.stat()
    os.utime(ranks, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    again = tp.driver_tokenizer(cfg)
    assert again is not first and len(loads) == 2 and again.sha256 == first.sha256
