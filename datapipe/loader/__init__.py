"""Streaming dataset over phase-3 token shards, for a GPU training job.

``TokenShardDataset(index_url, seq_len)`` reads ``index.json`` (written by
``datapipe.stages.phases.tokenize.phase``) and yields sequences of ``seq_len + 1`` token ids: inputs are
``seq[:-1]`` and targets ``seq[1:]``. It needs numpy, pyarrow and fsspec only; with PyTorch
installed it is a ``torch.utils.data.IterableDataset`` and can yield int64 tensors.
``TokenLoader(dataset, batch_size, num_workers=...)`` (``datapipe.loader.stateful``) owns the
DataLoader and gives a ``state_dict()`` that is exact with any number of workers.

How the stream is built, per epoch ``e``:

* The units are the shards' Parquet row groups (``row_group_tokens`` in ``index.json``). Their order
  is ``numpy.random.default_rng([seed, e]).permutation(units)``, and the documents (rows) inside unit
  ``u`` (its index in written order) are reordered by ``default_rng([seed, e, u]).permutation(rows)``;
  ``shuffle=False`` keeps the written order of both.
* The concatenated stream of T tokens holds N = T // (seq_len+1) whole sequences, plus the final
  ``T % (seq_len+1)`` tokens as one more sequence when ``drop_last=False`` (padded to full length).
* ``loader_plan.split`` cuts the sequences into contiguous parts per rank and per worker, in whole
  batches: drop_last=True gives every rank the same number of full batches; drop_last=False drops
  nothing. Every sequence is yielded once per epoch across ranks x workers.
* A consumer reads only the row groups its part covers, one at a time.

Epochs: iterating in-process (no DataLoader workers) advances the epoch after each full pass, and a
new pass after an interrupted one continues it. ``set_epoch(e)`` reaches DataLoader workers, persistent
ones included (the epoch lives in shared memory). With a plain DataLoader call ``set_epoch`` every
epoch (as with DistributedSampler); ``TokenLoader`` advances epochs itself.

Resuming: a state (``STATE_FORMAT``, JSON-able) holds the epoch and, per consumer, the intervals of
sequences not yet delivered. The same layout continues each consumer's remainder exactly (a
DataLoader's round robin included); another num_workers/batch_size re-splits the rank's remainder;
another world_size re-splits all ranks' remainders (the list of every rank's state is needed,
ValueError otherwise). With drop_last=True a re-split cuts the remainder to equal full batches per
rank (at most ``world_size * batch_size - 1`` sequences dropped). State of DataLoader workers is only
known to ``TokenLoader``: ``state_dict()`` of a dataset iterated by plain workers raises RuntimeError.
"""
from datapipe.loader.dataset import TokenShardDataset
from datapipe.loader.read import block_causal_mask
from datapipe.loader.stateful import TokenLoader

__all__ = ["TokenLoader", "TokenShardDataset", "block_causal_mask"]
