"""Tokenizers, dtype choice, token-shard writing (case B29) and ``datapipe tokenizer``."""
from __future__ import annotations

import json

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from phase3_util import cc_docs
from tokenizers import Tokenizer

from datapipe.cli.main import main as cli_main
from datapipe.env import shared_cases
from datapipe.formats.tokens import AtomicParquetWriter, ids_array, token_schema
from datapipe.loader import TokenShardDataset
from datapipe.stages.phases.tokenize.bpe_training import train_bpe
from datapipe.stages.phases.tokenize.tokenizer import (
    TokenizeConfig,
    TokenizerError,
    load_tokenizer,
    token_dtype,
)


@pytest.fixture(scope="module")
def texts():
    return [d["text"] for d in cc_docs()]


def test_published_ids():
    # Widely published reference encodings (OpenAI tokenizer pages / tiktoken README).
    assert load_tokenizer(TokenizeConfig()).encode_ordinary(["Hello world"]) == [[15496, 995]]
    assert load_tokenizer(TokenizeConfig(tokenizer="cl100k_base")).encode_ordinary(["hello world"]) == [[15339, 1917]]


def test_r50k_equals_gpt2_bpe_on_real_text(texts):
    # Two independent implementations (tiktoken ranks file vs HF BPE from vocab.json + merges.txt).
    a = load_tokenizer(TokenizeConfig()).encode_ordinary(texts)
    b = load_tokenizer(TokenizeConfig(tokenizer="gpt2_bpe")).encode_ordinary(texts)
    assert sum(map(len, a)) > 40_000
    assert a == b


def test_hf_tokenizer_json_matches_library(tmp_path, texts):
    path = tmp_path / "tok.json"
    info = train_bpe(texts, str(path), vocab_size=600, special_tokens=["<|endoftext|>", "<s>"])
    assert info["vocab_size"] == 600
    ref = Tokenizer.from_file(str(path))
    tok = load_tokenizer(TokenizeConfig(tokenizer=str(path), bos="<s>"))
    assert (tok.eos_id, tok.bos_id, tok.dtype) == (0, 1, np.uint16)
    ids, lengths = tok.encode_docs(texts[:5])
    pos = 0
    for t, n in zip(texts[:5], lengths):
        expect = [1] + ref.encode(t, add_special_tokens=False).ids + [0]
        assert ids[pos:pos + n].tolist() == expect
        pos += n


def test_eos_after_every_doc_and_bos_before(texts):
    tok = load_tokenizer(TokenizeConfig(bos="<|endoftext|>"))
    plain = tok.encode_ordinary(texts[:3])
    ids, lengths = tok.encode_docs(texts[:3])
    assert lengths.tolist() == [len(p) + 2 for p in plain]
    pos = 0
    for p, n in zip(plain, lengths):
        assert ids[pos] == 50256 and ids[pos + n - 1] == 50256 and ids[pos + 1:pos + n - 1].tolist() == p
        pos += n


def test_special_token_text_inside_document_is_plain_text():
    for name in ("r50k_base", "gpt2_bpe"):
        tok = load_tokenizer(TokenizeConfig(tokenizer=name))
        ids, lengths = tok.encode_docs(["a <|endoftext|> b"])
        assert lengths.tolist() == [len(ids)]
        assert np.flatnonzero(ids == 50256).tolist() == [len(ids) - 1], name


def test_missing_tokens_fail_at_startup(tmp_path):
    with pytest.raises(TokenizerError, match="EOS token '</s>'"):
        load_tokenizer(TokenizeConfig(eos="</s>"))
    with pytest.raises(TokenizerError, match="BOS token '<s>'"):
        load_tokenizer(TokenizeConfig(bos="<s>"))
    with pytest.raises(TokenizerError, match="not found"):
        load_tokenizer(TokenizeConfig(tokenizer=str(tmp_path / "nope.json")))
    with pytest.raises(TokenizerError, match="uint16 cannot hold"):
        load_tokenizer(TokenizeConfig(tokenizer="cl100k_base", dtype="uint16"))
    with pytest.raises(ValueError):
        TokenizeConfig(shard_token=5)  # typo: extra keys are forbidden


def test_dtype_from_vocab_size():
    assert token_dtype(65536) == np.uint16 and token_dtype(65537) == np.uint32
    assert load_tokenizer(TokenizeConfig()).dtype == np.uint16
    cl = load_tokenizer(TokenizeConfig(tokenizer="cl100k_base"))
    assert (cl.vocab_size, cl.dtype, cl.eos_id) == (100277, np.uint32, 100257)


def test_case_B29_uint32_never_wraps(tmp_path):
    case = json.loads((shared_cases() / "B29.json").read_text())
    ids = np.array(case["token_ids"], dtype=np.int64)
    dtype = token_dtype(case["vocab_size"])
    assert dtype == np.uint32
    fs = fsspec.filesystem("file")
    table = pa.table([pa.array(["d0"]), pa.array(["web"]), pa.array([0], pa.int32()),
                      pa.array([len(ids)], pa.int32()), ids_array(ids.astype(dtype), np.array([len(ids)]))],
                     schema=token_schema(dtype))
    with AtomicParquetWriter(str(tmp_path / "shard-00000.parquet"), fs, table.schema, row_group_tokens=2**20) as w:
        w.write(table)
    assert pq.read_schema(tmp_path / "shard-00000.parquet").field("input_ids").type == pa.list_(pa.uint32())
    index = {"format": "datapipe.tokens/1", "dtype": "uint32",
             "shards": [{"path": "shard-00000.parquet", "row_group_tokens": w.row_group_sizes}]}
    (tmp_path / "index.json").write_text(json.dumps(index))
    got = list(TokenShardDataset(str(tmp_path / "index.json"), seq_len=len(ids) - 1, shuffle=False))
    assert len(got) == 1 and got[0].dtype == np.uint32
    assert got[0].tolist() == [0, 255, 65535, 65536, 70000, 100256, 100276]


def test_atomic_writer_leaves_nothing_on_error(tmp_path):
    fs = fsspec.filesystem("file")
    schema = token_schema(np.uint16)
    with pytest.raises(RuntimeError):
        with AtomicParquetWriter(str(tmp_path / "x.parquet"), fs, schema):
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_cli_train_and_encode(tmp_path, capsys, texts):
    run = tmp_path / "run"
    (run / "documents").mkdir(parents=True)
    pq.write_table(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}),
                   run / "documents" / "part-0.parquet")
    out = tmp_path / "tokenizer.json"
    assert cli_main(["tokenizer", "train", str(run), "--out", str(out), "--vocab-size", "500"]) == 0
    ref = Tokenizer.from_file(str(out))
    assert ref.get_vocab_size() == 500 and ref.token_to_id("<|endoftext|>") == 0
    capsys.readouterr()
    assert cli_main(["tokenizer", "encode", "--tokenizer", str(out), texts[0][:200]]) == 0
    assert json.loads(capsys.readouterr().out) == ref.encode(texts[0][:200], add_special_tokens=False).ids


def _trained(tmp_path, texts):
    run = tmp_path / "run"
    (run / "documents").mkdir(parents=True)
    pq.write_table(pa.table({"text": texts[:40]}), run / "documents" / "part-0.parquet")
    out = tmp_path / "sub" / "tokenizer.json"
    assert cli_main(["tokenizer", "train", str(run), "--out", str(out), "--vocab-size", "400"]) == 0
    return out


def test_cli_trained_tokenizer_has_the_umask_mode(tmp_path, texts):
    """A trained tokenizer was written 0600 (a mkstemp file renamed into place)."""
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    out = _trained(tmp_path, texts)
    assert os.stat(out).st_mode & 0o777 == 0o666 & ~mask
    assert [p.name for p in out.parent.iterdir()] == ["tokenizer.json"]  # no temporary file left


def test_cli_info_takes_the_tokenizer_as_positional(tmp_path, capsys, texts):
    """``datapipe tokenizer info FILE`` failed: only ``--tokenizer FILE`` was accepted."""
    import hashlib

    out = _trained(tmp_path, texts)
    capsys.readouterr()
    assert cli_main(["tokenizer", "info", str(out)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["vocab_size"] == Tokenizer.from_file(str(out)).get_vocab_size() == 400
    assert info["eos_id"] == 0 and info["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert cli_main(["tokenizer", "info", "--tokenizer", str(out)]) == 0
    assert json.loads(capsys.readouterr().out) == info
    assert cli_main(["tokenizer", "info", str(out), "--tokenizer", "cl100k_base"]) == 2  # one line, exit 2
    assert capsys.readouterr().err.startswith("error: two tokenizers given")
    assert cli_main(["tokenizer", "info"]) == 0  # the default stays r50k_base
    assert json.loads(capsys.readouterr().out)["name"] == "r50k_base"
