"""A phase-1 task that fails for good costs its input file, not the run.

Dask re-runs a task whose worker died (the nanny restarts a worker over its memory limit) or that
raised; when every attempt fails the client gets ``KilledWorker`` or the task's exception. The
runner then records the file here, on the client: one row in ``errors/<task>.parquet`` naming
the file (``record_type`` ``file``, ``error_stage`` ``read``) and a ledger that counts it as one
record read and errored (see datapipe.engine.ledger). No success record is written, so a rerun retries
the file; stale ``_filtered/``/``rejected/`` shards of that task (from an older configuration)
are removed so the run's outputs never mix configurations.
"""
from __future__ import annotations

from datapipe.engine.ledger import Ledger
from datapipe.engine.task import KINDS, PROGRESS_TOPIC, marker_url, rows_to_table
from datapipe.engine.task_plan import TaskSpec
from datapipe.formats.documents import conform, document_schema
from datapipe.io.items import doc_id
from datapipe.io.parquet import join, remove_file, write_table_atomic
from datapipe.phase import DOCUMENTS, phases
from datapipe.stage import registry

FILE_RECORD = "file"  # records_by_type key of a whole input file errored as one record
_DETAIL_CHARS = 500


def failure_reason(exc: BaseException) -> str:
    """Ledger reason for a task that failed on every attempt."""
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        return "task:killed_worker"
    return f"task:exception:{type(exc).__name__}"


def failure_detail(exc: BaseException, spec: TaskSpec | None = None, progress: dict | None = None) -> str:
    """One line saying what happened (Dask's KilledWorker text is a paragraph of advice).

    For a dead worker it names the file and where the task had got to, from the last progress
    event of its last attempt (``progress``: records read, and the byte offset of the last record
    if the event has an ``offset``): the record after that one is where to look.
    """
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        last = getattr(exc.last_worker, "address", exc.last_worker)
        where = ""
        if spec is not None:
            where = f" while processing {spec.input}"
            if spec.part:
                where += f" (part {spec.part[0]}-{spec.part[1]})"
            if progress is not None and "records" in progress:
                where += f", after {progress['records']} record(s)"
                if progress.get("offset") is not None:
                    where += f", the last at byte offset {progress['offset']}"
            elif progress == {}:
                where += ", within its first batch (no progress report yet)"
        return (f"the worker running it died on each of {exc.allowed_failures + 1} attempts (last {last}){where}: "
                "over its memory limit or killed; see the worker logs")
    return " ".join(str(exc).split())[:_DETAIL_CHARS]


def last_progress(spec: TaskSpec) -> dict | None:
    """The last progress event the task of ``spec`` published (``datapipe.engine.task.report_progress``),
    read from the scheduler through the current client; ``{}`` when it published none, None when
    the events cannot be read (no client)."""
    try:
        from distributed import default_client

        events = default_client().get_events(PROGRESS_TOPIC)
    except Exception:  # noqa: BLE001 - no client, scheduler gone: the message says less, that is all
        return None
    for _, msg in reversed(list(events or ())):
        if isinstance(msg, dict) and msg.get("task") == spec.task_id and msg.get("run") == spec.output:
            return msg
    return {}


def record_failed_task(spec: TaskSpec, exc: BaseException, progress: dict | None = None) -> dict:
    """Write the errored-file row for ``spec`` and return its task record (``failed`` set, no marker).

    ``progress``: the task's last progress event; looked up with ``last_progress`` when the
    worker died and none is given.
    """
    from distributed import KilledWorker

    reason = failure_reason(exc)
    if progress is None and isinstance(exc, KilledWorker):
        progress = last_progress(spec)
    detail = failure_detail(exc, spec, progress)
    reg = registry()
    classes = [reg[next(iter(item))] for item in spec.stages]
    schema = document_schema(classes)  # stage fields are class attributes: no model is loaded
    offset = spec.part[0] if spec.part else 0
    source = spec.input.rstrip("/")
    row = {"id": doc_id(f"{spec.input}:{FILE_RECORD}:{offset}"), "source": spec.input,
           "warc_file": source.rsplit("/", 1)[-1], "warc_offset": offset, "record_type": FILE_RECORD,
           "error_reason": f"{reason}: {detail}" if detail else reason, "error_stage": "read"}
    so = spec.storage_options
    # Stale shards and success record of an older configuration go: the run's outputs never mix
    # configurations, and no later rerun may mistake them for this task's result.
    for folder in [f for k, f in KINDS.items() if k != "errors"] + [DOCUMENTS.folder]:
        remove_file(join(spec.output, folder, f"{spec.task_id}.parquet"), so)
    for cls in phases():   # what phases wrote for this task before (e.g. rejected/dedup-<task>)
        for ds in cls.writes:
            if ds.per_task and ds != DOCUMENTS:
                remove_file(join(spec.output, ds.file(spec.task_id)), so)
    remove_file(marker_url(spec), so)
    write_table_atomic(join(spec.output, "errors", f"{spec.task_id}.parquet"),
                       conform(rows_to_table([row], schema), schema), so)
    ledger = Ledger()
    for name in ["read"] + [c.name for c in classes]:  # the chain's stage order, zeros included, as a finished task has
        ledger.stage(name)
    ledger.record("read", 1, 0, errored=[reason])
    ledger.records_by_type[FILE_RECORD] += 1
    ledger.check()
    return {"task_id": spec.task_id, "input": spec.input, "part": spec.part, "fingerprint": spec.fingerprint,
            "files": {"kept": False, "rejected": False, "errors": True}, "ledger": ledger.to_dict(),
            "failed": {"reason": reason, "detail": detail}}
