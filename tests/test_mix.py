"""Domain rules, the mixture planner (hand-worked numbers), sampling, and phase 3 end to end on Dask."""
from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tiktoken
from distributed import Client, LocalCluster
from phase3_util import cc_docs, make_run_dir
from tiktoken.load import load_tiktoken_bpe

from datapipe.env import shared_data
from datapipe.stages.phases.tokenize.mixture import (
    DomainAssigner,
    MixConfig,
    copies,
    plan_mixture,
)
from datapipe.stages.phases.tokenize.phase import run_mix_tokenize
from datapipe.stages.phases.tokenize.tokenizer import TokenizeConfig

AVAIL = {"web": 1000, "wiki": 100, "code": 50}
W = {"web": 0.6, "wiki": 0.3, "code": 0.1}


def _doms(plan):
    return {d: (round(p["planned_tokens"], 6), round(p["rate"], 6)) for d, p in plan["domains"].items()}


def test_planner_budget_with_cap_redistributes():
    # wiki wants 0.3*1000 = 300 > 100*2 (cap) -> 200; the other 800 split 6:1 -> web 685.714286, code 114.285714.
    plan = plan_mixture(AVAIL, MixConfig(weights=W, total_tokens=1000, max_epochs={"*": 4, "wiki": 2}))
    assert _doms(plan) == {"web": (685.714286, 0.685714), "wiki": (200.0, 2.0), "code": (114.285714, 2.285714)}
    assert plan["domains"]["wiki"]["reason"] == "capped at max_epochs=2 (target needs 3 epochs)"
    assert "raised above target" in plan["domains"]["web"]["reason"]
    assert plan["total_planned"] == pytest.approx(1000)


def test_planner_budget_without_fill_stays_short():
    plan = plan_mixture(AVAIL, MixConfig(weights=W, total_tokens=1000, max_epochs={"*": 4, "wiki": 2},
                                         fill_budget=False))
    assert _doms(plan) == {"web": (600.0, 0.6), "wiki": (200.0, 2.0), "code": (100.0, 2.0)}
    assert plan["total_planned"] == pytest.approx(900)
    assert plan["domains"]["web"]["reason"] is None


def test_planner_all_available_and_unweighted_domain():
    # T = min(1000/.6, 100/.3, 50/.1) = 333.33: wiki is taken whole, nothing repeats.
    plan = plan_mixture(AVAIL | {"spam": 7}, MixConfig(weights=W))
    assert _doms(plan) == {"web": (200.0, 0.2), "wiki": (100.0, 1.0), "code": (33.333333, 0.666667),
                           "spam": (0.0, 0.0)}
    assert plan["domains"]["spam"]["reason"] == "no target weight: not sampled"


def test_planner_every_domain_capped_and_empty_domain():
    plan = plan_mixture({"a": 10, "b": 10}, MixConfig(weights={"a": 1, "b": 1, "c": 2}, total_tokens=100,
                                                      max_epochs=2))
    assert _doms(plan) == {"a": (20.0, 2.0), "b": (20.0, 2.0), "c": (0.0, 0.0)}
    assert plan["domains"]["c"]["reason"] == "no documents in this domain"
    assert plan["reason"].startswith("budget not reachable")


def test_planner_natural_mixture():
    plan = plan_mixture(AVAIL, MixConfig())
    assert {d: p["rate"] for d, p in plan["domains"].items()} == {"web": 1.0, "wiki": 1.0, "code": 1.0}
    assert plan["domains"]["wiki"]["planned_share"] == pytest.approx(100 / 1150)


def test_domain_rules_first_match_wins():
    cfg = MixConfig(default_domain="web", rules=[
        {"domain": "encyclopedic", "host": "*.wikipedia.org"},
        {"domain": "government", "host": ["*.gov", "*.gov.uk"]},
        {"domain": "code", "host": "github.com", "url_path": "/*/*"},
        {"domain": "books", "source": "gutenberg-*"},
        {"domain": "german", "lang": ["de"]},
        {"domain": "science", "column": "topic", "equals": "science"},
    ])
    rows = [
        ("https://en.wikipedia.org/wiki/X", "en.wikipedia.org", "cc.warc", "de", None, "encyclopedic"),
        ("https://wikipedia.org/", None, "cc.warc", "en", None, "encyclopedic"),
        ("https://www.nasa.gov/a", "www.nasa.gov", "cc.warc", "en", None, "government"),
        ("https://notgov.com/a", "notgov.com", "cc.warc", "en", None, "web"),
        ("https://github.com/a/b", "github.com", "cc.warc", "en", None, "code"),
        ("https://github.com/about", "github.com", "cc.warc", "en", None, "web"),
        ("https://x.org/", "x.org", "gutenberg-1.jsonl", "en", None, "books"),
        ("https://y.de/", "y.de", "cc.warc", "de", None, "german"),
        ("https://z.com/", "z.com", "cc.warc", "en", "science", "science"),
    ]
    t = pa.table({k: [r[i] for r in rows] for i, k in enumerate(["url", "host", "source", "lang", "topic"])})
    assert DomainAssigner(cfg)(t) == [r[5] for r in rows]
    with pytest.raises(ValueError):
        MixConfig(rules=[{"domain": "x"}])  # a rule without a condition
    with pytest.raises(ValueError):
        MixConfig(weight={"web": 1})  # typo: extra keys are forbidden


def test_copies_deterministic_and_rate_exact_in_expectation():
    ids = [f"doc-{i}" for i in range(20000)]
    c = copies(ids, 2.5, seed=7)
    assert set(np.unique(c)) == {2, 3}
    assert abs(c.mean() - 2.5) < 0.02  # binomial sd 0.0035
    shuffled = ids[:]
    random.Random(1).shuffle(shuffled)
    by_id = dict(zip(ids, c))
    assert [by_id[i] for i in shuffled] == copies(shuffled, 2.5, seed=7).tolist()
    assert not np.array_equal(c, copies(ids, 2.5, seed=8))
    assert copies(ids[:100], 1.0, 3).tolist() == [1] * 100 and copies(ids[:100], 0.0, 3).tolist() == [0] * 100


def _reference_encoder():
    # Built here from the ranks file with tiktoken's GPT-2 pattern, independently of the pipeline code.
    from tiktoken_ext.openai_public import r50k_pat_str
    ranks = load_tiktoken_bpe(str(shared_data() / "tokenizers" / "r50k_base.tiktoken"))
    return tiktoken.Encoding("ref", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})


def _run(tmp, n_workers, mix, tok):
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        return run_mix_tokenize(client, str(tmp), mix, tok)


def test_phase3_end_to_end_identical_across_worker_counts(tmp_path):
    docs = cc_docs()
    mix = MixConfig(rules=[{"domain": "org", "host": "*.org"}], weights={"web": 0.5, "org": 0.5},
                    total_tokens=60000, max_epochs=3, seed=11)
    tok = TokenizeConfig(shard_tokens=8000, row_group_tokens=3000)
    runs = []
    for n in (1, 2):
        run = make_run_dir(tmp_path / f"w{n}", docs)
        res = _run(run, n, mix, tok)
        runs.append((run, res))
    (a, ra), (b, rb) = runs
    files = sorted(p.name for p in (a / "tokens").iterdir())
    assert files == sorted(p.name for p in (b / "tokens").iterdir()) and len(files) > 3
    for f in files:
        assert (a / "tokens" / f).read_bytes() == (b / "tokens" / f).read_bytes(), f
    assert not (a / "_tokenize").exists() and (a / "_tokenize.json").exists()

    # Independent expectation: domain by host suffix, ids by a reference encoder + EOS, copies by id hash.
    enc = _reference_encoder()
    by_id = {d["id"]: d for d in docs}
    dom = {i: ("org" if d["host"].endswith(".org") else "web") for i, d in by_id.items()}
    ntok = {i: len(enc.encode_ordinary(d["text"])) + 1 for i, d in by_id.items()}
    rates = {d: p["rate"] for d, p in ra["plan"]["domains"].items()}
    ids = sorted(by_id)
    n_copies = dict(zip(ids, copies(ids, np.array([rates[dom[i]] for i in ids]), seed=11)))
    expect = {}
    for i in ids:
        expect[dom[i]] = expect.get(dom[i], 0) + n_copies[i] * ntok[i]
    assert ra["tokens_per_domain"] == expect
    assert ra["documents_in"] == 30 and ra["rows"] == sum(n_copies.values())

    index = json.loads((a / "tokens" / "index.json").read_text())
    assert index["dtype"] == "uint16" and index["tokenizer"]["eos_id"] == 50256 and index["seed"] == 11
    assert sum(s["tokens"] for s in index["shards"]) == index["total_tokens"] == sum(expect.values())
    seen = {}
    for s in index["shards"]:
        t = pq.read_table(a / "tokens" / s["path"])
        assert t.schema.field("input_ids").type == pa.list_(pa.uint16())
        assert sum(s["row_group_tokens"]) == s["tokens"]
        for row in t.to_pylist():
            ref = enc.encode_ordinary(by_id[row["doc_id"]]["text"]) + [50256]
            assert row["input_ids"] == ref and row["num_tokens"] == len(ref)
            seen[row["doc_id"]] = seen.get(row["doc_id"], 0) + 1
    assert seen == {i: c for i, c in n_copies.items() if c}

    # Resume: same config is skipped; a new seed recomputes and changes the shards.
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0") as cl, \
            Client(cl) as client:
        assert run_mix_tokenize(client, str(a), mix, tok)["skipped"] is True
        again = run_mix_tokenize(client, str(a), mix.model_copy(update={"seed": 12}), tok)
        assert again["skipped"] is False
        assert (a / "tokens" / files[0]).read_bytes() != (b / "tokens" / files[0]).read_bytes()
        # cl100k ids reach 100,276: shards must be uint32.
        wide = run_mix_tokenize(client, str(a), mix, tok.model_copy(update={"tokenizer": "cl100k_base"}))
        assert wide["dtype"] == "uint32"
        shard0 = json.loads((a / "tokens" / "index.json").read_text())["shards"][0]["path"]
        assert pq.read_schema(a / "tokens" / shard0).field("input_ids").type == pa.list_(pa.uint32())


def test_killed_shard_writer_leaves_no_temp_file_in_the_token_folder(tmp_path, monkeypatch):
    """A worker killed inside ``_write_shard`` leaves ``shard-*.parquet.tmp-*``; the retried task
    writes under a new name. The finished phase must hold only its shards and index (same bytes as an
    undisturbed run). In-process workers, so the patched writer is the one the tasks run."""
    from datapipe.stages.phases.tokenize import phase as ph

    docs = cc_docs()
    mix, tok = MixConfig(total_tokens=20000, seed=3), TokenizeConfig(shard_tokens=8000)
    clean = make_run_dir(tmp_path / "clean", docs)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0") as c, \
            Client(c) as client:
        run_mix_tokenize(client, str(clean), mix, tok)
        real = ph._write_shard

        def killed_first(i, lo, hi, dst, *a, **k):   # what a killed first attempt leaves behind
            with open(f"{dst}.tmp-999-deadbeef", "wb") as fh:
                fh.write(b"PAR1 half a shard")
            return real(i, lo, hi, dst, *a, **k)

        monkeypatch.setattr(ph, "_write_shard", killed_first)
        hit = make_run_dir(tmp_path / "hit", docs)
        run_mix_tokenize(client, str(hit), mix, tok)
    names = sorted(p.name for p in (hit / "tokens").iterdir())
    assert names == sorted(p.name for p in (clean / "tokens").iterdir()) and not any(".tmp-" in n for n in names)
    assert len([n for n in names if n.startswith("shard-")]) >= 2
    for n in names:
        if n.startswith("shard-"):
            assert (hit / "tokens" / n).read_bytes() == (clean / "tokens" / n).read_bytes()
