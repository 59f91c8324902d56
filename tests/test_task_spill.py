"""Spilled task outputs write the shards an in-memory task writes (datapipe/engine/spill.py).

A task's shards are its rows in canonical order ``(warc_offset, id)``, ties in arrival order, in
row groups cut from the row sequence alone. Whatever the buffer budget (a run file per batch, or
none), the bytes are the same; below the budget they are what ``pq.write_table`` of the sorted
rows writes (the writer before spilling existed). Run files live beside the shard under the
engine's temporary names: removed on commit and abort, and a killed task's are stale files of the
next run, never shards.
"""
from __future__ import annotations

import dataclasses
import io
import json
import random
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datapipe.engine import spill
from datapipe.engine.task import KINDS, TaskOutputs, run_file_task
from datapipe.engine.task_plan import TaskSpec, plan_specs
from datapipe.formats.documents import conform, document_schema
from datapipe.io.paths import canonical_input, input_identity

SCHEMA = document_schema([])


def _batches(seed: int = 1, n: int = 60) -> list[pa.Table]:
    """Batches with repeated ``(warc_offset, id)`` keys and null offsets: the order of equal keys
    is their arrival order, which only a stable sort keeps."""
    rng = random.Random(seed)
    out = []
    for b in range(n):
        rows = [{"id": str(rng.randint(0, 30)), "warc_offset": rng.choice([None, *range(50)]),
                 "text": "x" * rng.randint(0, 3000), "url": f"u{b}-{i}"} for i in range(rng.randint(1, 300))]
        out.append(conform(pa.Table.from_pylist(rows), SCHEMA))
    return out


def _write(batches: list[pa.Table], budget: int, tmp_path: Path) -> tuple[bytes, int]:
    rows = spill.SortedRows(fsspec.filesystem("file"), str(tmp_path / "t.parquet"), SCHEMA, budget)
    for b in batches:
        rows.add(b)
        if rows.held_bytes > budget:
            rows.spill()
    n_runs = len(rows.runs)
    buf = io.BytesIO()
    rows.write(buf)
    rows.discard()
    assert list(tmp_path.iterdir()) == []  # every run file removed
    return buf.getvalue(), n_runs


def test_spilled_rows_write_the_bytes_of_a_stable_sort(tmp_path):
    batches = _batches()
    table = pa.concat_tables(batches)
    ref = io.BytesIO()
    pq.write_table(table.sort_by(spill.KEYS).combine_chunks(), ref, compression="zstd", row_group_size=50_000)
    # the arrival order of equal keys matters here: a sort that is not stable writes other bytes
    assert table.sort_by(spill.KEYS).column("url") != table.sort_by(spill.KEYS + [("url", "descending")]).column("url")
    runs = {}
    for budget in (1, 1_000_000, 1 << 40):  # a run per batch (several merge passes), a few runs, none
        data, runs[budget] = _write(batches, budget, tmp_path)
        assert data == ref.getvalue(), budget
    assert runs[1] == len(batches) > spill.FAN_IN and 1 < runs[1_000_000] < spill.FAN_IN and runs[1 << 40] == 0


def _greedy_groups(sizes: list[int], max_rows: int, max_bytes: int) -> list[int]:
    """Row counts of groups filled row by row while rows and bytes fit (a row over the byte cap alone)."""
    groups, rows, used = [], 0, 0
    for s in sizes:
        if rows and (rows == max_rows or used + s > max_bytes):
            groups.append(rows)
            rows, used = 0, 0
        rows, used = rows + 1, used + s
    return groups + ([rows] if rows else [])


def test_row_groups_are_cut_by_rows_and_bytes_whatever_the_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(spill, "ROW_GROUP_BYTES", 40_000)
    monkeypatch.setattr(spill, "ROW_GROUP_ROWS", 70)
    batches = _batches(seed=2, n=30)
    batches.append(conform(pa.Table.from_pylist([{"id": "big", "warc_offset": 7, "text": "y" * 90_000}]), SCHEMA))
    outs = {b: _write(batches, b, tmp_path)[0] for b in (1, 50_000, 1 << 40)}
    assert len(set(outs.values())) == 1
    f = pq.ParquetFile(io.BytesIO(outs[1]))
    got = [f.metadata.row_group(i).num_rows for i in range(f.metadata.num_row_groups)]
    rows = f.read()
    sizes = [sum(len((r[c] or "").encode()) for c in SCHEMA.names if SCHEMA.field(c).type == pa.string())
             for r in rows.to_pylist()]
    assert got == _greedy_groups(sizes, 70, 40_000)
    # bytes cut groups short of 70 rows; the row over the byte cap is a group alone
    assert len(got) > len(sizes) // 70 + 1
    big = sizes.index(max(sizes))
    assert max(sizes) > 40_000 and (big, 1) in zip(np.cumsum([0] + got[:-1]).tolist(), got)
    assert rows.equals(pa.concat_tables(batches).sort_by(spill.KEYS))


# ------------------------------------------------------------------ whole tasks

WORDS = ("river stone bridge lantern window garden market harbour meadow orchard village teacher doctor "
         "baker painter writer farmer sailor morning evening summer winter yellow silver quiet gentle").split()


@pytest.fixture()
def jsonl(tmp_path: Path) -> str:
    lines = []
    for i in range(120):
        rng = random.Random(i)
        words = [rng.choice(WORDS) for _ in range(5 + 2 * i)]
        text = "\n".join(" ".join(words[j:j + 12]).capitalize() + "." for j in range(0, len(words), 12))
        if i % 7 == 0:
            text += f"\nCall +1 415 555 {1000 + i} or write to p{i}@example.com."
        lines.append(json.dumps({"id": f"d{i:03d}", "text": text, "url": f"https://s{i % 3}.example/{i}"}))
        if i % 40 == 39:
            lines.append('{"id": "cut short", "text": ')  # an errored row
    p = tmp_path / "docs.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return canonical_input(str(p))


def _chain(min_words: int) -> list[dict]:
    return [{"fineweb": {}}, {"gopher_quality": {"min_words": min_words, "min_stop_words": 0}},
            {"c4": {"filter_bad_words": False, "min_sentences": 1}}, {"pii": {}}]


def _run(inp: str, out: Path, stages: list[dict], budget: int | None) -> dict:
    spec, = plan_specs([inp], str(out), stages, "", fmt="jsonl", batch_size=16, identities={inp: input_identity(inp)})
    return run_file_task(dataclasses.replace(spec, buffer_bytes=budget))


def _shards(out: Path) -> dict[str, bytes]:
    return {f"{k}/{p.name}": p.read_bytes() for k in KINDS.values() for p in sorted((out / k).glob("*"))}


def _counts(rec: dict) -> dict:
    return {n: {k: v for k, v in st.items() if k != "seconds"} for n, st in rec["ledger"]["stages"].items()}


def test_a_task_that_spills_writes_what_one_that_does_not_writes(tmp_path, jsonl):
    spilled = _run(jsonl, tmp_path / "a", _chain(40), budget=1)   # a run file per batch and kind
    held = _run(jsonl, tmp_path / "b", _chain(40), budget=None)
    assert spilled["files"] == held["files"] == {"kept": True, "rejected": True, "errors": True}
    a, b = _shards(tmp_path / "a"), _shards(tmp_path / "b")
    assert len(a) == 3 and all(n.endswith(".parquet") for n in a)  # no run file left
    assert a == b
    assert _counts(spilled) == _counts(held)
    read = spilled["ledger"]["stages"]["read"]
    stored = sum(pq.ParquetFile(tmp_path / "a" / n).metadata.num_rows for n in a)
    assert read["in"] == 123 and stored == 123  # every line in one place


def test_a_retune_from_stored_rows_spills_and_equals_a_fresh_run(tmp_path, jsonl):
    out = tmp_path / "out"
    _run(jsonl, out, _chain(40), budget=1)
    rec = _run(jsonl, out, _chain(15), budget=1)
    assert rec["retuned_from"] == 1
    fresh = _run(jsonl, tmp_path / "fresh", _chain(15), budget=None)
    assert _shards(out) == _shards(tmp_path / "fresh")
    assert _counts(rec) == _counts(fresh)


def test_abort_removes_run_files_and_a_killed_tasks_are_stale(tmp_path):
    from datapipe.engine.plan import stale_files

    spec = TaskSpec("docs-0123abcd", "in.jsonl", str(tmp_path), [], "fp", buffer_bytes=1)
    out = TaskOutputs(spec, SCHEMA)
    for b in _batches(n=3):
        out.write("kept", b)
    runs = [Path(p) for p in out.sorted["kept"].runs]
    assert len(runs) == 3 and all(p.exists() and p.parent.name == "_filtered" for p in runs)
    assert all(p.name.startswith("docs-0123abcd.parquet.tmp-") for p in runs)
    # a task killed here leaves its runs: the next run of that output removes them, none is a shard
    stale = stale_files(str(tmp_path), None, {"docs-0123abcd"})
    assert sorted(Path(p) for p in stale) == sorted(runs)
    assert list((tmp_path / "_filtered").glob("*.parquet")) == []
    out.abort()
    assert list((tmp_path / "_filtered").iterdir()) == []


def test_row_bytes_counts_string_and_binary_values():
    t = pa.table({"a": pa.array(["héllo", None, ""]), "b": pa.array([b"12", b"3", None]),
                  "n": pa.array([1, 2, 3], pa.int64())})
    assert spill.row_bytes(t).tolist() == [8, 1, 0]
    assert spill.row_bytes(t).dtype == np.int64


def test_the_default_budget_follows_the_workers_memory_limit(monkeypatch):
    import distributed

    class Worker:
        class memory_manager:
            memory_limit = 512 * 2**20

    assert spill.default_buffer_bytes() == spill.DEFAULT_BUFFER_BYTES  # not in a worker
    monkeypatch.setattr(distributed, "get_worker", lambda: Worker)
    assert spill.default_buffer_bytes() == 64 * 2**20
    Worker.memory_manager.memory_limit = 64 * 2**30
    assert spill.default_buffer_bytes() == spill.DEFAULT_BUFFER_BYTES
    Worker.memory_manager.memory_limit = None  # memory_limit: none
    assert spill.default_buffer_bytes() == spill.DEFAULT_BUFFER_BYTES


def test_runs_on_a_remote_filesystem(tmp_path):
    """Run files go through fsspec where the output is not a local disk (here ``memory://``)."""
    batches = _batches(seed=3, n=8)
    shards = {}
    for out, budget in (("memory://spill-remote/run", 1), (str(tmp_path), None)):
        spec = TaskSpec("docs-0123abcd", "in.jsonl", out, [], "fp", buffer_bytes=budget)
        outs = TaskOutputs(spec, SCHEMA)
        for b in batches:
            outs.write("kept", b)
        assert len(outs.sorted["kept"].runs) == (8 if budget else 0)
        assert outs.commit() == {"kept": True, "rejected": False, "errors": False}
        fs = outs.fs
        shards[out] = fs.cat_file(fs_path := outs.sorted["kept"].final)
        assert fs.ls(fs_path.rsplit("/", 1)[0], detail=False) == [fs_path]  # runs removed
    assert shards["memory://spill-remote/run"] == shards[str(tmp_path)]
