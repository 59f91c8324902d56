"""Phase 1: one task per input file (or per part of a large text file), run on a Dask worker.

``run_file_task`` reads the file, pushes batches of documents through the stage chain, splits
kept / rejected / errored rows after every stage, and writes three shards atomically
(``documents/``, ``rejected/``, ``errors/`` named after the task) plus a success record
``_tasks/<task>.json`` holding the configuration fingerprint and the task's ledger. A rerun
with the same fingerprint skips the task; any change of a stage config reruns it.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from datapipe.io.parquet import ShardWriter, join, read_json, write_json_atomic
from datapipe.io.readers import TEXT_FORMATS, ReadItem, detect_format, read_input
from datapipe.ledger import Ledger
from datapipe.schema import PAYLOAD_FIELD, document_schema
from datapipe.stage import ERROR, REJECT, Stage, registry

SCHEMA_VERSION = 2  # 2: ``metadata`` column; shards of version 1 are rewritten, not mixed
_STAGE_CACHE: dict[str, Stage] = {}  # per worker process: models load once


@dataclass
class TaskSpec:
    task_id: str
    input: str
    output: str
    stages: list[dict]
    fingerprint: str
    input_format: str = "auto"
    batch_size: int = 256
    storage_options: dict = field(default_factory=dict)
    fields: dict | None = None             # resolved field mapping (text formats), see io/textdocs.py
    part: tuple[int, int] | None = None    # byte range (JSONL) or row-group range (Parquet); None = whole file


def chain_fingerprint(stages: list[dict], extra: dict | None = None) -> str:
    """Hash of the stage chain configuration (and schema version): equal config -> equal hash."""
    blob = json.dumps({"v": SCHEMA_VERSION, "stages": stages, "extra": extra or {}}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def task_id_for(path: str) -> str:
    """Readable, unique task id: file stem + hash of the full path.

    The id names files under the output directory, so it never holds ``/`` or ``\\`` (it is one
    path segment, never ``.``/``..``) and never starts with ``.``/``_``/``-`` (``ls`` hides such
    files and ``pyarrow.dataset`` skips them by default: a reader of ``documents/`` would lose them).
    """
    stem = path.rstrip("/").rsplit("/", 1)[-1]
    for suffix in (".gz", ".zst", ".warc", ".wet", ".jsonl", ".json", ".parquet"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:80].lstrip("._-")
    return f"{safe or 'input'}-{hashlib.sha1(path.encode()).hexdigest()[:8]}"


def plan_specs(inputs: list[str], output: str, stages: list[dict], fingerprint: str, fmt: str = "auto",
               preset: str = "auto", fields: dict | None = None, split_bytes: int = 0,
               batch_size: int = 256, storage_options: dict | None = None) -> list[TaskSpec]:
    """The phase-1 tasks for ``inputs``: one per file, or one per part of a splittable text file.

    A file in ``k > 1`` parts gets task ids ``<task_id_for(path)>-p00000`` ... (deterministic for
    the same ``split_bytes``). Raises ValueError for an unknown preset/field key or duplicate ids.
    """
    from datapipe.io.jsonl import byte_ranges
    from datapipe.io.parquet_input import row_group_ranges
    from fsspec.core import url_to_fs

    from datapipe.io.textdocs import resolve_fields

    so = storage_options or {}
    specs = []
    for p in inputs:
        f = detect_format(p) if fmt == "auto" else fmt
        mapping = resolve_fields(preset, fields, f) if f in TEXT_FORMATS else None
        parts = None
        if f == "jsonl" and split_bytes:
            fs, lp = url_to_fs(p, **so)
            parts = byte_ranges(p, fs.size(lp), split_bytes)
        elif f == "parquet" and split_bytes:
            parts = row_group_ranges(p, so, split_bytes)
        base = task_id_for(p)
        for k, part in enumerate(parts or [None]):
            tid = base if part is None else f"{base}-p{k:05d}"
            specs.append(TaskSpec(tid, p, output, stages, fingerprint, f, batch_size, so, mapping, part))
    ids = [s.task_id for s in specs]
    if len(set(ids)) != len(ids):
        raise ValueError("two inputs map to the same task id")
    return specs


def build_chain(stages: list[dict]) -> list[Stage]:
    """Stage instances for a chain, cached per worker process by their configuration."""
    reg = registry()
    chain = []
    for item in stages:
        (name, cfg), = item.items()
        key = json.dumps([name, cfg], sort_keys=True, default=str)
        if key not in _STAGE_CACHE:
            cls = reg[name]
            _STAGE_CACHE[key] = cls(cls.Config(**(cfg or {})))
        st = _STAGE_CACHE[key]
        st.ensure_setup()
        chain.append(st)
    return chain


def _text_bytes(t: pa.Table) -> int:
    if "text" not in t.column_names or t.num_rows == 0:
        return 0
    v = pc.sum(pc.binary_length(t.column("text").cast(pa.large_string()).cast(pa.large_binary()))).as_py()
    return int(v or 0)


def _rows_to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    cols = {}
    for f in schema:
        cols[f.name] = pa.array([r.get(f.name) for r in rows], type=f.type)
    return pa.Table.from_pydict(cols, schema=schema)


class _Outputs:
    def __init__(self, spec: TaskSpec, schema: pa.Schema):
        from datapipe.schema import conform

        self._conform = conform
        self.schema = schema
        so = spec.storage_options
        self.writers = {k: ShardWriter(join(spec.output, k, f"{spec.task_id}.parquet"), schema, so)
                        for k in ("documents", "rejected", "errors")}

    def write(self, kind: str, table: pa.Table) -> None:
        if table.num_rows:
            self.writers[kind].write(self._conform(table, self.schema))

    def commit(self) -> dict:
        return {k: w.commit() for k, w in self.writers.items()}

    def abort(self) -> None:
        for w in self.writers.values():
            w.abort()


def _split(table: pa.Table, stage_name: str, ledger: Ledger, out: _Outputs, seconds: float) -> pa.Table:
    """Route errored and rejected rows of a stage's output; return the live rows."""
    n = table.num_rows
    bytes_in = _text_bytes(table)
    rej_reasons: list[str] = []
    err_reasons: list[str] = []
    if ERROR in table.column_names and table.column(ERROR).null_count < n:
        mask = pc.is_valid(table.column(ERROR))
        bad = table.filter(mask)
        err_reasons = bad.column(ERROR).to_pylist()
        bad = bad.append_column("error_stage", pa.array([stage_name] * bad.num_rows, pa.string())) \
            if "error_stage" not in bad.column_names else bad
        out.write("errors", bad)
        table = table.filter(pc.invert(mask))
    if REJECT in table.column_names and table.column(REJECT).null_count < table.num_rows:
        mask = pc.is_valid(table.column(REJECT))
        rej = table.filter(mask)
        rej_reasons = rej.column(REJECT).to_pylist()
        stage_col = pa.array([stage_name] * rej.num_rows, pa.string())
        i = rej.schema.get_field_index("reject_stage")
        rej = rej.set_column(i, "reject_stage", stage_col) if i >= 0 else rej.append_column("reject_stage", stage_col)
        out.write("rejected", rej)
        table = table.filter(pc.invert(mask))
    for col in (REJECT, ERROR):
        if col in table.column_names:
            table = table.drop_columns([col])
    ledger.record(stage_name, n, table.num_rows, rej_reasons, err_reasons,
                  bytes_in=bytes_in, bytes_out=_text_bytes(table), seconds=seconds)
    return table


def _run_batch(items: list[ReadItem], chain: list[Stage], ledger: Ledger, out: _Outputs,
               in_schema: pa.Schema) -> None:
    table = _rows_to_table([it.row for it in items], in_schema)
    for st in chain:
        if table.num_rows == 0:
            ledger.record(st.name, 0, 0)
            continue
        t0 = time.perf_counter()
        try:
            result = st(table)
            if result.num_rows != table.num_rows:
                raise RuntimeError(f"stage {st.name} returned {result.num_rows} rows for {table.num_rows}")
        except Exception as e:  # noqa: BLE001 - a stage bug on a batch must not lose its rows
            reason = f"{st.name}:exception:{type(e).__name__}"
            result = table.append_column(ERROR, pa.array([reason] * table.num_rows, pa.string()))
        table = _split(result, st.name, ledger, out, time.perf_counter() - t0)
        if st.name == "extract" and "payload" in table.column_names:
            table = table.drop_columns(["payload"])  # raw HTML is not kept; (file, offset) points to it
    if "payload" in table.column_names:
        table = table.drop_columns(["payload"])
    out.write("documents", table)


PROGRESS_TOPIC = "datapipe-progress"


def _report_progress(spec: TaskSpec, records: int, ledger: Ledger, read: list[int] | None = None) -> None:
    """Tell the client and the scheduler (datapipe.monitor) how far this task has got: records read
    and its ledger so far, per stage ``[in, kept, rejected, errored]`` (cumulative, so a retry
    replaces its dead attempt). ``read`` holds the read stage's counts while it is still open.
    Dask structured events; a no-op outside a worker."""
    stages = {k: [v.n_in, v.kept, v.n_rejected, v.n_errored] for k, v in ledger.stages.items()}
    if read is not None:
        stages["read"] = read
    try:
        from distributed import get_worker

        get_worker().log_event(PROGRESS_TOPIC, {"task": spec.task_id, "run": spec.output,
                                                "records": records, "stages": stages})
    except (ImportError, ValueError):
        pass


def run_file_task(spec: TaskSpec) -> dict:
    """Process one input file. Returns the success record (also written to ``_tasks/``)."""
    marker_url = join(spec.output, "_tasks", f"{spec.task_id}.json")
    done = read_json(marker_url, spec.storage_options)
    if done and done.get("fingerprint") == spec.fingerprint:
        done["skipped"] = True
        _report_progress(spec, done["ledger"]["stages"]["read"]["in"], Ledger.from_dict(done["ledger"]))
        return done
    chain = build_chain(spec.stages)
    schema = document_schema(chain)
    in_schema = pa.schema(list(schema) + [PAYLOAD_FIELD])
    ledger = Ledger()
    for name in ["read"] + [st.name for st in chain]:  # fixes the stage order, zeros included
        ledger.stage(name)
    out = _Outputs(spec, schema)
    t0 = time.perf_counter()
    try:
        batch: list[ReadItem] = []
        read_rej: list[str] = []
        read_err: list[str] = []
        n_read = 0
        for item in read_input(spec.input, spec.input_format, spec.storage_options, spec.fields, spec.part):
            n_read += 1
            ledger.records_by_type[item.row.get("record_type") or "unknown"] += 1
            if item.status == "document":
                batch.append(item)
                if len(batch) >= spec.batch_size:
                    _run_batch(batch, chain, ledger, out, in_schema)
                    batch = []
                    n_rr, n_re = len(read_rej), len(read_err)
                    _report_progress(spec, n_read, ledger, [n_read, n_read - n_rr - n_re, n_rr, n_re])
            elif item.status == "rejected":
                read_rej.append(item.reason)
            else:
                read_err.append(item.reason)  # the ledger counts the reason; the row also says where
                why = f"{item.reason}: {item.detail}" if item.detail else item.reason
                row = dict(item.row, error_reason=why, error_stage="read")
                out.write("errors", _rows_to_table([row], schema))
        if batch:
            _run_batch(batch, chain, ledger, out, in_schema)
        n_docs = n_read - len(read_rej) - len(read_err)
        ledger.record("read", n_read, n_docs, read_rej, read_err,
                      seconds=time.perf_counter() - t0 - sum(c.seconds for c in ledger.stages.values()))
        ledger.check()
        files = out.commit()
    except BaseException:
        out.abort()
        raise
    _report_progress(spec, n_read, ledger)
    record = {"task_id": spec.task_id, "input": spec.input, "part": spec.part, "fingerprint": spec.fingerprint,
              "files": files, "ledger": ledger.to_dict(), "seconds": round(time.perf_counter() - t0, 3)}
    write_json_atomic(marker_url, record, spec.storage_options)
    return record


def reason_counts(records: list[dict]) -> Counter:
    c: Counter = Counter()
    for r in records:
        for st in r["ledger"]["stages"].values():
            c.update(st["rejected"])
    return c
