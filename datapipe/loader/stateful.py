"""``TokenLoader``: a torch DataLoader over a ``TokenShardDataset`` whose ``state_dict()`` is exact.

Workers tag every batch with (worker, sequences that worker has delivered so far); this process
records the tag of each batch as it hands the batch over, so the state is what the training loop
actually received, whatever the workers prefetched.
"""
from __future__ import annotations

import weakref

from datapipe.loader.dataset import TokenShardDataset, torch
from datapipe.loader.plan import Intervals, count, drop

_NOT_OURS = {"batch_size", "shuffle", "sampler", "batch_sampler", "collate_fn", "drop_last", "in_order"}


def _keep(batch):  # batches are built in the workers; a module-level function pickles for spawn
    return batch


class TokenLoader:
    """Batches of ``dataset`` through a ``torch.utils.data.DataLoader`` this object creates and owns.

    Args:
        dataset: a TokenShardDataset; its rank, world_size, seed, drop_last, output and document_info
            apply. From now on iterate, ``set_epoch`` and save state through the loader (the
            dataset's own ``state_dict``/``load_state_dict``/``set_epoch`` forward here).
        batch_size: sequences per batch.
        num_workers: DataLoader worker processes (0: read in this process).
        **dataloader_kwargs: passed to the DataLoader (pin_memory, persistent_workers, prefetch_factor,
            multiprocessing_context, timeout, worker_init_fn, ...); batching, sampling, collation and
            ordering options are the loader's own (ValueError).

    Each item is a batch ``[b, seq_len + 1]``: int64 tensor (output="torch") or an array in the shard
    dtype, or with document_info a dict of such batches (see TokenShardDataset). ``b == batch_size``
    except for the last batch of a rank when drop_last=False. A full pass advances the epoch; a pass
    after an interrupted one continues it. ImportError without torch; ValueError on a dataset that
    already has a batch_size other than ``batch_size``, explicit num_workers/worker_id, or an owner.
    """

    def __init__(self, dataset: TokenShardDataset, batch_size: int, *, num_workers: int = 0, **dataloader_kwargs):
        if torch is None:
            raise ImportError("TokenLoader needs PyTorch (pip install torch)")
        bad = _NOT_OURS & set(dataloader_kwargs)
        if bad:
            raise ValueError(f"TokenLoader sets {sorted(bad)} itself (drop_last is a TokenShardDataset argument)")
        if batch_size < 1 or num_workers < 0:
            raise ValueError(f"need batch_size >= 1 and num_workers >= 0 (got {batch_size}, {num_workers})")
        if dataset.batch_size not in (None, batch_size):
            raise ValueError(f"the dataset has batch_size={dataset.batch_size}, the loader {batch_size}")
        if dataset._num_workers is not None or dataset._worker_id is not None:
            raise ValueError("the loader assigns workers itself: build the dataset without num_workers/worker_id")
        if dataset._owner is not None and dataset._owner() is not None:
            raise ValueError("this dataset already belongs to another TokenLoader")
        dataset.batch_size, dataset._tagged, dataset._owner = batch_size, True, weakref.ref(self)
        self.dataset, self.batch_size, self.num_workers = dataset, batch_size, num_workers
        self._kwargs = dataloader_kwargs
        self._dl, self._dl_version = None, None
        self._forget()

    @property
    def epoch(self) -> int:
        return self.dataset.epoch if self._pass_epoch is None else self._pass_epoch

    def _forget(self) -> None:
        self._plans: list[Intervals] | None = None
        self._done: list[int] | None = None
        self._next, self._pass_epoch = 0, None

    def _current_plans(self) -> list[Intervals]:
        return [self.dataset._plan(max(1, self.num_workers), w) for w in range(max(1, self.num_workers))]

    def __len__(self) -> int:
        """Batches this rank delivers in the current pass (after a resume: the ones left)."""
        plans, done = self._plans or self._current_plans(), self._done or [0] * max(1, self.num_workers)
        return sum(-(-count(drop(p, d)) // self.batch_size) for p, d in zip(plans, done))

    def __iter__(self):
        ds = self.dataset
        if self._done is not None:  # an interrupted pass: the new one continues it
            ds._load(self.state_dict())
        plans, done = self._current_plans(), [0] * max(1, self.num_workers)
        self._plans, self._done, self._next, self._pass_epoch = plans, done, 0, ds.epoch
        stale = self._kwargs.get("persistent_workers") and self._dl_version != ds._resume_version
        if self._dl is None or stale:  # persistent workers hold the dataset as pickled at their start
            self._dl = None
            self._dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=self.num_workers,
                                                   collate_fn=_keep, **self._kwargs)
            self._dl_version = ds._resume_version
        for wid, delivered, batch in self._dl:
            if self._done is done:  # not reset by set_epoch/load_state_dict in the middle of the pass
                done[wid], self._next = delivered, (wid + 1) % len(done)
            yield batch
        if self._done is done:
            self._forget()
            ds._end_epoch()

    def state_dict(self) -> dict:
        """JSON-able state of this rank after the batches delivered so far (see TokenShardDataset.state_dict).

        To be able to resume with another world_size, save every rank's state:
        ``states = [None] * world; torch.distributed.all_gather_object(states, loader.state_dict())``."""
        ds, w = self.dataset, max(1, self.num_workers)
        plans, done = self._plans or self._current_plans(), self._done or [0] * w
        remaining = {ds.rank * w + i: drop(p, d) for i, (p, d) in enumerate(zip(plans, done))}
        return ds._state(self.epoch, w, remaining, self._next)

    def load_state_dict(self, state: dict | list[dict]) -> None:
        """Resume from ``state_dict()`` output (one rank's, or the list of all ranks'); the next pass
        continues exactly (see TokenShardDataset.load_state_dict). ValueError, leaving the loader as it
        was, when the state is of another stream or does not cover this rank's share of the new layout."""
        before = self.state_dict()
        self.dataset._load(state)
        self._forget()
        try:
            self._current_plans()
        except ValueError:
            self.dataset._load(before)
            raise

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its beginning at the next pass (workers, persistent ones too, follow)."""
        self.dataset.set_epoch(epoch)
