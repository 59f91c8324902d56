"""Exports read back by readers written here from the formats' own descriptions, not with our code.

Megatron-LM .idx (megatron/core/datasets/indexed_dataset.py, _IndexWriter/_IndexReader): b"MMIDIDX\\x00\\x00",
u64 version (1), u8 dtype code (4 int32, 8 uint16), u64 sequence count, u64 document count, then
int32 sequence lengths, int64 byte pointers into .bin, int64 document indices (sequence ranges).
nanoGPT: train.bin / val.bin read as np.memmap(path, dtype=np.uint16, mode="r"), meta.pkl vocab_size.
"""
from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from loader_util import write_index

from datapipe.loader.export import export_tokens


def _written_documents(index: str) -> list[np.ndarray]:
    idx = json.loads(Path(index).read_text())
    docs = []
    for s in idx["shards"]:
        docs += [np.array(d) for d in pq.read_table(Path(index).parent / s["path"]).column("input_ids").to_pylist()]
    return docs


def _read_megatron(prefix: str):
    raw = Path(prefix + ".idx").read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    (version,) = struct.unpack_from("<Q", raw, 9)
    (code,) = struct.unpack_from("<B", raw, 17)
    n_seq, n_doc = struct.unpack_from("<QQ", raw, 18)
    off = 34
    lengths = np.frombuffer(raw, "<i4", n_seq, off)
    pointers = np.frombuffer(raw, "<i8", n_seq, off + 4 * n_seq)
    doc_index = np.frombuffer(raw, "<i8", n_doc, off + 12 * n_seq)
    assert version == 1 and off + 12 * n_seq + 8 * n_doc == len(raw)
    dtype = np.dtype({4: "<i4", 8: "<u2"}[code])
    data = np.memmap(prefix + ".bin", dtype=np.uint8, mode="r")
    assert len(data) == int(lengths.sum()) * dtype.itemsize
    seqs = [np.frombuffer(data, dtype, n, p) for n, p in zip(lengths, pointers)]
    return code, seqs, doc_index


@pytest.mark.parametrize("dtype,first_id,code", [("uint16", 1, 8), ("uint32", 70_000, 4)])
def test_megatron_bin_idx(tmp_path, dtype, first_id, code):
    index, _ = write_index(tmp_path / "tok", 90, dtype=dtype, first_id=first_id)
    out = export_tokens(index, str(tmp_path / "mega" / "train_text_document"), "megatron")
    got_code, seqs, doc_index = _read_megatron(str(tmp_path / "mega" / "train_text_document"))
    docs = _written_documents(index)
    assert got_code == code and out["documents"] == len(docs) == len(seqs)
    assert np.array_equal(doc_index, np.arange(len(docs) + 1))  # one sequence per document
    assert all(np.array_equal(a, b) for a, b in zip(seqs, docs))
    assert sorted(p.name for p in (tmp_path / "mega").iterdir()) == ["train_text_document.bin",
                                                                     "train_text_document.idx"]


def test_nanogpt_memmap(tmp_path):
    index, _ = write_index(tmp_path / "tok", 90)
    out = export_tokens(index, str(tmp_path / "data"), "memmap", val_fraction=0.1)
    docs = _written_documents(index)
    train = np.memmap(tmp_path / "data" / "train.bin", dtype=np.uint16, mode="r")
    val = np.memmap(tmp_path / "data" / "val.bin", dtype=np.uint16, mode="r")
    assert np.array_equal(train, np.concatenate(docs[:81])) and np.array_equal(val, np.concatenate(docs[81:]))
    meta = pickle.loads((tmp_path / "data" / "meta.pkl").read_bytes())
    assert meta["vocab_size"] == int(max(d.max() for d in docs)) + 1
    info = json.loads((tmp_path / "data" / "meta.json").read_text())
    assert info["documents"] == {"train": 81, "val": 9} and info["dtype"] == "uint16"
    assert out["tokens"] == len(train) + len(val)
    with pytest.raises(ValueError, match="val_fraction"):
        export_tokens(index, str(tmp_path / "m"), "megatron", val_fraction=0.1)


def test_cli_takes_the_run_folder_and_errors_in_one_line(tmp_path, capsys):
    """``export-tokens RUN --out OUT`` (the folder a user has) was an IsADirectoryError traceback."""
    from datapipe.cli import main as cli

    index, _ = write_index(tmp_path / "run" / "tokens", 20)
    assert Path(index) == tmp_path / "run" / "tokens" / "index.json"
    for given in (tmp_path / "run", tmp_path / "run" / "tokens"):
        assert cli.main(["export-tokens", str(given), "--out", str(tmp_path / given.name)]) == 0
        _, seqs, _ = _read_megatron(str(tmp_path / given.name))
        assert all(np.array_equal(a, b) for a, b in zip(seqs, _written_documents(index))) and len(seqs) == 20
    capsys.readouterr()
    (tmp_path / "empty").mkdir()
    assert cli.main(["export-tokens", str(tmp_path / "empty"), "--out", str(tmp_path / "x")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err == (f"error: {tmp_path / 'empty'} is a folder without a token index (tokens/index.json): "
                   "was the run's tokenize phase on?")
    assert cli.main(["export-tokens", str(tmp_path / "no.json"), "--out", str(tmp_path / "x")]) == 2
    assert " ".join(capsys.readouterr().err.split()) == f"error: {tmp_path / 'no.json'}: No such file or directory"
    assert not (tmp_path / "x.bin").exists()
    # The output is --out, as for every other command; the old positional gets a one-line hint.
    assert cli.main(["export-tokens", str(tmp_path / "run"), str(tmp_path / "y")]) == 2
    assert " ".join(capsys.readouterr().err.split()) == (
        f"error: give the output as --out {tmp_path / 'y'} (export-tokens takes --out, as every other command does)")
    assert not (tmp_path / "y.bin").exists()
