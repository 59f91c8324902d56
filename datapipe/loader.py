"""Streaming dataset over phase-3 token shards, for a GPU training job.

``TokenShardDataset(index_url, seq_len)`` reads ``index.json`` (written by
``datapipe.stages.phases.tokenize.phase``) and yields sequences of ``seq_len + 1`` token ids: inputs are
``seq[:-1]`` and targets ``seq[1:]``. It needs numpy, pyarrow and fsspec only; with PyTorch
installed it is a ``torch.utils.data.IterableDataset`` and can yield int64 tensors.

How the stream is split, per epoch:

* The units are the shards' Parquet row groups (``row_group_tokens`` in ``index.json``). Their order
  is a permutation drawn from ``numpy.random.default_rng([seed, epoch])`` (or the written order
  with ``shuffle=False``); the documents inside were already shuffled when the shards were written.
* The concatenated stream of T tokens holds N = T // (seq_len+1) whole sequences. Consumer
  ``c = rank * num_workers + worker`` of C = world_size * num_workers gets sequences
  ``[N*c//C, N*(c+1)//C)``: contiguous, disjoint, sizes differ by at most one, so every token is
  yielded once per epoch except the last ``T - N*(seq_len+1)`` (< seq_len+1), which the last consumer
  yields as one shorter sequence when ``drop_last=False``.
* A consumer reads only the row groups its range covers, one at a time: memory is a row group plus
  one sequence, not a shard.

Resuming: ``state_dict()`` records the epoch and how many sequences each consumer has yielded;
``load_state_dict`` makes the next iteration continue with exactly the next sequence. In-process
iteration (no DataLoader workers) counts by itself; with DataLoader workers the counting happens in
worker processes, so use ``dataloader_state(batches_seen, batch_size, num_workers)`` from the
training loop (the DataLoader takes batches from workers round-robin, in order).
"""
from __future__ import annotations

import json
from collections import OrderedDict
from posixpath import dirname

import fsspec
import numpy as np
import pyarrow.parquet as pq

try:  # optional: the torch extra
    import torch
    from torch.utils.data import IterableDataset as _Base
    from torch.utils.data import get_worker_info
except ImportError:  # pragma: no cover - exercised where torch is absent (this repo's CI)
    torch = None
    _Base = object

    def get_worker_info():
        return None


class TokenShardDataset(_Base):
    """Fixed-length token sequences from an ``index.json`` of token shards.

    Args:
        index: path or fsspec URL of ``index.json``; shard paths are relative to its folder.
        seq_len: model context length; each item has ``seq_len + 1`` ids.
        rank, world_size: data-parallel position (``0 <= rank < world_size``).
        seed: seed of the per-epoch row-group permutation.
        shuffle: permute row groups per epoch (False: the written order).
        drop_last: drop the final short sequence of the epoch (default True: fixed shapes).
        output: ``numpy`` (1-D array in the shard dtype, uint16 or uint32) or ``torch``
            (1-D int64 tensor; ImportError if torch is missing).
        storage_options: fsspec options for remote URLs.
        num_workers, worker_id: override DataLoader worker info (for use without torch).

    Raises ValueError for bad arguments or an index of unknown format.
    """

    def __init__(self, index: str, seq_len: int, *, rank: int = 0, world_size: int = 1, seed: int = 0,
                 shuffle: bool = True, drop_last: bool = True, output: str = "numpy",
                 storage_options: dict | None = None, num_workers: int | None = None,
                 worker_id: int | None = None):
        if seq_len < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need seq_len >= 1 and 0 <= rank < world_size (got {seq_len}, {rank}, {world_size})")
        if output not in ("numpy", "torch"):
            raise ValueError("output must be 'numpy' or 'torch'")
        if output == "torch" and torch is None:
            raise ImportError("output='torch' needs PyTorch (pip install torch)")
        self.index_url, self.seq_len = index, seq_len
        self.rank, self.world_size, self.seed, self.shuffle = rank, world_size, seed, shuffle
        self.drop_last, self.output, self.so = drop_last, output, storage_options or {}
        self._num_workers, self._worker_id = num_workers, worker_id
        with fsspec.open(index, "r", **self.so) as fh:
            self.index = json.load(fh)
        if not str(self.index.get("format", "")).startswith("datapipe.tokens/"):
            raise ValueError(f"{index}: not a datapipe token index")
        self.dtype = np.dtype(self.index["dtype"])
        base = dirname(index)
        self._units = [(f"{base}/{s['path']}" if base else s["path"], g, n)
                       for s in self.index["shards"] for g, n in enumerate(s["row_group_tokens"])]
        self.total_tokens = sum(n for _, _, n in self._units)
        self.epoch = 0
        self._consumed: dict[int, int] = {}
        self._worker_offset = 0

    # ----------------------------------------------------------------------------- layout
    def _workers(self) -> tuple[int, int]:
        if self._num_workers is not None:
            return self._num_workers, self._worker_id or 0
        info = get_worker_info()
        return (info.num_workers, info.id) if info is not None else (1, 0)

    def _order(self, epoch: int) -> list[int]:
        n = len(self._units)
        if not self.shuffle:
            return list(range(n))
        return np.random.default_rng([self.seed, epoch]).permutation(n).tolist()

    def num_sequences(self, num_workers: int = 1, worker_id: int = 0) -> int:
        """Sequences this rank/worker yields per epoch (the short tail included when drop_last=False)."""
        a, b, tail = self._range(num_workers, worker_id)
        return b - a + (1 if tail else 0)

    def _range(self, num_workers: int, worker_id: int) -> tuple[int, int, bool]:
        l1 = self.seq_len + 1
        n, c_total = self.total_tokens // l1, self.world_size * num_workers
        c = self.rank * num_workers + worker_id
        tail = (not self.drop_last and c == c_total - 1 and self.total_tokens % l1 > 0)
        return n * c // c_total, n * (c + 1) // c_total, tail

    # ----------------------------------------------------------------------------- iteration
    def __iter__(self):
        num_workers, wid = self._workers()
        wid = (wid + self._worker_offset) % num_workers  # see dataloader_state
        consumer = self.rank * num_workers + wid
        a, b, tail = self._range(num_workers, wid)
        skip = self._consumed.get(consumer, 0)
        l1 = self.seq_len + 1
        start, stop = (a + skip) * l1, (b * l1 if not tail else self.total_tokens)
        produced = skip
        for seq in self._stream(self._order(self.epoch), start, stop):
            produced += 1
            self._consumed[consumer] = produced
            yield torch.from_numpy(seq.astype(np.int64)) if self.output == "torch" else seq
        self.epoch += 1  # in-process use: the next iteration is the next epoch, from its start
        self._consumed, self._worker_offset = {}, 0

    def _stream(self, order: list[int], start: int, stop: int):
        """Sequences of seq_len+1 over tokens [start, stop) of the stream in unit ``order``."""
        l1 = self.seq_len + 1
        sizes = np.array([self._units[u][2] for u in order], dtype=np.int64)
        ends = np.cumsum(sizes)
        first = int(np.searchsorted(ends, start, side="right"))
        pos = int(ends[first - 1]) if first else 0  # stream offset of unit `first`
        buf = np.zeros(0, dtype=self.dtype)
        files: OrderedDict = OrderedDict()
        for k in range(first, len(order)):
            if pos >= stop:
                break
            path, group, n = self._units[order[k]]
            ids = self._read(files, path, group)
            lo, hi = max(start - pos, 0), min(stop - pos, n)
            buf = np.concatenate([buf, ids[lo:hi]]) if len(buf) else ids[lo:hi]
            pos += n
            full = len(buf) // l1
            for i in range(full):
                yield buf[i * l1:(i + 1) * l1]
            buf = buf[full * l1:]
        if len(buf):
            yield buf  # the epoch's short tail (only reached when drop_last=False)
        for fh, _ in files.values():
            fh.close()

    def _read(self, files: OrderedDict, path: str, group: int) -> np.ndarray:
        if path not in files:
            fh = fsspec.open(path, "rb", **self.so).open()
            files[path] = (fh, pq.ParquetFile(fh))
            if len(files) > 4:  # a few open shards: row groups of one shard often come in runs
                old, _ = files.popitem(last=False)[1]
                old.close()
        files.move_to_end(path)
        col = files[path][1].read_row_group(group, columns=["input_ids"]).column(0)
        flat = col.combine_chunks().flatten()
        return flat.to_numpy(zero_copy_only=False).astype(self.dtype, copy=False)

    # ----------------------------------------------------------------------------- state
    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its beginning at the next iteration."""
        self.epoch, self._consumed, self._worker_offset = int(epoch), {}, 0

    def state_dict(self) -> dict:
        """``{"epoch", "consumed": {consumer: sequences yielded}, ...}``: JSON-able."""
        return {"epoch": self.epoch, "consumed": {str(k): v for k, v in self._consumed.items()},
                "worker_offset": self._worker_offset,
                "seq_len": self.seq_len, "seed": self.seed, "world_size": self.world_size,
                "rank": self.rank, "index_fingerprint": self.index.get("config_fingerprint")}

    def load_state_dict(self, state: dict) -> None:
        """Resume from ``state_dict()`` output. Raises ValueError if seq_len/seed/world_size differ."""
        for k in ("seq_len", "seed", "world_size"):
            if k in state and state[k] != getattr(self, k):
                raise ValueError(f"state has {k}={state[k]}, dataset has {getattr(self, k)}")
        self.epoch = int(state["epoch"])
        self._consumed = {int(k): int(v) for k, v in state.get("consumed", {}).items()}
        self._worker_offset = int(state.get("worker_offset", 0))

    def dataloader_state(self, batches_seen: int, batch_size: int, num_workers: int) -> dict:
        """State after a ``torch.utils.data.DataLoader(self, batch_size, num_workers)`` delivered
        ``batches_seen`` batches this epoch: worker w delivered batches w, w+W, w+2W, ... while all
        workers had data (the DataLoader's in-order round robin); exhausted workers are skipped.

        A new DataLoader polls its worker 0 first, so the state also rotates worker roles
        (``worker_offset``): new worker w continues old worker (w + offset) % W, and the batch after
        ``batches_seen`` is exactly the one an uninterrupted run would have delivered next."""
        w = max(1, num_workers)
        left = [self.num_sequences(w, i) for i in range(w)]
        consumed = [0] * w
        k = 0
        while batches_seen > 0 and any(left):
            i = k % w
            if left[i] > 0:
                take = min(batch_size, left[i])
                consumed[i] += take
                left[i] -= take
                batches_seen -= 1
            k += 1
        state = self.state_dict()
        state["consumed"] = {str(self.rank * w + i): c for i, c in enumerate(consumed) if c}
        state["worker_offset"] = k % w
        return state
