"""The progress display of ``datapipe run`` in 80- and 100-column terminals, and its ETA.

Lines are checked as a terminal shows them: rendered by rich at a fixed width (and, once, by a
child process in a real pseudo-terminal of that size), ANSI sequences removed. A line that does
not fit would wrap (two lines for one task) or be cut by rich (an ellipsis inside a number).
"""
from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest
from rich.console import Console, Group

from datapipe.cli.progress import RunProgress
from datapipe.engine.runner import offset_starts

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def _record(task_id: str, n: int) -> dict:
    return {"task_id": task_id, "ledger": {"stages": {"read": {"in": n}}}}


def _busy(width: int, clock: Clock) -> RunProgress:
    """A run two files into nine, with large numbers, a long dedup step and a tokenize phase."""
    console = Console(file=io.StringIO(), force_terminal=True, width=width, color_system="truecolor")
    prog = RunProgress(console, 9, show=False, get_time=clock)
    sizes = {f"f{i}": 1_100_000_000 + i for i in range(9)}  # 9.9 GB: the widest byte counts
    prog.on_plan(sizes, {t: 0 for t in sizes})
    for i in range(2):
        clock.t += 30
        prog.progress(i + 1, 9, _record(f"f{i}", 1_234_567))
    clock.t += 5
    prog.on_records("f2", 612_345, 500_000_000)
    prog.on_phase("dedup", "minhash signatures -> band buckets, shard 123 of 456 (near-duplicate candidates)")
    prog.on_phase("tokenize", "encode documents with r50k_base, 17 of 64 shards")
    return prog


def _lines(width: int) -> list[str]:
    prog = _busy(width, Clock())
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=width, color_system="truecolor").print(Group(prog.files, prog.phases))
    return [ANSI.sub("", ln) for ln in out.getvalue().splitlines()]


@pytest.mark.parametrize("width", [80, 100])
def test_each_task_is_one_line_that_fits(width):
    lines = _lines(width)
    assert len(lines) == 3, lines  # phase 1, dedup, tokenize: nothing wrapped onto a second line
    assert all(len(ln) <= width for ln in lines), [len(ln) for ln in lines]
    p1 = lines[0]
    assert "…" not in p1  # no number cut short
    assert "2/9 files" in p1 and "3,081,479" in p1 and "eta 0:" in p1  # 2 x 1,234,567 + 612,345 records
    assert re.search(r"\b\d+%", p1)
    assert lines[1].lstrip("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏✓ ").startswith("phase 2: dedup")
    assert re.search(r"phase 3: mix \+ tokenize .* \d+:\d\d:\d\d\s*$", lines[2])  # the step cut, elapsed kept


def test_wide_terminal_keeps_every_piece():
    p1 = _lines(160)[0]
    assert "phase 1: read, extract, filter" in p1 and "B/s eta" in p1 and "records (" in p1 and "/9.9 GB" in p1


def test_eta_moves_with_records_of_a_running_file():
    """One small file done, the large one running: bytes and ETA follow its records, not its end."""
    clock = Clock()
    prog = RunProgress(Console(file=io.StringIO(), width=100), 2, show=False, get_time=clock)
    prog.on_plan({"small": 1_000, "large": 9_000}, {"small": None, "large": None})  # offsets not bytes
    clock.t += 1
    prog.progress(1, 2, _record("small", 100))  # 10 bytes per record
    task = prog.files.tasks[0]
    assert task.completed == 1_000
    etas = []
    for n in (100, 200, 300, 400):
        clock.t += 1
        prog.on_records("large", n)
        assert task.completed == 1_000 + 10 * n
        etas.append(task.time_remaining)
    # 1,000 bytes a second from the second report on: 9,000 - 4,000 left -> 5 s
    assert etas[-1] == pytest.approx(5.0, abs=0.6)
    assert etas == sorted(etas, reverse=True) and etas[0] > etas[-1]
    clock.t += 1
    prog.on_records("large", 5_000)  # more records than the estimate allows: capped below the size
    assert task.completed == pytest.approx(1_000 + 0.99 * 9_000)
    prog.progress(2, 2, _record("large", 5_000))
    assert task.completed == 10_000 and task.finished


def test_before_any_file_finishes_byte_offsets_are_used():
    clock = Clock()
    prog = RunProgress(Console(file=io.StringIO(), width=100), 1, show=False, get_time=clock)
    prog.on_plan({"a": 10_000, "b-p1": 5_000, "c": 4_000}, {"a": 0, "b-p1": 20_000, "c": None})
    prog.on_records("a", 10, 2_500)
    prog.on_records("b-p1", 10, 21_000)   # a part starting at byte 20,000: 1,000 bytes in
    prog.on_records("c", 10, 3_000)       # offsets that are not file bytes: nothing counted yet
    assert prog.files.tasks[0].completed == 2_500 + 1_000
    prog.on_records("a", 11, 1_000)       # an offset behind the last one never moves the bar back
    assert prog.files.tasks[0].completed == 3_500


def test_offset_starts_by_format():
    from datapipe.engine.task_plan import TaskSpec

    def spec(tid, path, fmt, part=None):
        return TaskSpec(tid, path, "out", [], "fp", fmt, 8, {}, None, part, None, {})

    got = offset_starts([spec("w", "x.warc.gz", "warc"), spec("wp", "x.warc.gz", "warc", (100, 200)),
                         spec("j", "x.jsonl", "jsonl", (50, 90)), spec("jz", "x.jsonl.gz", "jsonl"),
                         spec("pq", "x.parquet", "parquet", (0, 2))])
    assert got == {"w": 0, "wp": 100, "j": 50, "jz": None, "pq": None}


_CHILD = r"""
import sys, time
from rich.console import Console
sys.path.insert(0, sys.argv[1])
from test_progress_line import Clock, _record
from datapipe.cli.progress import RunProgress
con = Console(stderr=True)
print("WIDTH", con.width, flush=True)
clock = Clock()
with RunProgress(con, 9, show=True, get_time=clock) as prog:
    sizes = {f"f{i}": 1_100_000_000 + i for i in range(9)}
    prog.on_plan(sizes, {t: 0 for t in sizes})
    for i in range(2):
        clock.t += 30
        prog.progress(i + 1, 9, _record(f"f{i}", 1_234_567))
    prog.on_records("f2", 612_345, 500_000_000)
    time.sleep(0.6)
    prog.on_phase("dedup", "minhash signatures -> band buckets, shard 123 of 456 (near-duplicate candidates)")
    time.sleep(0.6)
"""


@pytest.mark.parametrize("cols", [80, 100])
def test_in_a_pseudo_terminal(cols, tmp_path):
    """``datapipe run``'s display as a terminal of ``cols`` columns receives it (rich's Live)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, os.path.dirname(__file__)], stdin=slave, stdout=slave,
                            stderr=slave, env=env, close_fds=True)
    os.close(slave)
    buf = b""
    deadline = time.time() + 60
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    text = buf.decode("utf-8", "replace")
    assert proc.returncode == 0, text
    assert f"WIDTH {cols}" in text
    # Every frame Live draws: lines between cursor movements, ANSI removed.
    frames = [ANSI.sub("", seg) for seg in re.split(r"\r|\n|\x1b\[\d*[AK]", text)]
    drawn = [f for f in frames if "phase" in f]
    assert any("2/9 files" in f for f in drawn) and any("phase 2: dedup" in f for f in drawn)
    assert all(len(f) <= cols for f in drawn), max(len(f) for f in drawn)
    assert not any("…" in f for f in drawn if "phase 1" in f)
