"""``TokenShardDataset``: the stream of sequences over token shards (the package docstring says how it is built)."""
from __future__ import annotations

import json
import warnings
from posixpath import dirname

import fsspec
import numpy as np

from datapipe.loader import plan as plan_mod
from datapipe.loader.plan import (
    STATE_FORMAT,
    Intervals,
    count,
    drop,
    resume_plan,
    split,
)
from datapipe.loader.read import Reader, doc_fields

try:  # optional: the torch extra
    import torch
    from torch.utils.data import IterableDataset as _Base
    from torch.utils.data import get_worker_info
except ImportError:  # pragma: no cover - exercised where torch is absent (this repo's CI)
    torch = None
    _Base = object

    def get_worker_info():
        return None

# Shared control block, so that DataLoader workers (persistent ones too) see the main process's
# set_epoch / load_state_dict: epoch, resume active, resume version, iterated-by-plain-workers, last pass.
_EPOCH, _RESUME, _VERSION, _IN_WORKERS, _LAST_PASS = range(5)


def _control_block():
    if torch is not None:
        return torch.zeros(5, dtype=torch.int64).share_memory_()
    return np.zeros(5, dtype=np.int64)


class TokenShardDataset(_Base):
    """Fixed-length token sequences from an ``index.json`` of token shards.

    Args:
        index: path or fsspec URL of ``index.json``; shard paths are relative to its folder.
        seq_len: model context length; each sequence has ``L = seq_len + 1`` ids.
        rank, world_size: data-parallel position (``0 <= rank < world_size``).
        seed: seed of the per-epoch row-group and in-row-group document permutations.
        shuffle: permute row groups and the documents inside them per epoch (False: written order).
        drop_last: True (default): every rank gets the same number of full batches, the few sequences
            left over are dropped. False: every token is yielded; the epoch's final short sequence is
            right-padded to L with ``pad_id``.
        output: ``numpy`` (token arrays in the shard dtype, uint16 or uint32) or ``torch`` (int64
            tensors; ImportError if torch is missing).
        document_info: items are dicts instead of token arrays: ``tokens`` [L], ``doc_ids`` [L] int32
            (0 for the document the sequence starts in, +1 at each document start, -1 on padding),
            ``positions`` [L] (int32 numpy / int64 torch; token index within its document, counted
            from the sequence start for the first one: position ids for packed attention) and
            ``valid`` [L] bool (False on padding). See ``block_causal_mask``.
        batch_size: yield batches of this many sequences (leading dimension; the last batch of a
            rank may be short when drop_last=False) instead of single sequences. Use it with
            ``DataLoader(ds, batch_size=None)``; ``TokenLoader`` sets it.
        pad_id: id used for padding (default: the index's EOS id, else 0).
        storage_options: fsspec options for remote URLs.
        num_workers, worker_id: override DataLoader worker info (for use without torch).

    Raises ValueError for bad arguments or an index of unknown format.
    """

    def __init__(self, index: str, seq_len: int, *, rank: int = 0, world_size: int = 1, seed: int = 0,
                 shuffle: bool = True, drop_last: bool = True, output: str = "numpy",
                 document_info: bool = False, batch_size: int | None = None, pad_id: int | None = None,
                 storage_options: dict | None = None, num_workers: int | None = None,
                 worker_id: int | None = None):
        if seq_len < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need seq_len >= 1 and 0 <= rank < world_size (got {seq_len}, {rank}, {world_size})")
        if output not in ("numpy", "torch"):
            raise ValueError("output must be 'numpy' or 'torch'")
        if output == "torch" and torch is None:
            raise ImportError("output='torch' needs PyTorch (pip install torch)")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {batch_size})")
        self.index_url, self.seq_len = index, seq_len
        self.rank, self.world_size, self.seed, self.shuffle = rank, world_size, seed, shuffle
        self.drop_last, self.output, self.so = drop_last, output, storage_options or {}
        self.document_info, self.batch_size = document_info, batch_size
        self._num_workers, self._worker_id = num_workers, worker_id
        with fsspec.open(index, "r", **self.so) as fh:
            self.index = json.load(fh)
        if not str(self.index.get("format", "")).startswith("datapipe.tokens/"):
            raise ValueError(f"{index}: not a datapipe token index")
        self.dtype = np.dtype(self.index["dtype"])
        self.pad_id = int(pad_id if pad_id is not None else (self.index.get("tokenizer") or {}).get("eos_id", 0))
        if not 0 <= self.pad_id <= np.iinfo(self.dtype).max:
            raise ValueError(f"pad_id {self.pad_id} does not fit the shard dtype {self.dtype}")
        base = dirname(index)
        self._units = [(f"{base}/{s['path']}" if base else s["path"], g, n)
                       for s in self.index["shards"] for g, n in enumerate(s["row_group_tokens"])]
        self.total_tokens = sum(n for _, _, n in self._units)
        l1 = seq_len + 1
        self._n_seq = self.total_tokens // l1 + (not drop_last and self.total_tokens % l1 > 0)
        self._ctl = _control_block()
        self._resume_states: list[dict] | None = None
        self._resume_version = 0
        self._live: list | None = None  # in-process pass: [epoch, plan, sequences delivered]
        self._tagged = False  # set by TokenLoader: yield (worker, delivered, batch)
        self._owner = None  # weakref to the TokenLoader that owns this dataset

    def __getstate__(self):  # pickled into DataLoader workers: no weakref, no in-process progress
        state = self.__dict__.copy()
        state["_owner"], state["_live"] = None, None
        return state

    # ----------------------------------------------------------------------------- layout
    @property
    def epoch(self) -> int:
        return int(self._ctl[_EPOCH])

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

    def _plan(self, num_workers: int, worker: int) -> Intervals:
        """Sequences of the current pass for consumer (self.rank, worker): a resume plan or a fresh epoch."""
        b = self.batch_size or 1
        if int(self._ctl[_RESUME]):
            return resume_plan(self._resume_states, self.rank, self.world_size, num_workers, worker, b,
                               self.drop_last)
        return split([(0, self._n_seq)], self.world_size, num_workers, b,
                     self.drop_last)[self.rank * num_workers + worker]

    def num_sequences(self, num_workers: int = 1, worker_id: int = 0) -> int:
        """Sequences this rank/worker yields in a full epoch (the padded tail included)."""
        return count(split([(0, self._n_seq)], self.world_size, num_workers, self.batch_size or 1,
                           self.drop_last)[self.rank * num_workers + worker_id])

    # ----------------------------------------------------------------------------- iteration
    def __iter__(self):
        num_workers, wid = self._workers()
        in_worker = get_worker_info() is not None
        if self._live is not None and not in_worker and not self._tagged:
            self._load([self.state_dict()])  # a new pass after an interrupted one continues it
        epoch, resuming = self.epoch, bool(int(self._ctl[_RESUME]))
        if resuming and int(self._ctl[_VERSION]) != self._resume_version:
            raise RuntimeError("load_state_dict was called after these DataLoader workers started (persistent "
                               "workers?): create the DataLoader after load_state_dict, or use TokenLoader")
        if in_worker and not self._tagged:
            if resuming:
                raise RuntimeError("resuming mid-epoch in plain DataLoader workers is not tracked (each pass "
                                   "would replay the resume point): use datapipe.loader.TokenLoader")
            self._ctl[_IN_WORKERS] = 1
            if wid == 0:
                if int(self._ctl[_LAST_PASS]) == epoch + 1:
                    warnings.warn(f"epoch {epoch} iterated again without set_epoch(): same order as the last "
                                  "pass (call ds.set_epoch(e) every epoch, or use TokenLoader)", stacklevel=2)
                self._ctl[_LAST_PASS] = epoch + 1
        plan = self._plan(num_workers, wid)
        track = not in_worker and not self._tagged
        if track:
            self._live = [epoch, plan, 0]
        total, done, b, batch = count(plan), 0, self.batch_size, []
        for tokens, starts in self._sequences(epoch, plan):
            batch.append(self._finish(tokens, starts))
            if b is not None and len(batch) < b and done + len(batch) < total:
                continue
            done += len(batch)
            out = self._convert(batch[0] if b is None else _stack(batch))
            batch = []
            if track:
                self._live[2] = done
            yield (wid, done, out) if self._tagged else out
        if track:
            self._end_epoch()

    def _end_epoch(self) -> None:
        self._ctl[_EPOCH] = self.epoch + 1
        self._ctl[_RESUME] = 0
        self._resume_states, self._live = None, None

    def _sequences(self, epoch: int, plan: Intervals):
        """(tokens [<=L], doc starts [<=L] bool or None) per sequence of ``plan``, in order."""
        l1, T = self.seq_len + 1, self.total_tokens
        order = self._order(epoch)
        ends = np.cumsum(np.array([self._units[u][2] for u in order], dtype=np.int64))
        reader = Reader(self)
        try:
            for lo, hi in plan:
                yield from self._stream(reader, epoch, order, ends, lo * l1, min(hi * l1, T))
        finally:
            reader.close()

    def _stream(self, reader, epoch, order, ends, start, stop):
        """Sequences of L over stream tokens [start, stop); the last one is short only at the stream's end."""
        l1 = self.seq_len + 1
        k = int(np.searchsorted(ends, start, side="right"))
        pos = int(ends[k - 1]) if k else 0  # stream offset of unit order[k]
        buf, sbuf = np.zeros(0, self.dtype), np.zeros(0, bool)
        while pos < stop and k < len(order):
            ids, starts = reader.unit(epoch, order[k])
            n = len(ids)
            lo, hi = max(start - pos, 0), min(stop - pos, n)
            buf = np.concatenate([buf, ids[lo:hi]])
            if starts is not None:
                sbuf = np.concatenate([sbuf, starts[lo:hi]])
            pos, k = pos + n, k + 1
            full = len(buf) // l1
            for i in range(full):
                yield buf[i * l1:(i + 1) * l1], (sbuf[i * l1:(i + 1) * l1] if starts is not None else None)
            buf, sbuf = buf[full * l1:], sbuf[full * l1:]
        if len(buf):
            yield buf, (sbuf if self.document_info else None)

    def _finish(self, tokens: np.ndarray, starts: np.ndarray | None):
        """One sequence padded to L (only the epoch's final one is short), with its document fields."""
        l1, n = self.seq_len + 1, len(tokens)
        if n < l1:
            tokens = np.concatenate([tokens, np.full(l1 - n, self.pad_id, self.dtype)])
        return doc_fields(tokens, starts, n) if self.document_info else tokens

    def _convert(self, item):
        if self.output == "numpy":
            return item
        if isinstance(item, dict):
            return {k: _to_torch(v, k) for k, v in item.items()}
        return _to_torch(item, "tokens")

    # ----------------------------------------------------------------------------- state
    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its beginning at the next pass; reaches DataLoader workers (persistent too)."""
        self._ctl[_EPOCH] = int(epoch)
        self._ctl[_RESUME] = 0
        self._ctl[_LAST_PASS] = 0
        self._resume_states, self._live = None, None
        owner = self._owner() if self._owner else None
        if owner is not None:
            owner._forget()

    def _stream_info(self) -> dict:
        return {"seq_len": self.seq_len, "seed": self.seed, "shuffle": self.shuffle, "drop_last": self.drop_last,
                "total_tokens": self.total_tokens, "index_fingerprint": self.index.get("config_fingerprint")}

    def _state(self, epoch: int, num_workers: int, remaining: dict[int, Intervals], next_worker: int | None) -> dict:
        return {"format": STATE_FORMAT, "epoch": epoch, "rank": self.rank, "world_size": self.world_size,
                "num_workers": num_workers, "batch_size": self.batch_size or 1, "next_worker": next_worker,
                "remaining": {str(c): [[lo, hi] for lo, hi in iv] for c, iv in remaining.items()},
                **self._stream_info()}

    def state_dict(self) -> dict:
        """JSON-able position in the stream: epoch and, per consumer, the sequences not yet delivered.

        Delegates to the owning ``TokenLoader`` if any. Raises RuntimeError when the dataset was
        iterated by plain DataLoader worker processes (their progress never reaches this process)."""
        owner = self._owner() if self._owner else None
        if owner is not None:
            return owner.state_dict()
        if int(self._ctl[_IN_WORKERS]):
            raise RuntimeError("this dataset was iterated by DataLoader worker processes, whose progress this "
                               "process cannot see: wrap it, loader = TokenLoader(ds, batch_size, num_workers=...), "
                               "and use loader.state_dict() / loader.load_state_dict()")
        num_workers, wid = self._workers()
        if self._live is not None:
            epoch, plan, done = self._live
            rest = drop(plan, done)
        else:
            epoch, rest = self.epoch, self._plan(num_workers, wid)
        return self._state(epoch, num_workers, {self.rank * num_workers + wid: rest}, None)

    def load_state_dict(self, state: dict | list[dict]) -> None:
        """Resume from ``state_dict()`` output: one rank's state, or the list of every rank's states.

        The next pass continues exactly: with the saved layout each consumer continues its own remainder;
        with another num_workers/batch_size (same world_size) this rank's remainder is re-split; with
        another world_size the remainder of all ranks is (needs every rank's state). Raises ValueError
        if the stream differs (seq_len, seed, shuffle, drop_last, index) or the states do not cover
        the new layout."""
        owner = self._owner() if self._owner else None
        if owner is not None:
            return owner.load_state_dict(state)
        self._load(state)
        num_workers, wid = self._workers()
        self._plan(num_workers, wid)  # refuse now rather than at the first pass

    def _load(self, state) -> None:
        states = [state] if isinstance(state, dict) else list(state)
        if not states:
            raise ValueError("load_state_dict needs a state (or a non-empty list of states)")
        states = json.loads(json.dumps(states))  # the checkpoint form: str keys, lists
        for s in states:
            plan_mod.check_stream(s, self._stream_info())
        epoch = int(states[0]["epoch"])
        self._live = None
        if all(not iv for s in states for iv in s["remaining"].values()):
            self.set_epoch(epoch + 1)  # saved after the epoch's last batch
            return
        self._ctl[_EPOCH] = epoch
        self._resume_states = states
        self._resume_version += 1
        self._ctl[_VERSION] = self._resume_version
        self._ctl[_RESUME] = 1
        self._ctl[_LAST_PASS] = 0


def _stack(batch: list):
    if isinstance(batch[0], dict):
        return {k: np.stack([x[k] for x in batch]) for k in batch[0]}
    return np.stack(batch)


_TORCH_DTYPES = {"tokens": "int64", "positions": "int64", "doc_ids": "int32", "valid": "bool"}


def _to_torch(a: np.ndarray, field: str):
    return torch.from_numpy(a.astype(_TORCH_DTYPES[field], copy=False))
