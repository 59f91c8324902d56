"""Row-level reuse of stored stage outputs in a retune (datapipe/engine/task_reuse.py).

A phase-1 task is run in-process (no cluster) on a small JSONL file, then rerun into the same
output with one threshold changed. The retuned shards must equal, byte for byte, those of a fresh
run of the changed chain, and the stages after the change must have computed only the rows whose
path changed (counted by wrapping the compute step).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from datapipe.engine import task_reuse
from datapipe.engine.task import KINDS, run_file_task
from datapipe.engine.task_plan import plan_specs
from datapipe.io.paths import canonical_input, input_identity

WORDS = ("river stone bridge lantern window garden market harbour meadow orchard village teacher doctor "
         "baker painter writer farmer sailor morning evening summer winter yellow silver quiet gentle "
         "ancient modern travel wander gather follow").split()


def _docs(n: int = 48) -> list[dict]:
    docs = []
    for i in range(n):
        rng = random.Random(i)
        k = 8 + 3 * i  # 8 .. 149 words: on both sides of every min_words used below
        words = [rng.choice(WORDS) for _ in range(k)]
        lines = [" ".join(words[j:j + 12]).capitalize() + "." for j in range(0, k, 12)]
        if i % 5 == 0:
            lines.append(f"Write to person{i}@example.com for details.")
        docs.append({"id": f"d{i:03d}", "text": "\n".join(lines), "url": f"https://site{i % 4}.example/p{i}"})
    return docs


def _chain(min_words: int, mean_len: float = 3.0) -> list[dict]:
    return [{"fineweb": {}},
            {"gopher_quality": {"min_words": min_words, "min_mean_word_length": mean_len, "min_stop_words": 0}},
            {"c4": {"filter_bad_words": False, "min_sentences": 1}},
            {"pii": {}}]


def _run(inp: str, out: Path, stages: list[dict]) -> dict:
    specs = plan_specs([inp], str(out), stages, "", fmt="jsonl", batch_size=16,
                       identities={inp: input_identity(inp)})
    assert len(specs) == 1
    return run_file_task(specs[0])


def _counts(ledger: dict) -> dict:
    return {name: {k: v for k, v in st.items() if k != "seconds"} for name, st in ledger["stages"].items()}


def _shards(out: Path) -> dict[str, bytes]:
    return {f"{kind}/{p.name}": p.read_bytes() for kind in KINDS.values() for p in sorted((out / kind).glob("*.parquet"))}


@pytest.fixture()
def jsonl(tmp_path: Path) -> str:
    p = tmp_path / "docs.jsonl"
    p.write_text("".join(json.dumps(d) + "\n" for d in _docs()))
    return canonical_input(str(p))


@pytest.fixture()
def computed(monkeypatch) -> list[tuple[str, int]]:
    calls: list[tuple[str, int]] = []
    real = task_reuse._compute

    def counting(st, table):
        calls.append((st.name, table.num_rows))
        return real(st, table)

    monkeypatch.setattr(task_reuse, "_compute", counting)
    return calls


@pytest.mark.parametrize("old_min,new_min", [(60, 20), (20, 60)])
def test_threshold_change_equals_fresh_run_and_computes_only_changed_rows(tmp_path, jsonl, computed, old_min, new_min):
    out = tmp_path / "out"
    _run(jsonl, out, _chain(old_min))
    computed.clear()
    rec = _run(jsonl, out, _chain(new_min))
    assert rec["retuned_from"] == 1
    _run(jsonl, tmp_path / "fresh", _chain(new_min))
    assert _shards(out) == _shards(tmp_path / "fresh")
    fresh_rec = json.loads((tmp_path / "fresh" / "_tasks" / f"{rec['task_id']}.json").read_text())
    assert _counts(rec["ledger"]) == _counts(fresh_rec["ledger"])

    # Word counts are 8 + 3i (all above the mean-length rule): the documents between the two
    # thresholds change path, 14 of them (8+3i in [20, 60) <=> i in 4..17).
    changed = sum(1 for i in range(48) if min(old_min, new_min) <= 8 + 3 * i < max(old_min, new_min))
    assert changed == 14
    after = [n for name, n in computed if name in ("c4", "pii")]
    if new_min < old_min:  # 14 documents newly pass gopher_quality: c4 and pii run on them alone
        assert sum(n for name, n in computed if name == "c4") == changed
        assert sum(n for name, n in computed if name == "pii") <= changed
    else:  # they are now rejected: nothing after gopher_quality is computed
        assert after == []
    # gopher_quality itself (changed) ran on every row that reached it.
    assert sum(n for name, n in computed if name == "gopher_quality") == 48 - _fineweb_rejections(out)


def _fineweb_rejections(out: Path) -> int:
    import pyarrow.parquet as pq

    rej = [pq.read_table(p) for p in (out / "rejected").glob("*.parquet")]
    return sum(t.filter(t.column("reject_stage").to_numpy(zero_copy_only=False) == "fineweb").num_rows for t in rej)


def test_two_changes_in_a_row_and_back_equal_fresh_runs(tmp_path, jsonl):
    out = tmp_path / "out"
    for min_words, mean_len in ((20, 3.0), (60, 4.5), (30, 3.0), (20, 3.0)):
        _run(jsonl, out, _chain(min_words, mean_len))
        fresh = tmp_path / f"fresh-{min_words}-{mean_len}"
        _run(jsonl, fresh, _chain(min_words, mean_len))
        assert _shards(out) == _shards(fresh), (min_words, mean_len)


def test_stage_exception_on_a_subset_errors_the_whole_batch_as_a_fresh_run(tmp_path, jsonl, monkeypatch):
    import pyarrow.parquet as pq

    from datapipe.stage import registry

    out = tmp_path / "out"
    _run(jsonl, tmp_path / "probe", _chain(20))
    kept = pq.read_table(next((tmp_path / "probe" / "_filtered").glob("*.parquet"))).column("url").to_pylist()
    victim = next(u for u in kept if 4 <= int(u.rsplit("/p", 1)[1]) <= 17)  # newly passes when 60 -> 20
    _run(jsonl, out, _chain(60))
    pii = registry()["pii"]
    real_call = pii.__call__

    def failing(self, batch):  # fails on any batch holding the victim
        if victim in batch.column("url").to_pylist():
            raise ValueError("boom")
        return real_call(self, batch)

    monkeypatch.setattr(pii, "__call__", failing)
    _run(jsonl, out, _chain(20))
    _run(jsonl, tmp_path / "fresh", _chain(20))
    got, want = _shards(out), _shards(tmp_path / "fresh")
    assert any("errors/" in k for k in want)
    assert got == want
