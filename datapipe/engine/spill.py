"""Bounded-memory shards of one task: sorted runs spilled to disk, merged into canonical order.

A task's rows of one kind (kept, rejected, errored) arrive batch by batch and are written as one
Parquet shard in canonical order ``(warc_offset, id)``, ties in arrival order (a stable sort), so
that the shard's bytes depend only on its rows. ``SortedRows`` holds them in memory while they
are few; past the task's buffer budget its owner calls ``spill``, which sorts the rows held and
writes them as one *run*: an Arrow IPC file (zstd) beside the shard, named like every temporary
file of the engine (``<shard>.tmp-<hex>``), so that a run left by a killed task is removed by the
next run (``datapipe.engine.plan.stale_files``) and never read as an output (it does not end in
``.parquet``). ``write`` k-way merges the runs and the rows still held, at most ``FAN_IN`` at a
time (more runs are first merged into fewer), and streams the merged rows into the shard.

Row groups are cut from the row sequence alone (``ShardWriter``): at most ``ROW_GROUP_ROWS`` rows
and ``ROW_GROUP_BYTES`` bytes of values, so a shard is byte for byte the same whether or not its
task spilled, and whatever its budget.

Memory, bytes of Arrow buffers: while spilling, the rows held and their sorted copy (twice the
budget); while merging, one run batch per run (the budget over ``FAN_IN`` each, at least
``MIN_BATCH_BYTES``), the rows still held and one merged step (about twice the budget), and one
row group: its pieces, its contiguous copy and the Parquet writer's buffers (about three times
its largest column), some four times ``ROW_GROUP_BYTES``.
"""
from __future__ import annotations

import uuid
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from datapipe.io.parquet import COMPRESSION

#: Bytes of Arrow buffers a task holds across its kinds before it spills sorted runs to disk
#: (at most: ``default_buffer_bytes``).
DEFAULT_BUFFER_BYTES = 256 * 2**20
#: Rows and value bytes (``row_bytes``) of a shard's row group at most.
ROW_GROUP_ROWS = 50_000
ROW_GROUP_BYTES = 32 * 2**20
#: Runs merged at once.
FAN_IN = 16
#: Value bytes of a run's batches: the budget over ``FAN_IN``, at least this (a merge step has
#: a cost of its own, whatever its size).
MIN_BATCH_BYTES = 2**20
#: Arrival position of a row in its kind: the tie-break of the canonical order.
SEQ = "__seq"
KEYS = [("warc_offset", "ascending"), ("id", "ascending")]
_MERGE_KEYS = KEYS + [(SEQ, "ascending")]
_IPC_OPTIONS = ipc.IpcWriteOptions(compression="zstd")


def default_buffer_bytes() -> int:
    """The buffer budget of a task on this process: ``DEFAULT_BUFFER_BYTES``, or an eighth of the
    Dask worker's ``memory_limit`` where that is less (a spilling task's peak is some four times
    its budget plus four row groups, in Arrow buffers and allocator slack). Bytes."""
    try:
        from distributed import get_worker

        limit = get_worker().memory_manager.memory_limit
    except (ImportError, ValueError, AttributeError):  # not in a worker
        limit = None
    return min(DEFAULT_BUFFER_BYTES, limit // 8) if limit else DEFAULT_BUFFER_BYTES


def row_bytes(table: pa.Table) -> np.ndarray:
    """Bytes of each row's string and binary values (int64 array of ``table.num_rows``; nulls 0):
    what row groups and run batches are cut by, the size of a row's content that a fixed-width
    column adds nothing much to."""
    out = np.zeros(table.num_rows, np.int64)
    for f, col in zip(table.schema, table.columns):
        if pa.types.is_string(f.type) or pa.types.is_binary(f.type) or pa.types.is_large_string(f.type) \
                or pa.types.is_large_binary(f.type):
            out += pc.fill_null(pc.binary_length(col), 0).to_numpy().astype(np.int64, copy=False)
    return out


def _cuts(sizes: np.ndarray, max_bytes: int, max_rows: int) -> list[int]:
    """Greedy cut points of rows of ``sizes`` bytes into pieces of at most ``max_rows`` rows and
    ``max_bytes`` bytes (a row larger than ``max_bytes`` is a piece alone); the piece ends."""
    ends, i, n = [], 0, len(sizes)
    while i < n:
        cum = np.cumsum(sizes[i:i + max_rows])
        take = max(1, int(np.searchsorted(cum, max_bytes, side="right")))
        i += take
        ends.append(i)
    return ends


def _slices(table: pa.Table, max_bytes: int) -> Iterator[pa.Table]:
    start = 0
    for end in _cuts(row_bytes(table), max_bytes, max(1, table.num_rows)):
        yield table.slice(start, end - start)
        start = end


class ShardWriter:
    """Rows in their final order -> a zstd Parquet file on ``fh`` in row groups of at most
    ``ROW_GROUP_ROWS`` rows and ``ROW_GROUP_BYTES`` value bytes, cut greedily along the rows.

    Each group is written from one contiguous copy of its rows, as ``pq.write_table`` writes a
    combined table: the bytes depend on the rows only, not on how they were handed over."""

    def __init__(self, fh, schema: pa.Schema, max_rows: int | None = None, max_bytes: int | None = None):
        self.max_rows, self.max_bytes = max_rows or ROW_GROUP_ROWS, max_bytes or ROW_GROUP_BYTES
        self._w = pq.ParquetWriter(fh, schema, compression=COMPRESSION)
        self._pending: list[pa.Table] = []
        self._rows = self._bytes = 0

    def add(self, table: pa.Table) -> None:
        sizes = row_bytes(table)
        i, n = 0, table.num_rows
        while i < n:
            cum = np.cumsum(sizes[i:i + self.max_rows - self._rows])
            take = int(np.searchsorted(cum, self.max_bytes - self._bytes, side="right"))
            if take == 0 and self._rows == 0:
                take = 1  # one row over the byte cap: a group of its own
            if take:
                self._pending.append(table.slice(i, take))
                self._rows += take
                self._bytes += int(cum[take - 1])
                i += take
            if i < n or self._rows >= self.max_rows:
                self._flush()  # the next row does not fit

    def _flush(self) -> None:
        if self._rows:
            group = pa.concat_tables(self._pending).combine_chunks()
            self._pending, self._rows, self._bytes = [], 0, 0
            self._w.write_table(group, row_group_size=self.max_rows)

    def close(self) -> None:
        self._flush()
        self._w.close()


def _key_table(t: pa.Table) -> pa.Table:
    return t.select([k for k, _ in _MERGE_KEYS])


def _open(fs, path: str, mode: str):
    """A file of ``fs`` for Arrow: a native one on a local disk (no Python copy of each buffer
    read or written), else the fsspec file."""
    proto = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if proto in ("file", "local"):
        return pa.OSFile(path, mode)
    return fs.open(path, mode)


class _Run:
    """One sorted run's batches: from its IPC file, or the slices of a sorted table in memory."""

    def __init__(self, fs=None, path: str | None = None, table: pa.Table | None = None, batch_bytes: int = 0):
        self.fs, self.path, self.table, self.batch_bytes = fs, path, table, batch_bytes

    def batches(self) -> Iterator[pa.Table]:
        if self.table is not None:
            yield from _slices(self.table, self.batch_bytes)
            return
        assert self.path is not None  # a run is either in memory or in a file
        with _open(self.fs, self.path, "rb") as fh:
            reader = ipc.open_file(fh)
            for i in range(reader.num_record_batches):
                yield pa.Table.from_batches([reader.get_batch(i)])


def merge(runs: list[_Run]) -> Iterator[pa.Table]:
    """The rows of sorted ``runs`` in merged order (by ``_MERGE_KEYS``), step by step: each step
    emits every loaded row up to the smallest last row of the runs still loading, so a run holds
    at most one batch in memory."""
    its = [r.batches() for r in runs]
    pending: list[pa.Table | None] = [None] * len(runs)
    last: list[pa.Table | None] = [None] * len(runs)   # the last row loaded from each run (keys)
    live = set(range(len(runs)))
    load = list(live)
    while True:
        for s in load:
            b = next(its[s], None)
            while b is not None and b.num_rows == 0:
                b = next(its[s], None)
            if b is None:
                live.discard(s)
                last[s] = None
            else:
                pending[s] = b
                last[s] = _key_table(b.slice(b.num_rows - 1))
        tabs = {s: t for s, t in enumerate(pending) if t is not None and t.num_rows}
        held = list(tabs)
        if not held:
            return
        keys = pa.concat_tables([_key_table(tabs[s]) for s in held])
        order = pc.sort_indices(keys, sort_keys=_MERGE_KEYS).to_numpy()
        if live:
            lasts = pa.concat_tables([last[s] for s in sorted(live)])
            first = pc.sort_indices(lasts, sort_keys=_MERGE_KEYS)[0].as_py()
            frontier = sorted(live)[first]
            seq = lasts.column(SEQ)[first].as_py()
            seqs = keys.column(SEQ).to_numpy()
            upto = int(np.flatnonzero(seqs[order] == seq)[0]) + 1
        else:
            frontier, upto = None, len(order)
        owner = np.repeat(np.arange(len(held)), [tabs[s].num_rows for s in held])
        counts = np.bincount(owner[order[:upto]], minlength=len(held))
        heads = []
        for j, s in enumerate(held):
            heads.append(tabs[s].slice(0, int(counts[j])))
            pending[s] = tabs[s].slice(int(counts[j]))
        step = pa.concat_tables(heads).combine_chunks()
        del heads
        yield step.take(pc.sort_indices(_key_table(step), sort_keys=_MERGE_KEYS))
        del step
        load = [frontier] if frontier is not None else []


class SortedRows:
    """The rows of one kind of one task (``schema``), spilled as sorted runs beside ``final``
    (a path on ``fs``) on demand, written to ``final`` in canonical order by ``write``."""

    def __init__(self, fs, final: str, schema: pa.Schema, buffer_bytes: int = DEFAULT_BUFFER_BYTES):
        self.fs, self.final, self.schema = fs, final, schema
        self.batch_bytes = max(MIN_BATCH_BYTES, buffer_bytes // FAN_IN)
        self.parts: list[pa.Table] = []
        self.held_bytes = 0
        self.rows = 0                 # rows added, held or spilled
        self._spilled_rows = 0
        self.runs: list[str] = []     # paths of the run files on fs

    def add(self, table: pa.Table) -> None:
        self.parts.append(table)
        self.held_bytes += table.nbytes
        self.rows += table.num_rows

    def _held(self) -> pa.Table:
        """The rows held as one contiguous table, holding none: a take from chunks would first
        concatenate them (a third copy at its peak), a take from one chunk does not."""
        t = pa.concat_tables(self.parts).combine_chunks()
        self.parts, self.held_bytes = [], 0
        return t

    def _sorted_held(self) -> pa.Table:
        t = self._held()
        order = pc.sort_indices(t, sort_keys=KEYS)  # stable: ties in arrival order
        t = t.take(order).append_column(SEQ, pc.add(order.cast(pa.int64()), self._spilled_rows))
        self._spilled_rows += t.num_rows
        return t

    def _new_run(self, batches: Iterator[pa.Table], schema: pa.Schema) -> str:
        path = f"{self.final}.tmp-{uuid.uuid4().hex[:8]}"
        self.runs.append(path)  # before it exists: removed by ``discard`` whatever happens
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        with _open(self.fs, path, "wb") as fh, ipc.new_file(fh, schema, options=_IPC_OPTIONS) as w:
            for b in batches:
                for piece in _slices(b, self.batch_bytes):
                    w.write_table(piece)
        return path

    def spill(self) -> None:
        """Write the rows held as one sorted run file; hold none."""
        if self.parts:
            t = self._sorted_held()
            self._new_run(iter([t]), t.schema)

    def _reduce(self) -> None:
        """Merge run files ``FAN_IN`` at a time until they and the rows held fit one merge."""
        while len(self.runs) > FAN_IN - 1:
            group = self.runs[:FAN_IN]
            # appended last: sorted runs merge in any order (SEQ breaks every tie)
            self._new_run(merge([_Run(self.fs, p) for p in group]), self.schema.append(pa.field(SEQ, pa.int64())))
            for p in group:
                self.fs.rm(p)
                self.runs.remove(p)

    def write(self, fh) -> None:
        """Every row of the kind in canonical order as a Parquet file on ``fh`` (``ShardWriter``)."""
        w = ShardWriter(fh, self.schema)
        if not self.runs:
            t = self._held() if self.parts else self.schema.empty_table()
            w.add(t.sort_by(KEYS) if t.num_rows > 1 else t)  # stable, as ``_sorted_held``
        else:
            self._reduce()
            runs = [_Run(self.fs, p) for p in self.runs]
            if self.parts:
                runs.append(_Run(table=self._sorted_held(), batch_bytes=self.batch_bytes))
            for step in merge(runs):
                w.add(step.drop_columns([SEQ]))
        w.close()

    def discard(self) -> None:
        """Drop the rows held and remove the run files."""
        self.parts, self.held_bytes = [], 0
        for p in self.runs:
            try:
                self.fs.rm(p)
            except FileNotFoundError:
                pass
        self.runs = []
