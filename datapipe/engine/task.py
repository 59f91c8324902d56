"""Phase 1: one task per input file (or per part of a large text file), run on a Dask worker.

``run_file_task`` reads the file, pushes batches of documents through the stage chain, splits
kept / rejected / errored rows after every stage, and writes three shards (``_filtered/``: the
rows that passed every stage, ``rejected/``, ``errors/``, named after the task) plus a success
record ``_tasks/<task>.json``. Each shard is written at the end, rows ordered by
``(warc_offset, id)``, so its bytes depend only on its rows (see ``TaskOutputs``); a task's rows
past its buffer budget wait in sorted run files on disk meanwhile (``datapipe.engine.spill``).

The success record holds the task's prefix fingerprints (planned in ``datapipe.engine.task_plan``). A
rerun with an equal last prefix skips the task; one that shares the first ``k >= 1`` stages
reruns only stages ``k..`` from the stored rows (``datapipe.engine.task_retune``), without reading or
extracting the file again; otherwise the file is read again.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

from datapipe.engine.check_cache import assets_digest
from datapipe.engine.ledger import Ledger
from datapipe.engine.spill import SortedRows, default_buffer_bytes
from datapipe.engine.task_plan import TaskSpec
from datapipe.formats.documents import (
    PAYLOAD_FIELD,
    conform,
    document_schema,
    snapshot_column,
)
from datapipe.io.items import ReadItem
from datapipe.io.parquet import (
    fs_and_path,
    join,
    read_json,
    remove_file,
    write_atomic,
    write_json_atomic,
)
from datapipe.io.readers import read_input
from datapipe.stage import ERROR, REJECT, Stage, registry, with_column

log = logging.getLogger("datapipe")

_STAGE_CACHE: dict[str, Stage] = {}  # per worker process: models load once
#: One lock per cached stage: a worker's warm-up thread (datapipe.engine.warmup) and its first task may
#: reach a stage's setup at once; the second waits for the first instead of loading it twice.
_SETUP_LOCKS: dict[str, threading.Lock] = {}
_CACHE_LOCK = threading.Lock()
#: Phase-1 outputs of a task: kind -> folder under the run directory.
KINDS = {"kept": "_filtered", "rejected": "rejected", "errors": "errors"}
_DETAIL_CHARS = 300


def build_chain(stages: list[dict]) -> list[Stage]:
    """Stage instances for a chain, cached per worker process by their configuration and the
    content digest of their files (``Stage.lineage_assets``: a model retrained in place is loaded
    again by a warm worker), set up (thread-safe: one setup per cached stage)."""

    reg = registry()
    chain = []
    for item in stages:
        (name, cfg), = item.items()
        cls = reg[name]
        st = cls(cls.Config(**(cfg or {})))
        key = json.dumps([name, cfg, assets_digest(st)], sort_keys=True, default=str)
        with _CACHE_LOCK:
            if key not in _STAGE_CACHE:
                _STAGE_CACHE[key] = st
                _SETUP_LOCKS[key] = threading.Lock()
            st, lock = _STAGE_CACHE[key], _SETUP_LOCKS[key]
        with lock:
            st.ensure_setup()
        chain.append(st)
    return chain


def _text_bytes(t: pa.Table) -> int:
    if "text" not in t.column_names or t.num_rows == 0:
        return 0
    v = pc.sum(pc.binary_length(t.column("text").cast(pa.large_string()).cast(pa.large_binary()))).as_py()
    return int(v or 0)


def rows_to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    present = set().union(*rows) if rows else set()  # reader rows set ~20 of the schema's fields
    cols = {}
    for f in schema:
        if f.name in present:
            cols[f.name] = pa.array([r.get(f.name) for r in rows], type=f.type)
        else:
            cols[f.name] = pa.nulls(len(rows), type=f.type)
    return pa.Table.from_pydict(cols, schema=schema)


def canonical_order(table: pa.Table) -> pa.Table:
    """Rows ordered by ``(warc_offset, id)``: read order, whatever path computed them."""
    if table.num_rows < 2:
        return table
    return table.sort_by([("warc_offset", "ascending"), ("id", "ascending")])


class TaskOutputs:
    """The rows of one task, gathered per kind and written at ``commit`` in canonical order.

    Past ``spec.buffer_bytes`` of Arrow buffers held across the kinds (default:
    ``spill.default_buffer_bytes``, from the worker's memory limit), every kind's rows are
    spilled to disk as a sorted run (``datapipe.engine.spill``); ``commit`` merges the runs into
    the shard and removes them, ``abort`` removes them. A shard's bytes depend only on its rows,
    spilled or not: a task rerun from stored rows writes exactly what a fresh read would.
    """

    def __init__(self, spec: TaskSpec, schema: pa.Schema):
        self.spec, self.schema = spec, schema
        self.budget = spec.buffer_bytes or default_buffer_bytes()
        self.fs = fs_and_path(spec.output, spec.storage_options)[0]
        self.sorted = {k: SortedRows(self.fs, fs_and_path(self.url(k), spec.storage_options)[1], schema, self.budget)
                       for k in KINDS}

    @property
    def parts(self) -> dict[str, list[pa.Table]]:
        """Per kind, the tables held in memory (not yet spilled)."""
        return {k: s.parts for k, s in self.sorted.items()}

    def url(self, kind: str) -> str:
        return join(self.spec.output, KINDS[kind], f"{self.spec.task_id}.parquet")

    def write(self, kind: str, table: pa.Table) -> None:
        if table.num_rows:
            self.sorted[kind].add(conform(table, self.schema))
            if sum(s.held_bytes for s in self.sorted.values()) > self.budget:
                for s in self.sorted.values():
                    s.spill()

    def rows(self, kind: str) -> int:
        return self.sorted[kind].rows

    def commit(self) -> dict:
        files = {}
        so = self.spec.storage_options
        try:
            for kind, rows in self.sorted.items():
                if rows.rows:
                    write_atomic(self.url(kind), rows.write, "wb", so)
                    files[kind] = True
                else:
                    remove_file(self.url(kind), so)  # a rerun with no such rows: no stale shard
                    files[kind] = False
                rows.discard()
        finally:
            self.abort()
        return files

    def abort(self) -> None:
        for s in self.sorted.values():
            s.discard()


def ledger_reason(value: str) -> str:
    """The ledger key of a reason column value: ``stage:kind`` without the ``: detail`` part."""
    return value.split(": ", 1)[0]


def split_rows(table: pa.Table, stage_name: str, ledger: Ledger, out: TaskOutputs, seconds: float) -> pa.Table:
    """Route errored and rejected rows of a stage's output; return the live rows."""
    n = table.num_rows
    bytes_in = _text_bytes(table)
    rej_reasons: list[str] = []
    err_reasons: list[str] = []
    if ERROR in table.column_names and table.column(ERROR).null_count < n:
        mask = pc.is_valid(table.column(ERROR))
        bad = table.filter(mask)
        err_reasons = [ledger_reason(r) for r in bad.column(ERROR).to_pylist()]
        bad = with_column(bad, "error_stage", [stage_name] * bad.num_rows, pa.string())
        out.write("errors", bad)
        table = table.filter(pc.invert(mask))
    if REJECT in table.column_names and table.column(REJECT).null_count < table.num_rows:
        mask = pc.is_valid(table.column(REJECT))
        rej = table.filter(mask)
        rej_reasons = rej.column(REJECT).to_pylist()
        rej = with_column(rej, "reject_stage", [stage_name] * rej.num_rows, pa.string())
        out.write("rejected", rej)
        table = table.filter(pc.invert(mask))
    for col in (REJECT, ERROR):
        if col in table.column_names:
            table = table.drop_columns([col])
    ledger.record(stage_name, n, table.num_rows, rej_reasons, err_reasons,
                  bytes_in=bytes_in, bytes_out=_text_bytes(table), seconds=seconds)
    return table


def payload_needed_until(chain: list[Stage]) -> int:
    """Index of the last stage that declares ``payload`` in ``needs`` (-1: none): the raw payload
    travels no further (raw HTML is not kept; (file, offset) points to it)."""
    last = -1
    for i, st in enumerate(chain):
        if "payload" in getattr(st, "needs", ()):
            last = i
    return last


def edits_text(st) -> bool:
    return "text" in getattr(st, "edits", ())


def snapshot_if_changed(table: pa.Table, column: str) -> pa.Table:
    """Keep the snapshot only where the stage changed the text (no second copy otherwise)."""
    snap, text = table.column(column), table.column("text")
    same = pc.fill_null(pc.equal(snap, text), False)
    return with_column(table, column, pc.if_else(same, pa.nulls(table.num_rows, pa.string()), snap), pa.string())


def stage_result(st: Stage, table: pa.Table, out: TaskOutputs, logged: set) -> pa.Table:
    """``st`` on a batch of live rows, with its text snapshot (``Stage.edits``); a stage exception
    errors every row with ``<stage>:exception:<Type>: <message>`` (logged once per stage per task)."""
    snap = snapshot_column(st.name) if edits_text(st) else None
    if snap:
        table = with_column(table, snap, table.column("text"), pa.string())
    try:
        result = st(table)
        if result.num_rows != table.num_rows:
            raise RuntimeError(f"stage {st.name} returned {result.num_rows} rows for {table.num_rows}")
        return snapshot_if_changed(result, snap) if snap else result
    except Exception as e:  # noqa: BLE001 - a stage bug on a batch must not lose its rows
        detail = " ".join(str(e).split())[:_DETAIL_CHARS]
        reason = f"{st.name}:exception:{type(e).__name__}" + (f": {detail}" if detail else "")
        if st.name not in logged:
            logged.add(st.name)
            log.exception("stage %s failed on a batch of %d rows of %s", st.name, table.num_rows, out.spec.input)
        return with_column(table, ERROR, [reason] * table.num_rows, pa.string())


def run_stages(table: pa.Table, chain: list[Stage], start: int, ledger: Ledger, out: TaskOutputs,
               logged: set) -> pa.Table:
    """Run ``chain[start:]`` on one batch of live rows; return the rows that passed every stage.

    A stage exception errors the batch's live rows with ``<stage>:exception:<Type>: <message>``
    (message truncated), logged once per stage per task with its traceback.
    """
    drop_payload_after = payload_needed_until(chain)
    for i in range(start, len(chain)):
        st = chain[i]
        if table.num_rows == 0:
            ledger.record(st.name, 0, 0)
            continue
        t0 = time.perf_counter()
        result = stage_result(st, table, out, logged)
        table = split_rows(result, st.name, ledger, out, time.perf_counter() - t0)
        if i >= drop_payload_after and "payload" in table.column_names:
            table = table.drop_columns(["payload"])
    if "payload" in table.column_names:
        table = table.drop_columns(["payload"])
    return table


PROGRESS_TOPIC = "datapipe-progress"


def report_progress(spec: TaskSpec, records: int, ledger: Ledger, read: list[int] | None = None,
                     offset: int | None = None) -> None:
    """Tell the client and the scheduler (datapipe.monitor) how far this task has got: records read
    and its ledger so far, per stage ``[in, kept, rejected, errored]`` (cumulative, so a retry
    replaces its dead attempt). ``read`` holds the read stage's counts while it is still open.
    Dask structured events; a no-op outside a worker."""
    stages = {k: [v.n_in, v.kept, v.n_rejected, v.n_errored] for k, v in ledger.stages.items()}
    if read is not None:
        stages["read"] = read
    try:
        from distributed import get_worker

        ev = {"task": spec.task_id, "run": spec.output, "records": records, "stages": stages}
        if offset is not None:  # where a worker killed for memory was (datapipe.engine.task_failure)
            ev["offset"] = offset
        get_worker().log_event(PROGRESS_TOPIC, ev)
    except (ImportError, ValueError):
        pass


def marker_url(spec: TaskSpec) -> str:
    return join(spec.output, "_tasks", f"{spec.task_id}.json")


def common_prefix(old: list[str] | None, new: list[str] | None) -> int:
    """Number of leading prefix fingerprints two tasks share (0: the read itself differs)."""
    if not old or not new:
        return 0
    k = 0
    while k < min(len(old), len(new)) and old[k] == new[k]:
        k += 1
    return k


def missing_outputs(spec: TaskSpec, done: dict) -> list[str]:
    """The shards a success record says the task wrote that are not on disk (paths)."""

    out = []
    for kind, written in (done.get("files") or {}).items():
        if written and kind in KINDS:
            fs, path = fs_and_path(join(spec.output, KINDS[kind], f"{spec.task_id}.parquet"), spec.storage_options)
            if not fs.exists(path):
                out.append(path)
    return out


def run_file_task(spec: TaskSpec) -> dict:
    """Process one input file. Returns the success record (also written to ``_tasks/``).

    Skips the task when its stored record has this fingerprint; reruns only the changed tail of
    the chain when the stored record shares the read and the first stages (module doc).
    """
    marker = marker_url(spec)
    done = read_json(marker, spec.storage_options)
    if done and missing_outputs(spec, done):
        done = None  # a shard of it was deleted: the record proves nothing, read the file again
    if done and done.get("fingerprint") == spec.fingerprint:
        done["skipped"] = True
        report_progress(spec, done["ledger"]["stages"]["read"]["in"], Ledger.from_dict(done["ledger"]))
        return done
    chain = build_chain(spec.stages)
    schema = document_schema(chain)
    t0 = time.perf_counter()
    k = common_prefix(done.get("prefix") if done else None, spec.prefix)
    record = None
    if done and k >= 2:  # the read and at least one stage are unchanged
        # Lazy: task_retune builds on this module's helpers (splitting them out of this module,
        # which runner and plan import from, breaks the cycle).
        from datapipe.engine.task_retune import retune_task

        record = retune_task(spec, done, k - 1, chain, schema)
    if record is None:
        record = _read_task(spec, chain, schema)
    record["seconds"] = round(time.perf_counter() - t0, 3)
    write_json_atomic(marker, record, spec.storage_options)
    return record


def task_record(spec: TaskSpec, chain: list[Stage], files: dict, ledger: Ledger, **extra) -> dict:
    return {"task_id": spec.task_id, "input": spec.input, "part": spec.part, "fingerprint": spec.fingerprint,
            "prefix": spec.prefix, "stage_names": [st.name for st in chain], "stages": spec.stages,
            "stage_versions": [type(st).version for st in chain], "stage_assets": spec.assets, "files": files, "ledger": ledger.to_dict(), **extra}


def _read_task(spec: TaskSpec, chain: list[Stage], schema: pa.Schema) -> dict:
    in_schema = pa.schema(list(schema) + [PAYLOAD_FIELD])
    ledger = Ledger()
    for name in ["read"] + [st.name for st in chain]:  # fixes the stage order, zeros included
        ledger.stage(name)
    out = TaskOutputs(spec, schema)
    logged: set = set()
    t0 = time.perf_counter()
    try:
        batch: list[ReadItem] = []
        read_rej: list[str | None] = []
        read_err: list[str | None] = []
        n_read = 0
        limited = False

        def flush():
            table = rows_to_table([it.row for it in batch], in_schema)
            out.write("kept", run_stages(table, chain, 0, ledger, out, logged))

        opts = dict(spec.read_options)
        limit = opts.pop("limit", None)  # ours, not the reader's: at most this many records
        items = read_input(spec.input, spec.input_format, spec.storage_options, spec.fields, spec.part, **opts)
        for item in items:
            if limit is not None and n_read >= limit:
                limited = True  # one record past the limit exists: the file was cut short
                break
            n_read += 1
            ledger.records_by_type[item.row.get("record_type") or "unknown"] += 1
            if item.status == "document":
                batch.append(item)
                if len(batch) >= spec.batch_size:
                    flush()
                    batch = []
                    n_rr, n_re = len(read_rej), len(read_err)
                    report_progress(spec, n_read, ledger, [n_read, n_read - n_rr - n_re, n_rr, n_re],
                                     offset=item.row.get("warc_offset"))
            elif item.status == "rejected":
                read_rej.append(item.reason)
            else:
                read_err.append(item.reason)  # the ledger counts the reason; the row also says where
                why = f"{item.reason}: {item.detail}" if item.detail else item.reason
                row = dict(item.row, error_reason=why, error_stage="read")
                out.write("errors", rows_to_table([row], schema))
        if batch:
            flush()
        n_docs = n_read - len(read_rej) - len(read_err)
        ledger.record("read", n_read, n_docs, read_rej, read_err,
                      seconds=time.perf_counter() - t0 - sum(c.seconds for c in ledger.stages.values()))
        ledger.check()
        remove_file(marker_url(spec), spec.storage_options)  # old record no longer describes the files
        files = out.commit()
    except BaseException:
        out.abort()
        raise
    report_progress(spec, n_read, ledger)
    return task_record(spec, chain, files, ledger, retuned_from=None, limited=limited)


def reason_counts(records: list[dict]) -> Counter:
    c: Counter = Counter()
    for r in records:
        for st in r["ledger"]["stages"].values():
            c.update(st["rejected"])
    return c
