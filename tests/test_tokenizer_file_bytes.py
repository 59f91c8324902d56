"""A tiktoken ranks file is read from its bytes: replacing it at the same path is seen at once
(EOS, ids, lineage), and nothing goes to tiktoken's path-keyed cache or stays in the temp folder."""
import hashlib
import json
import tempfile

import pyarrow.parquet as pq
import pytest
from distributed import Client, LocalCluster
from phase3_util import cc_docs, make_run_dir

from datapipe.env import shared_data
from datapipe.stages.phases.tokenize.mixture import MixConfig
from datapipe.stages.phases.tokenize.phase import run_mix_tokenize
from datapipe.stages.phases.tokenize.tokenizer import (
    TokenizeConfig,
    TokenizerError,
    load_tokenizer,
)


def _ranks_prefix(n: int) -> bytes:
    # The first n ranks of GPT-2's BPE are a BPE of their own (merges only use lower ranks);
    # an unknown ranks file gets <|endoftext|> = n.
    lines = (shared_data() / "tokenizers" / "r50k_base.tiktoken").read_bytes().splitlines(keepends=True)
    return b"".join(lines[:n])


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    cache, tmp = tmp_path / "tiktoken-cache", tmp_path / "tmp"
    cache.mkdir()
    tmp.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))  # where tiktoken's loader would cache
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return cache, tmp


def test_replaced_ranks_file_is_reloaded(tmp_path, isolated):
    cache, tmp = isolated
    path = tmp_path / "mytok.tiktoken"
    a, b = _ranks_prefix(40_000), _ranks_prefix(30_000)
    path.write_bytes(a)
    tok_a = load_tokenizer(TokenizeConfig(tokenizer=str(path)))
    path.write_bytes(b)
    tok_b = load_tokenizer(TokenizeConfig(tokenizer=str(path)))
    assert (tok_a.eos_id, tok_a.vocab_size, tok_a.sha256) == (40_000, 40_001, hashlib.sha256(a).hexdigest())
    assert (tok_b.eos_id, tok_b.vocab_size, tok_b.sha256) == (30_000, 30_001, hashlib.sha256(b).hexdigest())
    # r50k rank 39999 exists in A only: B must spell its bytes with lower ranks
    word = next(tok for tok, r in _parse(a).items() if r == 39_999).decode("utf-8", "replace")
    assert tok_a.encode_ordinary([word]) == [[39_999]]
    assert all(i < 30_000 for i in tok_b.encode_ordinary([word])[0])
    assert list(cache.iterdir()) == [] and list(tmp.iterdir()) == []


def _parse(data: bytes) -> dict[bytes, int]:
    import base64
    return {base64.b64decode(t): int(r) for t, r in (ln.split() for ln in data.splitlines() if ln)}


def test_malformed_ranks_line_is_refused(tmp_path):
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(_ranks_prefix(300) + b"not-base64!! 300\n")
    with pytest.raises(TokenizerError, match="line 301"):
        load_tokenizer(TokenizeConfig(tokenizer=str(path)))


def _last_ids(run):
    rows = [r for f in sorted((run / "tokens").glob("shard-*.parquet")) for r in pq.read_table(f).to_pylist()]
    return {r["input_ids"][-1] for r in rows}


def test_phase3_rerun_after_replacing_the_file(tmp_path, isolated):
    cache, tmp = isolated
    path = tmp_path / "mytok.tiktoken"
    docs = cc_docs()
    run, fresh = make_run_dir(tmp_path / "run", docs), make_run_dir(tmp_path / "fresh", docs)
    mix = MixConfig()
    tok = TokenizeConfig(tokenizer=str(path), shard_tokens=20_000)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0") as cl, \
            Client(cl) as client:
        path.write_bytes(_ranks_prefix(40_000))
        first = run_mix_tokenize(client, str(run), mix, tok)
        assert json.loads((run / "tokens" / "index.json").read_text())["tokenizer"]["eos_id"] == 40_000
        assert _last_ids(run) == {40_000}
        path.write_bytes(_ranks_prefix(30_000))
        second = run_mix_tokenize(client, str(run), mix, tok)
        run_mix_tokenize(client, str(fresh), mix, tok)
    assert not second["skipped"] and second["fingerprint"] != first["fingerprint"]
    assert first["tokens"] != second["tokens"]
    index = json.loads((run / "tokens" / "index.json").read_text())
    assert index["tokenizer"]["eos_id"] == 30_000 and _last_ids(run) == {30_000}
    for shard in sorted((fresh / "tokens").glob("shard-*.parquet")):
        assert (run / "tokens" / shard.name).read_bytes() == shard.read_bytes()
    assert list(cache.iterdir()) == []
    assert [p.name for p in tmp.iterdir() if p.name != "dask-scratch-space"] == []  # the worker's copies went
