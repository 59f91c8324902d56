"""The token-shard loader on real phase-3 shards: exactly-once across ranks x workers, resume, reshuffle,
dtype, fsspec URLs. DataLoader worker processes: test_loader_resume.py; exports: test_loader_export.py."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import fsspec
import numpy as np
import pyarrow.parquet as pq
import pytest
from distributed import Client, LocalCluster
from phase3_util import cc_docs, make_run_dir

from datapipe.loader import TokenShardDataset
from datapipe.stages.phases.tokenize.mixture import MixConfig
from datapipe.stages.phases.tokenize.phase import run_mix_tokenize
from datapipe.stages.phases.tokenize.tokenizer import TokenizeConfig

SEQ = 63


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> str:
    run = make_run_dir(tmp_path_factory.mktemp("run"), cc_docs())
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0") as c, \
            Client(c) as client:
        run_mix_tokenize(client, str(run), MixConfig(),
                         TokenizeConfig(shard_tokens=10000, row_group_tokens=1500))
    return str(run / "tokens" / "index.json")


def _all_shard_tokens(index: str) -> np.ndarray:
    idx = json.loads(Path(index).read_text())
    base = Path(index).parent
    return np.concatenate([pq.read_table(base / s["path"]).column("input_ids").combine_chunks().flatten().to_numpy()
                           for s in idx["shards"]])


@pytest.mark.parametrize("world_size,workers", [(1, 1), (2, 3), (3, 2)])
def test_every_token_exactly_once(index, world_size, workers):
    truth = _all_shard_tokens(index)
    assert len(truth) > 40_000
    got, valid = [], []
    for rank in range(world_size):
        for w in range(workers):
            ds = TokenShardDataset(index, SEQ, rank=rank, world_size=world_size, seed=3, drop_last=False,
                                   document_info=True, num_workers=workers, worker_id=w)
            items = list(ds)
            assert len(items) == ds.num_sequences(workers, w)
            got += [it["tokens"][it["valid"]] for it in items]
            valid += [int(it["valid"].sum()) for it in items]
            assert all(len(it["tokens"]) == SEQ + 1 for it in items)  # the short tail is padded
    flat = np.concatenate(got)
    assert len(flat) == len(truth)
    assert Counter(flat.tolist()) == Counter(truth.tolist())
    assert valid.count(SEQ + 1) == len(valid) - 1 and valid[-1] == len(truth) % (SEQ + 1)


def test_drop_last_balances_ranks(index):
    total = len(_all_shard_tokens(index))
    counts = [len(list(TokenShardDataset(index, SEQ, rank=r, world_size=4))) for r in range(4)]
    assert counts == [total // (SEQ + 1) // 4] * 4  # equal: no rank waits for another at the epoch's end


def test_stream_is_the_permuted_row_groups(index):
    # Independent reading of the same order: row groups permuted by default_rng([seed, epoch]), the
    # documents of unit u by default_rng([seed, epoch, u]).
    idx = json.loads(Path(index).read_text())
    base = Path(index).parent
    units = [(s["path"], g) for s in idx["shards"] for g in range(len(s["row_group_tokens"]))]
    parts = []
    for u in np.random.default_rng([5, 0]).permutation(len(units)):
        docs = pq.ParquetFile(base / units[u][0]).read_row_group(units[u][1]).column("input_ids").to_pylist()
        parts += [docs[i] for i in np.random.default_rng([5, 0, u]).permutation(len(docs))]
    stream = np.concatenate(parts)
    seqs = list(TokenShardDataset(index, SEQ, seed=5))
    n = len(stream) // (SEQ + 1)
    assert np.array_equal(np.concatenate(seqs), stream[:n * (SEQ + 1)])
    written = list(TokenShardDataset(index, SEQ, shuffle=False))
    assert np.array_equal(np.concatenate(written), _all_shard_tokens(index)[:n * (SEQ + 1)])


def test_resume_mid_epoch_gives_the_same_remainder(index):
    full = list(TokenShardDataset(index, SEQ, seed=1, num_workers=2, worker_id=1))
    ds = TokenShardDataset(index, SEQ, seed=1, num_workers=2, worker_id=1)
    it = iter(ds)
    head = [next(it) for _ in range(37)]
    state = json.loads(json.dumps(ds.state_dict()))  # survives a checkpoint file
    fresh = TokenShardDataset(index, SEQ, seed=1, num_workers=2, worker_id=1)
    fresh.load_state_dict(state)
    rest = list(fresh)
    assert len(head) + len(rest) == len(full)
    assert all(np.array_equal(a, b) for a, b in zip(head + rest, full))
    with pytest.raises(ValueError):
        TokenShardDataset(index, SEQ + 1).load_state_dict(state)


def test_in_process_dataloader_resumes_from_dataset_state(index):
    # DataLoader(num_workers=0) reads in this process: ds.state_dict() is exact at batch boundaries.
    from torch.utils.data import DataLoader

    def loader(ds):
        return DataLoader(ds, batch_size=4, num_workers=0)

    full = list(loader(TokenShardDataset(index, SEQ, seed=1, output="torch")))
    ds = TokenShardDataset(index, SEQ, seed=1, output="torch")
    it = iter(loader(ds))
    head = [next(it) for _ in range(9)]
    state = json.loads(json.dumps(ds.state_dict()))
    fresh = TokenShardDataset(index, SEQ, seed=1, output="torch")
    fresh.load_state_dict(state)
    rest = list(loader(fresh))
    assert len(head) + len(rest) == len(full)
    assert all(a.equal(b) for a, b in zip(head + rest, full))
    assert fresh.epoch == 1 and len(list(loader(fresh))) == len(full)  # the next epoch is whole


def test_epochs_reshuffle_and_dtype(index):
    ds = TokenShardDataset(index, SEQ, seed=9)
    e0, e1 = list(ds), list(ds)  # in-process iteration advances the epoch
    assert ds.epoch == 2 and e0[0].dtype == np.uint16
    assert not all(np.array_equal(a, b) for a, b in zip(e0, e1))
    again = TokenShardDataset(index, SEQ, seed=9)
    assert all(np.array_equal(a, b) for a, b in zip(e0, list(again)))


def test_fsspec_url(index):
    base = Path(index).parent
    mem = fsspec.filesystem("memory")
    for p in base.iterdir():
        mem.pipe(f"/loader-test/{p.name}", p.read_bytes())
    local = list(TokenShardDataset(index, SEQ, seed=2))
    remote = list(TokenShardDataset("memory://loader-test/index.json", SEQ, seed=2))
    assert len(local) == len(remote) and all(np.array_equal(a, b) for a, b in zip(local, remote))
