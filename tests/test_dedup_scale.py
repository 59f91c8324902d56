"""Dedup at scale, small (issue 17): shuffle files per step O(S + P), a giant template cluster
in bounded worker memory, tasks that carry no shard list (workers killed in steps:
tests/test_dedup_faults.py)."""
from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from dedup_fixtures import write_shards
from scale_corpus import make_corpus

from datapipe.engine.shuffle_store import Store
from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.phases.dedup.phase import load_stats, run_dedup
from datapipe.stages.phases.dedup.steps import Ctx


@pytest.fixture(scope="module")
def client(warm_client):
    """conftest's 2-process LocalCluster (set up once for the session)."""
    return warm_client


def _write(run, docs, nshards):
    write_shards(str(run), {f"part-{k}": docs[k::nshards] for k in range(nshards)})


def _state(run) -> dict:
    out = {}
    for sub in ("documents", "rejected"):
        for f in sorted((run / sub).glob("*.parquet")):
            for r in pq.read_table(f, columns=["id", "reject_reason", "duplicate_of"]).to_pylist():
                out[r["id"]] = (r["reject_reason"] or "kept", r["duplicate_of"])
    return out


@pytest.mark.parametrize("nshards,nparts", [(5, 3), (5, 9)])
def test_files_per_step_are_s_plus_p(client, tmp_path, nshards, nparts):
    c = make_corpus(300, seed=3)
    _write(tmp_path, c.docs, nshards)
    run_dedup(client, str(tmp_path), DedupConfig(partitions=nparts, lines={"enabled": True, "max_count": 50}))
    files = load_stats(str(tmp_path))["files_per_step"]
    assert {"exact_map", "bands_reduce", "verify_dst", "cc1", "labels", "comps_reduce"} <= set(files)
    for step, per in files.items():
        # a task writes one run per output of its step (verify_src: edges and sets), never one per partition
        assert sum(per.values()) <= 2 * (nshards + nparts), (step, per)
    assert files["exact_map"] == {"exact": nshards} and files["exact_reduce"] == {"drops_exact": nparts}
    assert files["bands_map"] == {"bands": nshards} and files["bands_reduce"] == {"cand": nparts}
    assert files["verify_src"] == {"cand2": nshards, "sets": nshards}


_CHILD = """
import resource, sys
from datapipe.api.dedup import SyncClient
from datapipe.stages.phases.dedup.phase import run_dedup
from datapipe.stages.phases.dedup.config import DedupConfig
run_dedup(SyncClient(), sys.argv[1], DedupConfig(partitions=4))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def _peak_rss(run) -> int:
    """Peak RSS (bytes) of a fresh process that runs every dedup task of ``run`` in turn: at
    least what any one worker would need."""
    out = subprocess.run([sys.executable, "-c", _CHILD, str(run)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def test_giant_cluster_bounded_memory(tmp_path):
    """30% of the corpus is one template cluster: the survivor is the canonical URL, every other
    member is rejected, and a process running every task needs no more memory than for the same
    corpus without the cluster. (A bound check at test size; that memory stays flat as the
    cluster grows 6k -> 300k members is measured by make bench-scale, docs/benchmarks/dedup-scale.md.)"""
    n = 3000
    giant, plain = make_corpus(n, seed=5, giant_fraction=0.3), make_corpus(n, seed=5, giant_fraction=0.0).docs
    _write(tmp_path / "plain", plain, 4)
    _write(tmp_path / "giant", giant.docs, 4)
    base = _peak_rss(tmp_path / "plain")
    peak = _peak_rss(tmp_path / "giant")
    st = _state(tmp_path / "giant")
    members = giant.giant_ids[0]
    assert len(members) == int(0.3 * n)
    kept = [m for m in members if st[m][0] == "kept"]
    assert kept == [giant.canonical[0]], kept          # the template's canonical URL survives
    assert all(st[m][1] == kept[0] for m in members if m != kept[0])
    print(f"peak RSS: plain {base / 2**20:.0f} MiB, with a 30% cluster {peak / 2**20:.0f} MiB")
    assert peak <= 1.5 * 2**30
    assert peak - base <= 100 * 2**20


def test_task_arguments_do_not_grow_with_shards(tmp_path):
    """A task gets the context and one index; the shard list is a file it reads (by reference)."""
    work = Store(str(tmp_path))
    sizes = []
    for n in (10, 10_000):
        ctx = Ctx(work, work, n, DedupConfig(), 18, 7, "f" * 64)
        work.write_json("shards.json", {"fingerprint": ctx.fp, "shards": [[-1, f"_filtered/t{i:06d}.parquet"]
                                                                          for i in range(n)]})
        sizes.append(len(pickle.dumps((ctx, n - 1))))
        from datapipe.stages.phases.dedup import steps

        steps._LISTINGS.clear()
        assert ctx.shard(n - 1).rel == f"_filtered/t{n - 1:06d}.parquet"
    assert abs(sizes[1] - sizes[0]) <= 8, sizes   # only the digits of the numbers differ
    assert np.max(sizes) < 4096
