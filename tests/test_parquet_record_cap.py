"""Parquet inputs get the record-size cap of the other readers: a row over ``max_record_bytes`` is
one ``read:record_too_large`` record, never a Python string, and the rows around it are kept."""
import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

CELL = 200 << 20  # one 200 MiB text cell: zstd makes the file a few KB

# One phase-1 task over the file in a fresh interpreter (the worker's part), its peak RSS measured.
_PROBE = """
import json, sys
import pyarrow.parquet as pq

def hwm():  # peak RSS since exec, KiB (ru_maxrss would carry pytest's peak over the fork)
    return next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))

from datapipe.engine.task import run_file_task
from datapipe.engine.task_plan import plan_specs
spec, = plan_specs([sys.argv[1]], sys.argv[2], [], "x", read_options={"max_record_bytes": int(sys.argv[3])})
base = hwm()
record = run_file_task(spec)
peak = hwm()
kept = pq.read_table(sys.argv[2] + "/_filtered/" + spec.task_id + ".parquet").column("text").to_pylist()
errs = pq.read_table(sys.argv[2] + "/errors/" + spec.task_id + ".parquet", columns=["error_reason"])
print(json.dumps({"kept": kept, "errors": errs.column("error_reason").to_pylist(),
                  "base_kib": base, "peak_kib": peak}))
"""


def test_oversized_cell_is_one_errored_record_with_bounded_memory(tmp_path):
    path = tmp_path / "docs.parquet"
    t = pa.table({"id": ["a", "big", "c", "d"], "text": ["first", "x" * CELL, "third", "fourth"]})
    pq.write_table(t, path, compression="zstd", row_group_size=2)  # the big row shares a row group
    del t
    assert path.stat().st_size < 1 << 20
    p = subprocess.run([sys.executable, "-c", _PROBE, str(path), str(tmp_path / "out"), str(32 << 20)],
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout)
    assert got["kept"] == ["first", "third", "fourth"]
    # the row: the cell and its 3-byte id
    assert got["errors"] == [f"read:record_too_large: row 1: {CELL + 3} bytes > max_record_bytes {32 << 20}"]
    # pyarrow decodes the page holding the cell (about 3 cells at its peak: decompressed page,
    # dictionary, dense array); the cell never becomes a document (before: a Python string, the
    # task's Arrow table and the written shard on top, ~6 cells).
    grown = (got["peak_kib"] - got["base_kib"]) * 1024
    assert grown < 4 * CELL, grown / CELL
