"""A tokenizer.json's own specials (issue 14): a post-processor that adds BOS by itself is honoured
and reported in index.json, or the run is refused naming the tokens and the setting. Never silent."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from distributed import Client, LocalCluster
from phase3_util import cc_docs, make_run_dir
from tokenizers import Tokenizer, processors

from datapipe.stages.phases.tokenize.bpe_training import train_bpe
from datapipe.stages.phases.tokenize.mixture import MixConfig
from datapipe.stages.phases.tokenize.phase import run_mix_tokenize
from datapipe.stages.phases.tokenize.tokenizer import (
    TokenizeConfig,
    TokenizerError,
    load_tokenizer,
)

EOS, BOS, END = 0, 1, 2  # ids of <|endoftext|>, <s>, </s> in the tokenizer trained below


@pytest.fixture(scope="module")
def docs():
    return cc_docs()[:12]


def _tokenizer(path, docs, template: str) -> str:
    """A byte-level BPE trained on real CC text whose post-processor is ``TemplateProcessing(template)``."""
    train_bpe([d["text"] for d in docs], str(path), vocab_size=400, special_tokens=["<|endoftext|>", "<s>", "</s>"])
    tok = Tokenizer.from_file(str(path))
    tok.post_processor = processors.TemplateProcessing(single=template, special_tokens=[("<s>", BOS), ("</s>", END)])
    tok.save(str(path))
    return str(path)


def _phase3(run, tok_cfg: TokenizeConfig) -> tuple[dict, list[dict]]:
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0") as c, \
            Client(c) as client:
        run_mix_tokenize(client, str(run), MixConfig(), tok_cfg)
    index = json.loads((run / "tokens" / "index.json").read_text())
    rows = [r for s in index["shards"] for r in pq.read_table(run / "tokens" / s["path"]).to_pylist()]
    return index, rows


def test_bos_of_the_post_processor_is_added_and_reported(tmp_path, docs):
    path = _tokenizer(tmp_path / "tok.json", docs, "<s> $A")
    index, rows = _phase3(make_run_dir(tmp_path / "run", docs), TokenizeConfig(tokenizer=path))
    info = index["tokenizer"]
    assert (info["bos"], info["bos_id"], info["eos"], info["eos_id"]) == ("<s>", BOS, "<|endoftext|>", EOS)
    assert info["bos_source"] == "post_processor"
    assert info["post_processor"] == {"before": ["<s>"], "before_ids": [BOS], "after": [], "after_ids": [],
                                      "used": True}
    # The ids are the library's own encoding (post-processor included) plus our EOS.
    ref = Tokenizer.from_file(path)
    by_id = {d["id"]: d["text"] for d in docs}
    assert len(rows) == len(docs)
    for r in rows:
        assert r["input_ids"] == ref.encode(by_id[r["doc_id"]]).ids + [EOS]
        assert r["input_ids"][0] == BOS and r["input_ids"].count(BOS) == 1


def test_ignoring_the_post_processor_is_explicit(tmp_path, docs):
    path = _tokenizer(tmp_path / "tok.json", docs, "<s> $A")
    index, rows = _phase3(make_run_dir(tmp_path / "run", docs), TokenizeConfig(tokenizer=path, post_processor="ignore"))
    info = index["tokenizer"]
    assert (info["bos"], info["bos_id"], info["bos_source"]) == (None, None, None)
    assert info["post_processor"]["before"] == ["<s>"] and info["post_processor"]["used"] is False
    assert all(r["input_ids"][0] != BOS and r["input_ids"][-1] == EOS for r in rows)


def test_explicit_bos_equal_to_the_post_processors_is_added_once(tmp_path, docs):
    path = _tokenizer(tmp_path / "tok.json", docs, "<s> $A")
    tok = load_tokenizer(TokenizeConfig(tokenizer=path, bos="<s>"))
    assert (tok.bos_id, tok.bos_source) == (BOS, "tokenize.bos")
    ids, _ = tok.encode_docs(["a short text"])
    assert ids.tolist().count(BOS) == 1 and ids[0] == BOS


def test_conflicts_are_refused_naming_tokens_and_settings(tmp_path, docs):
    both = _tokenizer(tmp_path / "both.json", docs, "<s> $A </s>")
    with pytest.raises(TokenizerError) as e:
        load_tokenizer(TokenizeConfig(tokenizer=both))  # appends </s>, but tokenize.eos is <|endoftext|>
    msg = str(e.value)
    assert "'<s>' (id 1) before" in msg and "'</s>' (id 2) after" in msg
    assert "tokenize.eos" in msg and "tokenize.post_processor: ignore" in msg
    # Naming the tokenizer's EOS resolves it: <s> ... </s>, each once.
    tok = load_tokenizer(TokenizeConfig(tokenizer=both, eos="</s>"))
    ids, _ = tok.encode_docs(["a short text"])
    assert ids[0] == BOS and ids[-1] == END and ids.tolist().count(END) == 1

    bos_only = _tokenizer(tmp_path / "bos.json", docs, "<s> $A")
    with pytest.raises(TokenizerError, match=r"tokenize.bos is '</s>': set tokenize.bos to '<s>'"):
        load_tokenizer(TokenizeConfig(tokenizer=bos_only, bos="</s>"))
    # The refusal comes before any phase-3 work.
    run = make_run_dir(tmp_path / "run", docs)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0") as c, \
            Client(c) as client, pytest.raises(TokenizerError):
        run_mix_tokenize(client, str(run), MixConfig(), TokenizeConfig(tokenizer=both))
    assert not (run / "tokens").exists()


def test_stored_truncation_and_padding_are_switched_off(tmp_path, docs):
    path = _tokenizer(tmp_path / "tok.json", docs, "$A")
    t = Tokenizer.from_file(path)
    t.enable_truncation(8)
    t.enable_padding(length=64)
    t.save(path)
    tok = load_tokenizer(TokenizeConfig(tokenizer=path))
    text = docs[0]["text"]
    assert len(tok.encode_ordinary([text])[0]) > 64
    assert tok.post_processor is None  # "$A" adds nothing
