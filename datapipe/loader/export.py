"""Export a run's token shards for other training stacks: Megatron-LM ``.bin/.idx`` and NumPy memmap.

Both keep the documents in written order (phase 3 already shuffled them) and stream one Parquet
row group at a time, so memory is a row group plus 4 bytes of length per document.
"""
from __future__ import annotations

import json
import math
import pickle
import struct
from posixpath import dirname

import fsspec
import numpy as np
import pyarrow.parquet as pq

# Megatron-LM MMapIndexedDataset (megatron/core/datasets/indexed_dataset.py): 9-byte magic, u64
# version 1, u8 dtype code, u64 sequence count, u64 document count (entries of document_indices),
# int32 lengths, int64 byte pointers, int64 document_indices (0 and the end of each document).
MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
MEGATRON_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}  # Megatron has no uint32 code


def export_tokens(index: str, out: str, format: str = "megatron", *, val_fraction: float = 0.0,
                  storage_options: dict | None = None) -> dict:
    """Write every document of the token index ``index`` (path or fsspec URL of ``index.json``).

    format="megatron": ``{out}.bin`` and ``{out}.idx`` (Megatron-LM MMapIndexedDataset, one sequence
        per document, EOS included; pass ``out`` as ``--data-path``). Token dtype uint16 (code 8) for
        uint16 shards, int32 (code 4) for uint32 ones.
    format="memmap": folder ``out`` with nanoGPT-style ``train.bin`` (and ``val.bin``: the last
        ``ceil(val_fraction * documents)`` documents, when val_fraction > 0): headerless little-endian
        token ids in the shard dtype, read with ``np.memmap(path, dtype=np.uint16, mode="r")`` (or
        uint32); ``meta.json`` (dtype, tokens and documents per split, tokenizer) and ``meta.pkl``
        (``{"vocab_size": ...}``, which nanoGPT's train.py reads).

    Files are written under a temporary name and renamed when complete. Returns ``{"format",
    "files", "documents", "tokens", "dtype"}``. Raises ValueError for an unknown format, a bad
    val_fraction (only memmap splits), an index that is not a datapipe token index, or uint32 ids
    that do not fit Megatron's int32.
    """
    so = storage_options or {}
    with fsspec.open(index, "r", **so) as fh:
        idx = json.load(fh)
    if not str(idx.get("format", "")).startswith("datapipe.tokens/"):
        raise ValueError(f"{index}: not a datapipe token index")
    if format not in ("megatron", "memmap"):
        raise ValueError(f"format must be 'megatron' or 'memmap' (got {format!r})")
    if not 0.0 <= val_fraction < 1.0 or (val_fraction and format != "memmap"):
        raise ValueError("val_fraction must be in [0, 1) and is for format='memmap' (Megatron splits with --split)")
    base = dirname(index)
    shards = [f"{base}/{s['path']}" if base else s["path"] for s in idx["shards"]]
    src = np.dtype(idx["dtype"])
    fs, root = fsspec.core.url_to_fs(out, **so)
    if format == "megatron":
        return _megatron(shards, src, fs, root, so)
    return _memmap(shards, src, idx, fs, root, val_fraction, so)


def _documents(shards: list[str], so: dict):
    """(flat ids, per-document lengths) per row group, in written order."""
    for path in shards:
        with fsspec.open(path, "rb", **so) as fh:
            pf = pq.ParquetFile(fh)
            for g in range(pf.num_row_groups):
                col = pf.read_row_group(g, columns=["input_ids"]).column(0).combine_chunks()
                offs = col.offsets.to_numpy()
                yield col.flatten().to_numpy(zero_copy_only=False), np.diff(offs).astype(np.int64)


def _count_documents(shards: list[str], so: dict) -> int:
    n = 0
    for path in shards:
        with fsspec.open(path, "rb", **so) as fh:
            n += pq.ParquetFile(fh).metadata.num_rows
    return n


def _megatron(shards, src, fs, prefix, so) -> dict:
    dtype = np.dtype(np.uint16) if src == np.uint16 else np.dtype(np.int32)
    lengths = []
    if dirname(prefix):
        fs.makedirs(dirname(prefix), exist_ok=True)
    with fs.open(prefix + ".bin.tmp", "wb") as fh:
        for ids, lens in _documents(shards, so):
            if dtype == np.int32 and len(ids) and int(ids.max()) > np.iinfo(np.int32).max:
                raise ValueError("token ids above 2**31-1 do not fit Megatron's int32 token dtype")
            fh.write(ids.astype(dtype.newbyteorder("<"), copy=False).tobytes())
            lengths.append(lens)
    n_tok = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    pointers = (np.cumsum(n_tok) - n_tok) * dtype.itemsize  # byte offset of each document in .bin
    with fs.open(prefix + ".idx.tmp", "wb") as fh:
        fh.write(MEGATRON_MAGIC + struct.pack("<Q", 1) + struct.pack("<B", MEGATRON_CODES[dtype]))
        fh.write(struct.pack("<Q", len(n_tok)) + struct.pack("<Q", len(n_tok) + 1))
        fh.write(n_tok.astype("<i4").tobytes())
        fh.write(pointers.astype("<i8").tobytes())
        fh.write(np.arange(len(n_tok) + 1, dtype="<i8").tobytes())  # one sequence per document
    for ext in (".bin", ".idx"):
        fs.mv(prefix + ext + ".tmp", prefix + ext)
    return {"format": "megatron", "files": [prefix + ".bin", prefix + ".idx"], "documents": len(n_tok),
            "tokens": int(n_tok.sum()), "dtype": dtype.name}


def _memmap(shards, src, idx, fs, folder, val_fraction, so) -> dict:
    fs.makedirs(folder, exist_ok=True)
    n_docs = _count_documents(shards, so)
    n_val = math.ceil(val_fraction * n_docs) if val_fraction else 0
    cut = n_docs - n_val  # documents [0, cut) train, [cut, n_docs) val
    splits = ["train"] + (["val"] if n_val else [])
    files = {s: fs.open(f"{folder}/{s}.bin.tmp", "wb") for s in splits}
    tokens, docs, seen = dict.fromkeys(splits, 0), dict.fromkeys(splits, 0), 0
    le = src.newbyteorder("<")
    try:
        for ids, lens in _documents(shards, so):
            k = min(max(cut - seen, 0), len(lens))  # documents of this row group that go to train
            at = int(lens[:k].sum())
            for s, part, nd in (("train", ids[:at], k), ("val", ids[at:], len(lens) - k)):
                if nd:
                    files[s].write(part.astype(le, copy=False).tobytes())
                    tokens[s] += len(part)
                    docs[s] += nd
            seen += len(lens)
    finally:
        for fh in files.values():
            fh.close()
    for s in splits:
        fs.mv(f"{folder}/{s}.bin.tmp", f"{folder}/{s}.bin")
    tok = idx.get("tokenizer") or {}
    meta = {"format": "nanogpt-memmap", "dtype": src.name, "tokens": tokens, "documents": docs,
            "vocab_size": tok.get("vocab_size"), "eos_id": tok.get("eos_id"), "source": idx.get("config_fingerprint")}
    with fs.open(f"{folder}/meta.json", "w") as fh:
        json.dump(meta, fh, indent=1)
    if tok.get("vocab_size"):
        with fs.open(f"{folder}/meta.pkl", "wb") as fh:
            pickle.dump({"vocab_size": int(tok["vocab_size"])}, fh)
    names = [f"{folder}/{s}.bin" for s in splits] + [f"{folder}/meta.json"] + \
        ([f"{folder}/meta.pkl"] if tok.get("vocab_size") else [])
    return {"format": "memmap", "files": names, "documents": sum(docs.values()), "tokens": sum(tokens.values()),
            "dtype": src.name}
