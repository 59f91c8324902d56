"""A run folder loads with Hugging Face ``datasets``: one Arrow schema per shard folder, and the
dataset card ``README.md`` whose ``configs:`` name documents, rejected and tokens.

The run has every kind of shard: real Dolma CC documents plus a byte-identical copy of one file
(so dedup rejects documents too), a text-editing stage (``c4``: phase-1 rejections carry
``text_before_c4``) and phase 3 (token shards). Expected row counts come from the ledger and
from the Parquet footers, not from the loader.
"""
from __future__ import annotations

import json
import os
import shutil

import pyarrow.parquet as pq
import pytest
import yaml

from datapipe.engine import runner
from datapipe.engine.ledger import Ledger
from datapipe.manifest.load import load_manifest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder: nothing to fetch
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

CHAIN = [{"extract": {}}, {"langid": {"min_score": 0.5}}, {"gopher_quality": {}}, {"c4": {"filter_bad_words": False}},
         {"pii": {}}]


def _manifest(tmp_path, inputs, out):
    m = tmp_path / "m.yaml"
    m.write_text(json.dumps({"name": "card-test", "inputs": {"paths": [str(p) for p in inputs]}, "output": str(out),
                             "cluster": {"workers": 1, "dashboard_address": "127.0.0.1:0"}, "stages": CHAIN,
                             "dedup": {"exact": True}, "tokenize": {"tokenizer": "r50k_base"}}))
    return m


@pytest.fixture(scope="module")
def run(data_dir, tmp_path_factory, warm_client, lid_model):
    tmp = tmp_path_factory.mktemp("card")
    files = sorted((data_dir / "cc_text").glob("*.jsonl.gz"))
    copy = tmp / "copy-of-first.jsonl.gz"
    shutil.copy(files[0], copy)
    out = tmp / "run"
    m = _manifest(tmp, [*files, copy], out)
    res = runner.run(load_manifest(m), client=warm_client)
    return {"out": out, "res": res, "manifest": m, "client": warm_client, "tmp": tmp}


def _rows(files) -> int:
    return sum(pq.read_metadata(f).num_rows for f in files)


def test_every_shard_folder_has_one_schema(run):
    out = run["out"]
    rejected = sorted((out / "rejected").glob("*.parquet"))
    assert any(f.name.startswith("dedup-") for f in rejected) and any(not f.name.startswith("dedup-") for f in rejected)
    for folder in ("documents", "rejected", "errors", "_filtered", "tokens"):
        files = sorted((out / folder).glob("*.parquet"))
        assert len({pq.read_schema(f) for f in files}) <= 1, folder
    assert "text_before_c4" in pq.read_schema(rejected[0]).names
    dedup = pq.read_table(next(f for f in rejected if f.name.startswith("dedup-")))
    assert dedup.num_rows and dedup.column("text_before_c4").null_count == dedup.num_rows  # no pre-masking text


def test_rejected_loads_with_datasets(run):
    import datasets

    out = run["out"]
    files = sorted((out / "rejected").glob("*.parquet"))
    ds = datasets.load_dataset("parquet", data_files=str(out / "rejected" / "*.parquet"), split="train",
                               cache_dir=str(run["tmp"] / "hf"))
    assert ds.num_rows == _rows(files) and "text_before_c4" in ds.column_names
    assert set(ds["reject_stage"]) >= {"dedup", "gopher_quality"}


def test_the_card_names_each_folder_and_load_dataset_follows_it(run):
    import datasets

    out = run["out"]
    text = (out / "README.md").read_text()
    head = yaml.safe_load(text.split("---")[1])
    names = [c["config_name"] for c in head["configs"]]
    assert names[:2] == ["documents", "rejected"] and "tokens" in names
    assert [c["config_name"] for c in head["configs"] if c.get("default")] == ["documents"]
    led = Ledger.from_dict(json.loads((out / "ledger.json").read_text())).totals()
    cache = str(run["tmp"] / "hf")
    docs = datasets.load_dataset(str(out), split="train", cache_dir=cache)  # the default: documents
    assert docs.num_rows == led["kept"] == _rows((out / "documents").glob("*.parquet"))
    rej = datasets.load_dataset(str(out), "rejected", split="train", cache_dir=cache)
    assert rej.num_rows == _rows((out / "rejected").glob("*.parquet"))
    tok = datasets.load_dataset(str(out), "tokens", split="train", cache_dir=cache)
    assert tok.num_rows == _rows((out / "tokens").glob("shard-*.parquet")) > 0
    assert f"kept {led['kept']:,}" in text


def test_the_card_is_the_same_on_a_rerun_and_a_fresh_run(run):
    out = run["out"]
    before = (out / "README.md").read_bytes()
    runner.run(load_manifest(run["manifest"]), client=run["client"])  # nothing changed: skipped work
    assert (out / "README.md").read_bytes() == before
    assert str(run["tmp"]) not in before.decode() and "seconds" not in before.decode()  # no path, no time


def test_the_card_is_a_file_the_run_owns():
    from datapipe.engine.safe_paths import check_output_subdir

    with pytest.raises(ValueError, match="run's own folders"):
        check_output_subdir("README.md")
