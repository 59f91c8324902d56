"""The survivor rule (issue 17): which copy of a duplicate group is kept, configurable,
deterministic, default the most canonical URL. Runs the phase's own code in this process."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dedup_fixtures import write_shards
from pydantic import ValidationError

from datapipe.api.dedup import SyncClient
from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.phases.dedup.phase import run_dedup
from datapipe.stages.phases.dedup.survivor import key_columns, sort_spec

TEXT = " ".join(f"word{i} filler{i % 7}" for i in range(60))


def _kept(tmp_path, rows, shards=2, **cfg) -> dict[str, str | None]:
    """id -> None if kept, else the id it duplicates."""
    write_shards(str(tmp_path), {f"s{k}": rows[k::shards] for k in range(shards)})
    run_dedup(SyncClient(), str(tmp_path), DedupConfig(**cfg))
    out = {}
    for sub in ("documents", "rejected"):
        for f in (tmp_path / sub).glob("*.parquet"):
            for r in pq.read_table(f, columns=["id", "duplicate_of"]).to_pylist():
                out[r["id"]] = r["duplicate_of"]
    return out


ROWS = [  # one exact group; the canonical URL is neither the earliest nor the smallest id
    {"id": "a", "text": TEXT, "url": "https://news.example/story?mirror=3", "warc_date": "2026-01-01T00:00:00Z"},
    {"id": "b", "text": TEXT, "url": "https://news.example/story/index.html", "warc_date": "2026-01-02T00:00:00Z"},
    {"id": "c", "text": TEXT, "url": "https://news.example/story", "warc_date": "2026-03-01T00:00:00Z"},
    {"id": "d", "text": TEXT, "url": None, "warc_date": "2025-12-01T00:00:00Z"},
]


def test_default_keeps_canonical_url(tmp_path):
    got = _kept(tmp_path, ROWS)
    assert got == {"a": "c", "b": "c", "c": None, "d": "c"}


def test_configured_criteria(tmp_path):
    assert _kept(tmp_path / "e", ROWS, survivor=["earliest_date"])["d"] is None
    assert _kept(tmp_path / "l", ROWS, survivor=["latest_date"])["c"] is None
    # without a URL criterion nor dates: smallest id
    assert _kept(tmp_path / "i", [dict(r, warc_date=None) for r in ROWS], survivor=["earliest_date"])["a"] is None
    # shortest URL first: the query copy is shorter than index.html, the null URL is last
    assert _kept(tmp_path / "s", ROWS, survivor=["shortest_url"])["c"] is None


def test_longest_text_among_near_duplicates(tmp_path):
    longer = TEXT + " one more closing sentence"
    rows = [{"id": "x", "text": TEXT, "url": "https://a.example/x", "warc_date": None},
            {"id": "y", "text": longer, "url": "https://a.example/y?utm_source=feed", "warc_date": None}]
    assert _kept(tmp_path / "t", rows, survivor=["longest_text"]) == {"x": "y", "y": None}
    assert _kept(tmp_path / "u", rows) == {"x": None, "y": "x"}    # default: canonical URL


def test_rule_is_deterministic_over_shard_layouts(tmp_path):
    want = _kept(tmp_path / "one", ROWS, shards=1)
    assert _kept(tmp_path / "four", list(reversed(ROWS)), shards=4) == want


def test_keys_by_hand():
    t = pa.table({"id": ["p", "q", "r"], "url": ["https://x/a?b=1", None, "https://x/abc"],
                  "warc_date": ["2026-02", None, "2026-01"], "text": ["aa", "a", "aaa"]})
    k = key_columns(t, pa.array([0, 1, 2]).to_numpy(),
                    ["canonical_url", "shortest_url", "latest_date", "longest_text"])
    assert k["k0"].to_pylist() == [1, 2, 0]
    assert k["k1"].to_pylist() == [len("https://x/a?b=1"), 2 ** 31 - 1, len("https://x/abc")]
    assert k["k3"].to_pylist() == [-2, -1, -3]
    assert sort_spec(["latest_date"]) == [("prio", "ascending"), ("k0", "descending"), ("id", "ascending")]


def test_bad_survivor_config():
    with pytest.raises(ValidationError):
        DedupConfig(survivor=["canonical_url", "canonical_url"])
    with pytest.raises(ValidationError):
        DedupConfig(survivor=["newest"])
