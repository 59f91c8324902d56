"""The loader with real DataLoader worker processes: exactly-once over ranks x workers, exact resume
(same and other layouts), epochs reaching persistent workers, drop_last=False, document boundaries.

Synthetic shards (tests/loader_util.py): every token id occurs once, so "each token once" is a set check.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from loader_util import write_index
from torch.utils.data import DataLoader

from datapipe.loader import TokenLoader, TokenShardDataset, block_causal_mask

SEQ, B = 31, 4  # sequences of 32 ids, batches of 4
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create")  # 3 workers on 2 cores


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    index, lengths = write_index(tmp_path_factory.mktemp("tokens"), 240, row_group_tokens=2000)
    return index, int(lengths.sum()), lengths


def _loaders(index, world_size, workers, *, seed=7, drop_last=False, document_info=True, **kw):
    return [TokenLoader(TokenShardDataset(index, SEQ, rank=r, world_size=world_size, seed=seed, drop_last=drop_last,
                                          document_info=document_info), B, num_workers=workers, **kw)
            for r in range(world_size)]


def _tokens(batches) -> np.ndarray:
    return np.concatenate([b["tokens"][b["valid"]] for b in batches]) if batches else np.zeros(0, np.uint16)


def _same(a, b) -> bool:
    return len(a) == len(b) and all(np.array_equal(x["tokens"], y["tokens"]) for x, y in zip(a, b))


def _all_once(got: np.ndarray, total: int) -> bool:
    return np.array_equal(np.sort(got), np.arange(1, total + 1))


def _take(loader, k):
    it = iter(loader)
    head = [next(it) for _ in range(k)]
    it.close()  # the generator (and its DataLoader iterator) go away, as in a killed job
    return head, json.loads(json.dumps(loader.state_dict()))  # state survives a checkpoint file


def test_two_ranks_two_workers_each_token_once(shards):
    index, total, _ = shards
    ranks = [list(lo) for lo in _loaders(index, 2, 2)]
    assert _all_once(np.concatenate([_tokens(r) for r in ranks]), total)
    dropped = [list(lo) for lo in _loaders(index, 2, 2, drop_last=True)]
    assert len(dropped[0]) == len(dropped[1]) == len(_loaders(index, 2, 2, drop_last=True)[0])
    assert all(b["tokens"].shape == (B, SEQ + 1) and b["valid"].all() for r in dropped for b in r)
    got = np.concatenate([_tokens(r) for r in dropped])
    assert len(np.unique(got)) == len(got) > total - 2 * B * (SEQ + 1) - (SEQ + 1)


def test_resume_mid_epoch_with_workers_continues_exactly(shards):
    index, _, _ = shards
    straight = _loaders(index, 2, 2)
    epoch0, epoch1 = [list(lo) for lo in straight], [list(lo) for lo in straight]
    states, heads = [], []
    for lo in _loaders(index, 2, 2):
        head, state = _take(lo, 7)  # odd: the next batch is worker 1's
        assert lo.dataset.state_dict() == lo.state_dict()  # the dataset forwards to its loader
        heads.append(head)
        states.append(state)
    assert all(any(iv for iv in s["remaining"].values()) for s in states)
    for r, lo in enumerate(_loaders(index, 2, 2)):
        lo.load_state_dict(states[r])
        rest, following = list(lo), list(lo)
        assert _same(heads[r] + rest, epoch0[r])  # the same batches, in the same order
        assert _same(following, epoch1[r])  # and the next epoch is whole (no set_epoch needed)


def test_resume_with_other_workers_or_ranks(shards):
    index, total, _ = shards
    heads, states = zip(*[_take(lo, 5) for lo in _loaders(index, 2, 2)])
    seen = np.concatenate([_tokens(h) for h in heads])
    # same world_size, 3 workers: each rank re-splits its own remainder
    rest = []
    for r, lo in enumerate(_loaders(index, 2, 3)):
        lo.load_state_dict(states[r])
        rest.append(_tokens(list(lo)))
    assert _all_once(np.concatenate([seen] + rest), total)
    # other world sizes: the remainder of all ranks is re-split, given every rank's state
    for world, workers in ((3, 1), (1, 2)):
        loaders = _loaders(index, world, workers)
        for lo in loaders:
            lo.load_state_dict(list(states))
        assert _all_once(np.concatenate([seen] + [_tokens(list(lo)) for lo in loaders]), total)
    with pytest.raises(ValueError, match="needs the states of all 2 ranks"):
        _loaders(index, 3, 1)[0].load_state_dict(states[0])
    with pytest.raises(ValueError, match="pass the state saved by rank 1"):
        _loaders(index, 2, 2)[1].load_state_dict(states[0])
    with pytest.raises(ValueError, match="seed=7"):
        _loaders(index, 2, 2, seed=8)[0].load_state_dict(states[0])


def test_persistent_workers_follow_epochs_and_seed(shards):
    index, _, _ = shards
    lo = _loaders(index, 1, 2, persistent_workers=True)[0]
    e0, e1 = list(lo), list(lo)
    assert lo.epoch == 2 and len(e0) == len(e1) and not _same(e0, e1)
    assert np.array_equal(np.sort(_tokens(e0)), np.sort(_tokens(e1)))
    ref = _loaders(index, 1, 2)[0]  # fresh workers per epoch: the same stream
    assert _same(list(ref), e0) and _same(list(ref), e1)
    lo.set_epoch(0)
    assert _same(list(lo), e0)
    assert not _same(list(_loaders(index, 1, 2, seed=8)[0]), e0)
    # a plain DataLoader with persistent workers: set_epoch reaches them too
    ds = TokenShardDataset(index, SEQ, seed=7, drop_last=False, document_info=True, batch_size=B)
    dl = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
    ds.set_epoch(1)
    assert _same(list(dl), e1)
    ds.set_epoch(0)
    assert _same(list(dl), e0)


def test_drop_last_false_with_default_collate(shards):
    index, total, _ = shards
    ds = TokenShardDataset(index, SEQ, seed=1, drop_last=False, output="torch", document_info=True)
    batches = list(DataLoader(ds, batch_size=8, num_workers=2))  # per-sequence items, default collate
    assert all(b["tokens"].shape[1] == SEQ + 1 and b["tokens"].dtype == torch.int64 for b in batches)
    got = torch.cat([b["tokens"][b["valid"]] for b in batches]).numpy()
    assert _all_once(got, total)
    last = _loaders(index, 1, 2, drop_last=False)[0]
    sizes = [b["tokens"].shape for b in last]
    assert sizes[-1][0] <= B and all(s == (B, SEQ + 1) for s in sizes[:-1])


def test_plain_workers_refuse_to_guess_progress(shards):
    index, _, _ = shards
    ds = TokenShardDataset(index, SEQ, batch_size=B)
    assert len(list(DataLoader(ds, batch_size=None, num_workers=2))) > 0
    with pytest.raises(RuntimeError, match="TokenLoader"):
        ds.state_dict()
    _, state = _take(_loaders(index, 1, 1, document_info=False, drop_last=True)[0], 3)
    ds = TokenShardDataset(index, SEQ, seed=7, batch_size=B)
    ds.load_state_dict(state)
    with pytest.raises(RuntimeError, match="TokenLoader"):
        list(DataLoader(ds, batch_size=None, num_workers=1))


def test_document_boundaries(shards):
    index, _, lengths = shards
    first_ids = 1 + np.concatenate([[0], np.cumsum(lengths)[:-1]])  # id of each document's first token
    ds = TokenShardDataset(index, SEQ, seed=3, drop_last=False, document_info=True)
    multi = None
    for item in ds:
        t = item["tokens"][item["valid"]].astype(np.int64)
        doc = np.searchsorted(first_ids, t, side="right") - 1
        assert np.array_equal(item["doc_ids"][:len(t)], np.concatenate([[0], np.cumsum(doc[1:] != doc[:-1])]))
        starts_here = t == first_ids[doc]
        begin = np.maximum.accumulate(np.where(starts_here, np.arange(len(t)), 0))
        assert np.array_equal(item["positions"][:len(t)], np.arange(len(t)) - begin)
        assert (item["doc_ids"][len(t):] == -1).all()
        if multi is None and item["doc_ids"].max() >= 1:
            multi = item["doc_ids"]
    mask = block_causal_mask(multi)
    i, j = np.meshgrid(np.arange(SEQ + 1), np.arange(SEQ + 1), indexing="ij")
    assert np.array_equal(mask, (j <= i) & (multi[i] == multi[j]))
    assert torch.equal(block_causal_mask(torch.from_numpy(multi)), torch.from_numpy(mask))


def test_documents_shuffled_within_one_row_group(tmp_path):
    index, _ = write_index(tmp_path, 60, shards=1, row_group_tokens=10**9)
    ds = TokenShardDataset(index, 15, seed=4)
    assert len(ds._units) == 1
    e0, e1 = np.concatenate(list(ds)), np.concatenate(list(ds))
    assert not np.array_equal(e0, e1)
    written = np.concatenate(list(TokenShardDataset(index, 15, shuffle=False)))
    assert np.array_equal(written, np.arange(1, len(written) + 1))
