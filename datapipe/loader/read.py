"""Reading the units of token shards (Parquet row groups) and the document fields of a sequence.

Used by ``datapipe.loader.TokenShardDataset``; a unit's documents are reordered per epoch by
``default_rng([seed, epoch, unit])`` so that shuffling matters even with a single row group.
"""
from __future__ import annotations

from collections import OrderedDict

import fsspec
import numpy as np
import pyarrow.parquet as pq

try:
    import torch
except ImportError:  # pragma: no cover - exercised where torch is absent
    torch = None


class Reader:
    """Open shard files (a few, LRU) and the last unit read, for one pass of one consumer."""

    def __init__(self, ds):
        self.ds, self.files, self.last = ds, OrderedDict(), None

    def unit(self, epoch: int, u: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Tokens of unit ``u`` in this epoch's document order, and doc-start flags (document_info only)."""
        if self.last is not None and self.last[0] == u:
            return self.last[1]
        ds = self.ds
        path, group, _ = ds._units[u]
        if path not in self.files:
            fh = fsspec.open(path, "rb", **ds.so).open()
            self.files[path] = (fh, pq.ParquetFile(fh))
            if len(self.files) > 4:  # row groups of one shard often come in runs
                self.files.popitem(last=False)[1][0].close()
        self.files.move_to_end(path)
        col = self.files[path][1].read_row_group(group, columns=["input_ids"]).column(0).combine_chunks()
        flat = col.flatten().to_numpy(zero_copy_only=False).astype(ds.dtype, copy=False)
        offs = col.offsets.to_numpy().astype(np.int64)
        offs -= offs[0]
        lens = np.diff(offs)
        if ds.shuffle and len(lens) > 1:
            perm = np.random.default_rng([ds.seed, epoch, u]).permutation(len(lens))
            if len(flat) > 256 * len(lens):  # long documents: copying slices beats an index gather
                flat = np.concatenate([flat[offs[i]:offs[i + 1]] for i in perm.tolist()])
                lens = lens[perm]
                offs = np.concatenate([[0], np.cumsum(lens)])
            else:
                lens, old_starts = lens[perm], offs[:-1][perm]
                offs = np.concatenate([[0], np.cumsum(lens)])
                flat = flat[np.repeat(old_starts - offs[:-1], lens) + np.arange(len(flat))]
        starts = None
        if ds.document_info:
            starts = np.zeros(len(flat), bool)
            starts[offs[:-1][lens > 0]] = True
        self.last = (u, (flat, starts))
        return flat, starts

    def close(self) -> None:
        for fh, _ in self.files.values():
            fh.close()
        self.files.clear()


def doc_fields(tokens: np.ndarray, starts: np.ndarray, n: int) -> dict:
    """document_info fields of one sequence; ``n`` real tokens, the rest padding."""
    l1 = len(tokens)
    s = np.zeros(l1, bool)
    s[:n] = starts[:n]
    doc_ids = (np.cumsum(s) - s[0]).astype(np.int32)
    idx = np.arange(l1, dtype=np.int32)
    positions = idx - np.maximum.accumulate(np.where(s, idx, 0))
    valid = idx < n
    doc_ids[~valid], positions[~valid] = -1, 0
    return {"tokens": tokens, "doc_ids": doc_ids, "positions": positions, "valid": valid}


def block_causal_mask(doc_ids):
    """Attention mask [..., L, L] (bool, True = may attend) from ``doc_ids`` [..., L]: causal within a
    document, nothing across documents. Padding (doc_id -1) attends only to earlier padding, so no
    row is empty (an all-False row gives NaN in softmax). Works on numpy arrays and torch tensors."""
    same = doc_ids[..., :, None] == doc_ids[..., None, :]
    n = doc_ids.shape[-1]
    if torch is not None and isinstance(doc_ids, torch.Tensor):
        return same & torch.ones(n, n, dtype=torch.bool, device=doc_ids.device).tril()
    return same & np.tri(n, dtype=bool)
