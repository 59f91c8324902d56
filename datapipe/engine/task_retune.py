"""Rerun the changed tail of a phase-1 chain from a task's stored rows (no read, no extraction).

Every row that reached stage ``k`` of the old chain is on disk: the rows that passed every stage
(``_filtered/``), the rows rejected at stage ``k`` or later (``rejected/``, with ``reject_stage``)
and the rows errored there (``errors/``, with ``error_stage``). When the new chain shares the
read settings and stages ``0..k-1`` with the old one, those rows are the input of stage ``k``.
They are cut into the batches a fresh read would have formed (a document's batch is its rank
in read order divided by the batch size, the rank counting every document the read produced),
so stage exceptions, which error a whole batch, fall on the same rows; the outputs are then
byte-identical to a fresh run's (``TaskOutputs`` writes rows in canonical order).

``retune_task`` returns None whenever that cannot be guaranteed (a stage that needs the raw
payload is rerun, a stage name repeats, ids are not unique, a stored file is missing); the caller
then reads the file again.
"""
from __future__ import annotations

import logging
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datapipe.engine.ledger import Ledger, StageCounts
from datapipe.engine.task import (
    TaskOutputs,
    canonical_order,
    marker_url,
    remove_file,
    report_progress,
    run_stages,
    task_record,
)
from datapipe.engine.task_plan import TaskSpec
from datapipe.engine.task_reuse import reusable, run_stages_reusing, unchanged_stages
from datapipe.formats.documents import conform, snapshot_column
from datapipe.io.parquet import fs_and_path
from datapipe.stage import Stage, registry

log = logging.getLogger("datapipe")
_POS = "__old_position"
_DECISIONS = ("reject_reason", "reject_stage", "error_reason", "error_stage", "duplicate_of")


def _read(out: TaskOutputs, kind: str, present: bool, schema: pa.Schema) -> pa.Table | None:
    """The stored shard of ``kind`` conformed to ``schema`` (the new one plus the old chain's
    text snapshots); None if it should exist and does not."""
    if not present:
        return schema.empty_table()
    fs, path = fs_and_path(out.url(kind), out.spec.storage_options)
    if not fs.exists(path):
        return None
    return conform(pq.read_table(path, filesystem=fs), schema)


def _outputs_of(stages) -> set[str]:
    """Columns the stages (classes or instances) write besides ``text``: signals, edited columns
    (``lang`` for langid) and text snapshots."""
    cols = {f.name for st in stages for f in getattr(st, "fields", [])}
    cols |= {c for st in stages for c in getattr(st, "edits", ()) if c != "text"}  # text: _restore_text
    cols |= {snapshot_column(st.name) for st in stages if "text" in getattr(st, "edits", ())}
    return cols


def _clear(t: pa.Table, stages: list, kept: list) -> pa.Table:
    """Decision columns and the columns ``stages`` write (those rerun, and those of the old chain
    from the rerun's start on, removed stages included) set to null, but for the columns the
    stages before the start (``kept``) write: the rows re-enter as a fresh read would hand them to
    the first stage rerun (a removed ``langid`` leaves no ``lang``)."""
    cols = (set(_DECISIONS) | _outputs_of(stages)) - _outputs_of(kept)
    for col in sorted(cols):
        i = t.schema.get_field_index(col)
        if i >= 0:
            t = t.set_column(i, t.schema.field(i), pa.nulls(t.num_rows, t.schema.field(i).type))
    return t


def _stage_positions(col: pa.ChunkedArray, pos: dict[str, int]) -> np.ndarray | None:
    """Old chain position of each row's stage name; -1 for ``read``; None if a name is unknown."""
    names = col.to_pylist()
    out = np.empty(len(names), np.int64)
    for i, n in enumerate(names):
        if n == "read":
            out[i] = -1
        elif n in pos:
            out[i] = pos[n]
        else:
            return None
    return out


def _restore_text(t: pa.Table, editors: list[str]) -> pa.Table:
    """The text as it entered the first of ``editors`` (old-chain stages at or after the rerun's
    start that edit the text): the first non-null of their snapshots, in chain order, else the
    stored text (none of them changed it)."""
    cols = [t.column(snapshot_column(n)) for n in editors if snapshot_column(n) in t.column_names]
    if not cols:
        return t
    i = t.schema.get_field_index("text")
    return t.set_column(i, t.schema.field(i), pc.coalesce(*cols, t.column("text")))


def retune_task(spec: TaskSpec, done: dict, start: int, chain: list[Stage], schema: pa.Schema) -> dict | None:
    """Rerun ``chain[start:]`` on the stored rows of ``spec``'s task; return its success record or None.

    Rows re-enter with the text stage ``start`` saw: edits by later stages of the old chain are
    undone from their ``text_before_<stage>`` snapshots."""
    if any("payload" in getattr(st, "needs", ()) for st in chain[start:]):
        return None
    old_names = done.get("stage_names") or []
    if len(set(old_names)) != len(old_names) or len(old_names) < start:
        return None
    if [st.name for st in chain[:start]] != old_names[:start]:
        return None
    pos = {n: i for i, n in enumerate(old_names)}
    out = TaskOutputs(spec, schema)
    files = done.get("files") or {}

    reg = registry()
    editors = [n for n in old_names[start:] if n in reg and "text" in getattr(reg[n], "edits", ())]
    # the old chain's text snapshots, also those of stages no longer in the chain (text removed by
    # a c4 taken out comes back from them), beside the new schema
    wide = pa.schema(list(schema) + [pa.field(snapshot_column(n), pa.string()) for n in editors
                                     if snapshot_column(n) not in schema.names])
    stored = {k: _read(out, k, files.get(k, False), wide) for k in ("kept", "rejected", "errors")}
    kept, rej, err = stored["kept"], stored["rejected"], stored["errors"]
    if kept is None or rej is None or err is None:
        return None
    t0 = time.perf_counter()
    rej_pos = _stage_positions(rej.column("reject_stage"), pos)
    err_pos = _stage_positions(err.column("error_stage"), pos)
    if rej_pos is None or err_pos is None:
        return None
    # Every document the read produced, in read order, for the batch boundaries.
    docs = pa.concat_tables([kept, rej, err.filter(pa.array(err_pos >= 0))])
    docs = canonical_order(docs)
    ids = docs.column("id").to_pylist()
    if len(set(ids)) != len(ids):
        return None
    rank = {d: r for r, d in enumerate(ids)}
    # Rows decided before ``start`` never reached the editors being undone: their text is as stored.
    out.write("rejected", rej.filter(pa.array(rej_pos < start)))
    out.write("errors", err.filter(pa.array(err_pos < start)))
    # The rows that reached ``start``, as stored (``old``) and as they enter it again (``live``).
    n_old = len(old_names)
    parts = [kept.append_column(_POS, pa.array(np.full(kept.num_rows, n_old, np.int64))),
             rej.filter(pa.array(rej_pos >= start)).append_column(_POS, pa.array(rej_pos[rej_pos >= start])),
             err.filter(pa.array(err_pos >= start)).append_column(_POS, pa.array(err_pos[err_pos >= start]))]
    old_rows = canonical_order(pa.concat_tables(parts))
    old_pos = old_rows.column(_POS).to_numpy()
    old_rows = old_rows.drop_columns([_POS])
    old_rest = [reg[n] for n in old_names[start:] if n in reg]
    if _outputs_of(old_rest) & _outputs_of(chain[:start]) - {"text"}:
        return None  # a later stage rewrote a column an earlier one writes: its value before is not stored
    live = conform(_clear(_restore_text(old_rows, editors), chain[start:] + old_rest, chain[:start]), schema)
    old_rows = conform(old_rows, schema)
    unchanged = unchanged_stages(done, spec.stages, spec.assets)
    if unchanged is not None and not reusable(err, err_pos, start):
        unchanged = None

    old = Ledger.from_dict(done["ledger"])
    ledger = Ledger()
    ledger.records_by_type.update(old.records_by_type)
    for name in ["read"] + [st.name for st in chain]:
        ledger.stage(name)
    for name in ["read"] + old_names[:start]:
        ledger.stages[name] = StageCounts.from_dict(old.stages[name].to_dict())
    batches = np.array([rank[d] // spec.batch_size for d in live.column("id").to_pylist()], np.int64)
    logged: set = set()
    for b in np.unique(batches):
        sel = pa.array(batches == b)
        part = live.filter(sel)
        if unchanged is None:
            out.write("kept", run_stages(part, chain, start, ledger, out, logged))
        else:
            out.write("kept", run_stages_reusing(part, old_rows.filter(sel), old_pos[batches == b], chain,
                                                 start, unchanged, ledger, out, logged))
    if live.num_rows == 0:
        for st in chain[start:]:
            ledger.record(st.name, 0, 0)
    ledger.check()
    remove_file(marker_url(spec), spec.storage_options)  # the old record no longer describes the files
    committed = out.commit()
    n_read = ledger.stages["read"].n_in
    report_progress(spec, n_read, ledger)
    log.info("task %s: reran stages %s from stored rows in %.2f s", spec.task_id,
             ", ".join(st.name for st in chain[start:]) or "(none)", time.perf_counter() - t0)
    return task_record(spec, chain, committed, ledger, retuned_from=start, limited=done.get("limited", False))

