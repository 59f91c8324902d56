"""A stage taken out of (or put back into) the chain: the rerun from stored rows equals a fresh run
of the new chain byte for byte (datapipe/engine/task_retune.py). Text edited by a removed stage
(c4's line filter, PII masking) comes back from its ``text_before_<stage>`` snapshot; the
columns a removed stage wrote (``lang`` / ``lang_score`` of langid) are null again.
Phase-1 tasks run in-process on a small JSONL file."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datapipe.engine.task import KINDS, run_file_task
from datapipe.engine.task_plan import plan_specs, stage_assets
from datapipe.io.paths import canonical_input, input_identity

WORDS = ("the river runs under an old stone bridge near the market where people sell bread and fish "
         "every morning before the long summer rain comes over the quiet hills of the valley").split()


def _docs(n: int = 40) -> list[dict]:
    docs = []
    for i in range(n):
        rng = random.Random(i)
        lines = [" ".join(rng.choice(WORDS) for _ in range(10 + i % 7)).capitalize() + "." for _ in range(4)]
        if i % 3 == 0:
            lines.insert(2, "Share this page")               # no end mark: c4 drops the line
        if i % 4 == 0:
            lines.append(f"Call 415-555-01{i:02d} or write to someone{i}@example.com today.")  # pii masks
        if i % 9 == 0:
            lines = lines[:1] + ["Click here"]                 # c4 rejects (too few sentences)
        docs.append({"id": f"d{i:03d}", "text": "\n".join(lines), "url": f"https://site{i % 3}.example/p{i}"})
    return docs


FULL = [{"gopher_quality": {"min_words": 5, "min_stop_words": 0}},
        {"langid": {"min_score": 0.0}},
        {"c4": {"filter_bad_words": False, "min_sentences": 2}},
        {"pii": {}},
        {"fineweb": {}}]


def _without(name: str) -> list[dict]:
    return [s for s in FULL if name not in s]


def _run(inp: str, out: Path, stages: list[dict]) -> dict:
    (spec,) = plan_specs([inp], str(out), stages, "", fmt="jsonl", batch_size=8,
                         identities={inp: input_identity(inp)}, assets=stage_assets(stages))
    return run_file_task(spec)


def _shards(out: Path) -> dict[str, bytes]:
    return {f"{k}/{p.name}": p.read_bytes() for k in KINDS.values() for p in sorted((out / k).glob("*.parquet"))}


def _rows(out: Path) -> list[dict]:
    return [r for k in KINDS.values() for p in sorted((out / k).glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


@pytest.fixture(scope="module")
def jsonl(tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("in") / "docs.jsonl"
    p.write_text("".join(json.dumps(d) + "\n" for d in _docs()))
    return canonical_input(str(p))


@pytest.fixture(scope="module")
def fresh_runs(jsonl, tmp_path_factory) -> dict[str, Path]:
    """Fresh runs of the full chain and of each chain with one stage removed."""
    out = {}
    for name in ("full", "c4", "pii", "langid"):
        d = tmp_path_factory.mktemp(f"fresh-{name}") / "run"
        _run(jsonl, d, FULL if name == "full" else _without(name))
        out[name] = d
    return out


def test_the_sample_exercises_every_edit(fresh_runs):
    rows = _rows(fresh_runs["full"])
    assert any(r.get("text_before_c4") for r in rows) and any(r.get("text_before_pii") for r in rows)
    assert any(r["reject_stage"] == "c4" for r in rows)
    assert all(r["lang"] for r in rows)
    assert not any(r["lang"] for r in _rows(fresh_runs["langid"]))


@pytest.mark.parametrize("removed", ["c4", "pii", "langid"])
def test_removing_a_stage_equals_a_fresh_run_and_putting_it_back_too(jsonl, fresh_runs, tmp_path, removed):
    out = tmp_path / "run"
    _run(jsonl, out, FULL)
    rec = _run(jsonl, out, _without(removed))
    assert rec["retuned_from"] is not None  # rerun from stored rows, not read again
    assert _shards(out) == _shards(fresh_runs[removed])
    rec = _run(jsonl, out, FULL)
    assert rec["retuned_from"] is not None
    assert _shards(out) == _shards(fresh_runs["full"])


def test_removed_editor_text_is_the_text_as_it_entered_it(jsonl, fresh_runs, tmp_path):
    """The figures behind the byte comparison: after taking c4 out, the documents c4 rejected are
    back, and the lines it dropped are back in the kept text."""
    out = tmp_path / "run"
    _run(jsonl, out, FULL)
    _run(jsonl, out, _without("c4"))
    kept = pa.concat_tables([pq.read_table(p) for p in (out / "_filtered").glob("*.parquet")])
    texts = kept.column("text").to_pylist()
    assert sum("Share this page" in t for t in texts) == sum("Share this page" in d["text"] for d in _docs()
                                                             if d["id"] in set(kept.column("warc_record_id").to_pylist()))
    assert any("Share this page" in t for t in texts)
