"""A finished proxy run is reused only for the same run tokens: the reuse key holds the token
index's identity (tokenizer, config fingerprint, shard hashes; datapipe/ablate/manifest.py)."""
from __future__ import annotations

import copy

import yaml

from datapipe.ablate.manifest import load_ablation_manifest

INDEX = {"format": "datapipe.tokens/1", "dtype": "uint16", "config_fingerprint": "c" * 64,
         "tokenizer": {"name": "r50k_base", "sha256": "a" * 64, "vocab_size": 50257, "eos_id": 50256},
         "shards": [{"path": "shard-00000.parquet", "sha256": "1" * 64},
                    {"path": "shard-00001.parquet", "sha256": "2" * 64}]}


def _manifest(tmp_path):
    p = tmp_path / "abl.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "run": str(tmp_path / "run"), "seeds": [0],
                                 "mixtures": {"explicit": [{"en": 1.0}]}, "budget_tokens": 40_000}))
    return load_ablation_manifest(p)


def test_reuse_key_changes_with_the_runs_tokens(tmp_path):
    m = _manifest(tmp_path)
    key = m.train_fingerprint(INDEX)
    assert m.train_fingerprint(copy.deepcopy(INDEX)) == key
    retokenized = copy.deepcopy(INDEX)
    retokenized["tokenizer"] |= {"name": "gpt2_bpe", "sha256": "b" * 64, "eos_id": 40000}
    other_docs = copy.deepcopy(INDEX)
    other_docs["shards"][1]["sha256"] = "3" * 64
    other_mix = copy.deepcopy(INDEX) | {"config_fingerprint": "d" * 64}
    keys = {key, m.train_fingerprint(retokenized), m.train_fingerprint(other_docs), m.train_fingerprint(other_mix)}
    assert len(keys) == 4


