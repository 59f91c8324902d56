"""A worker killed while dedup's apply step (or publish) writes a shard leaves ``<file>.tmp-<hex>``
beside it, and the retried task writes under a new name: the finished run must not leave that file
in ``documents/`` or ``rejected/``, and ``verify_run`` refuses a run that does."""
from __future__ import annotations

import pytest
from dedup_fixtures import write_shards
from verify_util import one_task_run

from datapipe.api.dedup import SyncClient
from datapipe.engine.shuffle_store import Store
from datapipe.engine.verify import verify_run
from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.phases.dedup.phase import (
    DedupPhase,
    remove_leftover_temps,
    run_dedup,
)

DEDUP_CHAIN = [(DedupPhase, "_filtered", "documents")]
from datapipe.engine.ledger import InvariantError

#: What a writer killed a few KB into a Parquet file leaves: the magic and part of a column chunk.
PARTIAL = b"PAR1" + bytes(3000)


def _docs() -> dict[str, list[dict]]:
    texts = [f"document {k} says {' '.join(f'word{k}x{j}' for j in range(30))}" for k in range(24)]
    rows = [{"id": f"d{k}", "text": texts[k % 18]} for k in range(24)]   # d18..d23 repeat d0..d5
    return {f"part-{k}": rows[k::3] for k in range(3)}


class _KilledFirstAttempt(SyncClient):
    """Runs the apply step as a cluster would after a worker died mid-write in every task: the
    dead attempt's temporary files are there, then the retry (the real task) writes its own."""

    def __init__(self):
        self.planted: list[str] = []

    def map(self, fn, *iterables, key=None, **kwargs):
        if key and key[0].startswith("dedup-apply-"):
            for ctx, i in zip(iterables[0], iterables[1]):
                shard = ctx.shard(i)
                for rel in (f"documents/{shard.name}.tmp-0badc0de", f"rejected/dedup-{shard.name}.tmp-0badc0de"):
                    shard.store.fs.makedirs(shard.store.path(rel.split("/")[0]), exist_ok=True)
                    with shard.store.fs.open(shard.store.path(rel), "wb") as fh:
                        fh.write(PARTIAL)
                    self.planted.append(rel)
        return super().map(fn, *iterables, **kwargs)


def _files(run) -> dict[str, bytes]:
    return {f"{sub}/{p.name}": p.read_bytes() for sub in ("documents", "rejected") if (run / sub).is_dir()
            for p in sorted((run / sub).iterdir())}


def test_writer_killed_in_apply_leaves_no_temp_file(tmp_path):
    fresh, killed = tmp_path / "fresh", tmp_path / "killed"
    for run in (fresh, killed):
        write_shards(str(run), _docs())
    want = run_dedup(SyncClient(), str(fresh), DedupConfig(partitions=2))
    client = _KilledFirstAttempt()
    got = run_dedup(client, str(killed), DedupConfig(partitions=2))
    assert len(client.planted) == 6                       # both files of each of the 3 shards
    assert not [p for p in _files(killed) if ".tmp-" in p]
    assert _files(killed) == _files(fresh)                # same files, same bytes
    assert {k: (v.n_in, v.kept) for k, v in got.items()} == {k: (v.n_in, v.kept) for k, v in want.items()}
    assert got["dedup_exact"].n_in == 24 and got["dedup_exact"].kept == 18   # the 6 repeats went


def test_remove_leftover_temps_takes_only_dedup_temporaries(tmp_path):
    for rel in ("documents/a.parquet", "documents/a.parquet.tmp-1", "rejected/dedup-a.parquet.tmp-2",
                "rejected/a.parquet", "rejected/a.parquet.tmp-3", "_filtered/a.parquet.tmp-4"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    removed = remove_leftover_temps(Store(str(tmp_path)))
    assert sorted(removed) == ["documents/a.parquet.tmp-1", "rejected/dedup-a.parquet.tmp-2"]
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    # phase 1's own folders are not this phase's (the run's start removes their leftovers)
    assert left == ["_filtered/a.parquet.tmp-4", "documents/a.parquet", "rejected/a.parquet",
                    "rejected/a.parquet.tmp-3"]


def test_verify_refuses_temp_files_in_published_folders(tmp_path):
    _, led, rec = one_task_run(tmp_path)
    assert verify_run(str(tmp_path), None, led, rec, DEDUP_CHAIN)["documents"] == 2
    tmp = tmp_path / "documents" / "t1.parquet.tmp-0badc0de"
    tmp.write_bytes(PARTIAL)
    with pytest.raises(InvariantError, match=r"documents/ holds 1 file\(s\) of no input .*t1\.parquet\.tmp-0badc0de"):
        verify_run(str(tmp_path), None, led, rec, DEDUP_CHAIN)
    tmp.unlink()
    (tmp_path / "rejected").mkdir()
    (tmp_path / "rejected" / "dedup-t1.parquet.tmp-0badc0de").write_bytes(PARTIAL)
    with pytest.raises(InvariantError, match=r"rejected/ holds 1 temporary file\(s\) of dedup"):
        verify_run(str(tmp_path), None, led, rec, DEDUP_CHAIN)
