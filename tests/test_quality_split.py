"""The quality model is split before training: test-half pages (the safety / PII test half) and 20% of
articles are never trained on (issue 15: its figures were in-sample before)."""
from __future__ import annotations

import json
from pathlib import Path

from datapipe.classifiers import data, recipes
from datapipe.classifiers.train import is_heldout

SIDECAR = Path(__file__).resolve().parent.parent / "classifiers" / "models" / "quality_wiki_cc.json"


def test_pages_follow_the_shared_page_split_articles_the_hash():
    urls = [f"https://example.org/page/{i}" for i in range(200)]
    assert [recipes.quality_heldout(u) for u in urls] == [data.page_split(u) == "test" for u in urls]
    assert 60 <= sum(recipes.quality_heldout(u) for u in urls) <= 140          # about half
    arts = [f"wikitext-2_valid.txt.gz:{i}" for i in range(500)]
    assert [recipes.quality_heldout(a) for a in arts] == [is_heldout(a, 20, 1) for a in arts]


def test_shipped_sidecar_records_the_split_and_test_figures():
    meta = json.loads(SIDECAR.read_text())
    assert meta["split_rule"] == recipes.QUALITY_SPLIT_RULE
    assert meta["fasttext"] == "fasttext-community==0.11.9"
    assert (meta["n_heldout"], meta["n_heldout_pos"]) == (1158, 527)
    assert meta["metrics"]["precision"] >= 0.94 and meta["metrics"]["recall"] >= 0.99
