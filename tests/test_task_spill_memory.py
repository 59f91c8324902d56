"""A task's memory is bounded by its buffer budget, not by its input (datapipe/engine/spill.py).

A small ``.jsonl.zst`` of tens of thousands of under-cap lines unpacks to hundreds of MB; a task
that held every row until its end grew by about twice that (the rows, then their sorted copy).
Each case runs one phase-1 task in a fresh interpreter and reads its peak resident memory
(``VmHWM`` in ``/proc/self/status``) against its resident memory before the task.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import zstandard

from datapipe.engine import spill
from datapipe.engine.task import KINDS

MiB = 2**20
LINES = 8_000
TEXT_BYTES = 32_000          # per line: 8,000 lines = 256 MB of text unpacked
BAD_EVERY = 500              # a line that is not JSON: an errored row stored in errors/
BUDGET = 16 * MiB            # 16 runs of the kept rows: more than one merge takes (FAN_IN)

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/self/status")

CHILD = r"""
import dataclasses, json, sys
import pyarrow as pa
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
from datapipe.engine.task import run_file_task
from datapipe.engine.task_plan import plan_specs
from datapipe.io.paths import canonical_input, input_identity
from datapipe.io.readers import read_input
mode, inp, out, budget = sys.argv[1], canonical_input(sys.argv[2]), sys.argv[3], int(sys.argv[4])
spec = plan_specs([inp], out, [], "", fmt="jsonl", identities={inp: input_identity(inp)})[0]
spec = dataclasses.replace(spec, buffer_bytes=budget)
before = status("VmRSS")
if mode == "read":
    n = sum(1 for _ in read_input(spec.input, "jsonl", None, spec.fields))
    rec = {"read": n}
else:
    rec = run_file_task(spec)
print(json.dumps({"before": before, "peak": status("VmHWM"), "arrow_peak": pa.default_memory_pool().max_memory(),
                  "record": rec}))
"""


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    """``LINES`` JSONL lines of ``TEXT_BYTES`` of text each (and some broken lines), zstd."""
    p = tmp_path_factory.mktemp("spill") / "bomb.jsonl.zst"
    body = ("the quick brown fox jumps over the lazy dog " * (TEXT_BYTES // 44 + 1))[:TEXT_BYTES]
    with open(p, "wb") as fh, zstandard.ZstdCompressor(level=3).stream_writer(fh) as w:
        for i in range(LINES):
            if i % BAD_EVERY == BAD_EVERY - 1:
                w.write(b'{"id": "broken", "text": \n')
            else:
                w.write(json.dumps({"id": f"doc-{i:06d}", "text": f"{i} {body}"}).encode() + b"\n")
    assert p.stat().st_size < 2 * MiB  # hundreds of MB unpacked from a small file
    return p


def _child(mode: str, inp: Path, out: Path, budget: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    p = subprocess.run([sys.executable, "-c", CHILD, mode, str(inp), str(out), str(budget)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _arrow_bound(budget: int) -> int:
    """Arrow buffers a spilling task may hold at once (spill module doc): the rows held and their
    sorted copy while spilling (2 x budget); while merging, a batch per run, the rows held and one
    merged step (2 x budget), one row group and the Parquet writer's buffers for it (4 x
    ROW_GROUP_BYTES); 16 MiB for a batch of documents in flight."""
    return 2 * budget + 4 * spill.ROW_GROUP_BYTES + 16 * MiB


def _rss_bound(budget: int) -> int:
    """Growth of resident memory allowed: the allocators (mimalloc's pool, Python's malloc) keep
    freed pages for a while; measured here at up to twice Arrow's own peak, plus the interpreter's
    own 64 MiB."""
    return 2 * _arrow_bound(budget) + 64 * MiB


def _shards(out: Path) -> dict[str, bytes]:
    return {f"{k}/{p.name}": p.read_bytes() for k in KINDS.values() for p in sorted((out / k).glob("*"))}


def test_task_memory_is_bounded_by_its_budget_and_its_shards_do_not_change(bomb, tmp_path):
    unpacked = LINES * TEXT_BYTES
    small = _child("task", bomb, tmp_path / "spilled", BUDGET)
    huge = _child("task", bomb, tmp_path / "held", 1 << 40)
    grew_small, grew_huge = small["peak"] - small["before"], huge["peak"] - huge["before"]
    print(f"peak growth: budget {BUDGET // MiB} MiB -> {grew_small / MiB:.0f} MiB RSS, "
          f"{small['arrow_peak'] / MiB:.0f} MiB Arrow; no spill -> {grew_huge / MiB:.0f} MiB RSS, "
          f"{huge['arrow_peak'] / MiB:.0f} MiB Arrow (bounds {_rss_bound(BUDGET) / MiB:.0f}, "
          f"{_arrow_bound(BUDGET) / MiB:.0f} MiB)")
    assert small["arrow_peak"] < _arrow_bound(BUDGET)
    assert grew_small < _rss_bound(BUDGET)
    # holding every row until the end (the task before spilling): over both bounds
    assert huge["arrow_peak"] > 2 * unpacked > _arrow_bound(BUDGET)
    assert grew_huge > _rss_bound(BUDGET)
    # the same shards, byte for byte, whether the task spilled or not; no run file left
    a, b = _shards(tmp_path / "spilled"), _shards(tmp_path / "held")
    assert sorted(a) == sorted(b) and all(n.endswith(".parquet") for n in a)
    assert a == b
    # every line in one place: kept or errored, as the ledger says
    n_bad = LINES // BAD_EVERY
    for rec in (small["record"], huge["record"]):
        read = rec["ledger"]["stages"]["read"]
        assert (read["in"], read["kept"]) == (LINES, LINES - n_bad)
        assert read["errored"] == {"read:invalid_json": n_bad}
    shard = Path(next(iter(a))).name
    kept = pq.ParquetFile(tmp_path / "spilled" / "_filtered" / shard)
    errs = pq.read_table(tmp_path / "spilled" / "errors" / shard)
    assert kept.metadata.num_rows == LINES - n_bad and errs.num_rows == n_bad
    # row groups cut by value bytes: 384 MB of text is several groups, each within the cap
    groups = [kept.metadata.row_group(i).num_rows for i in range(kept.metadata.num_row_groups)]
    assert len(groups) >= unpacked // spill.ROW_GROUP_BYTES
    assert max(groups) * TEXT_BYTES <= spill.ROW_GROUP_BYTES
    ids = kept.read(columns=["id", "warc_offset"])
    offs = ids.column("warc_offset").to_pylist()
    assert offs == sorted(offs)


def test_jsonl_zstd_reader_streams(bomb, tmp_path):
    """Reading alone (every line parsed, nothing kept) grows by a few MiB, not by the file's size."""
    r = _child("read", bomb, tmp_path / "unused", BUDGET)
    assert r["record"]["read"] == LINES
    assert r["peak"] - r["before"] < 48 * MiB
