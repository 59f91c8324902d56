"""Stored stage outputs reused row by row when a task reruns from stored rows.

``datapipe.engine.task_retune`` reruns ``chain[start:]`` on the rows that reached stage ``start``. When the
old and new chains name the same stages in the same order, most of that work is already on disk:

* a row whose input to stage ``i`` equals its input in the old run, at a stage whose config is
  unchanged, gets exactly the old outputs of that stage (its signals, text, decision);
* at a stage whose config changed the stage runs on every row; a row whose outputs there equal the
  old ones keeps an unchanged input for the stages after it.

So a threshold change in one stage costs that stage and the stages after it only for the rows
whose path changed. The reuse relies on what the retune already relies on: a stage's output for a
row depends on that row alone (``Stage`` contract). A stage exception errors a whole batch, so it
depends on the batch: when a subset of a batch raises, the stage reruns on the whole batch as a
fresh read would, and a task whose old run had an exception at or after ``start`` is not reused
(``reusable``).
"""
from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from datapipe.engine.ledger import Ledger
from datapipe.engine.task import (
    TaskOutputs,
    edits_text,
    snapshot_if_changed,
    split_rows,
    stage_result,
)
from datapipe.engine.task_plan import stage_version
from datapipe.formats.documents import snapshot_column
from datapipe.stage import ERROR, REJECT, Stage


def _norm(obj):
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def unchanged_stages(done: dict, new_stages: list[dict], new_assets: list | None = None) -> list[bool] | None:
    """Per stage of the new chain: True where the old run had the same stage with the same config,
    the same ``Stage.version`` and the same content digest of its files (``new_assets``,
    ``task_plan.stage_assets``) at the same position (records made before versions were
    recorded count as version 1). None when the chains differ in names or order, or the old
    record does not hold its stage configs (made before they were recorded)."""

    old = done.get("stages")
    if old is None or len(old) != len(new_stages):
        return None
    old, new = _norm(old), _norm(new_stages)
    if [next(iter(s)) for s in old] != [next(iter(s)) for s in new]:
        return None
    old_v = done.get("stage_versions") or [1] * len(old)
    new_v = [stage_version(next(iter(s))) for s in new]
    old_a = done.get("stage_assets") or [None] * len(old)
    new_a = new_assets or [None] * len(new)
    return [a == b and va == vb and xa == xb for a, b, va, vb, xa, xb in zip(old, new, old_v, new_v, old_a, new_a)]


def reusable(errors: pa.Table, err_pos: np.ndarray, start: int) -> bool:
    """False when a row of the old run was errored by a stage exception at or after ``start``."""
    if errors.num_rows == 0:
        return True
    late = errors.filter(pa.array(err_pos >= start)).column("error_reason")
    return not pc.any(pc.fill_null(pc.match_substring(late, ":exception:"), False)).as_py()


def _outputs(st: Stage) -> list[str]:
    cols = [f.name for f in getattr(st, "fields", [])] + [c for c in getattr(st, "edits", ()) if c != "text"]
    if edits_text(st):
        cols.append(snapshot_column(st.name))
    return cols + ["text"]


def old_outputs(old: pa.Table, chain: list[Stage], i: int) -> dict[str, pa.ChunkedArray]:
    """The old run's outputs of ``chain[i]`` for rows that reached it: its signal and edited columns,
    the text after it (the text entering the next stage that changed it, else the stored text) and
    its decision (``reject_reason``/``error_reason`` where it rejected/errored the row)."""
    st = chain[i]
    out = {c: old.column(c) for c in _outputs(st) if c != "text"}
    later = [old.column(snapshot_column(s.name)) for s in chain[i + 1:] if edits_text(s)]
    out["text"] = pc.coalesce(*later, old.column("text")) if later else old.column("text")
    for col, stage_col in ((REJECT, "reject_stage"), (ERROR, "error_stage")):
        here = pc.fill_null(pc.equal(old.column(stage_col), st.name), False)
        out[col] = pc.if_else(here, old.column(col), pa.nulls(old.num_rows, pa.string()))
    return out


def _equal(a: pa.ChunkedArray, b: pa.ChunkedArray) -> np.ndarray:
    """Row-wise equality, nulls equal to nulls (NaN never equal: such a row is simply recomputed)."""
    try:
        eq = pc.fill_null(pc.equal(a, b), False)
        both = pc.and_(pc.is_null(a), pc.is_null(b))
        return np.asarray(pc.or_(eq, both).to_numpy(zero_copy_only=False), bool)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist())], bool)


def _with(table: pa.Table, name: str, arr) -> pa.Table:
    i = table.schema.get_field_index(name)
    if i >= 0:
        return table.set_column(i, table.schema.field(i), arr.cast(table.schema.field(i).type))
    return table.append_column(name, arr)


def _filled(table: pa.Table, old_out: dict) -> pa.Table:
    for name, arr in old_out.items():
        table = _with(table, name, arr)
    return table


def _compute(st: Stage, table: pa.Table) -> pa.Table:
    snap = snapshot_column(st.name) if edits_text(st) else None
    t = _with(table, snap, table.column("text")) if snap else table
    result = st(t)
    if result.num_rows != t.num_rows:
        raise RuntimeError(f"stage {st.name} returned {result.num_rows} rows for {t.num_rows}")
    return snapshot_if_changed(result, snap) if snap else result


def _merge(parts: list[tuple[np.ndarray, pa.Table]], n: int) -> pa.Table:
    """Row-disjoint tables (with their row positions) back into one table in row order."""
    names: list[str] = []
    types: dict[str, pa.DataType] = {}
    for _, t in parts:
        for f in t.schema:
            if f.name not in types:
                names.append(f.name)
                types[f.name] = f.type
    tables = []
    for _, t in parts:
        cols = [t.column(c).cast(types[c]) if c in t.column_names else pa.nulls(t.num_rows, types[c])
                for c in names]
        tables.append(pa.table(cols, names=names))
    order = np.concatenate([idx for idx, _ in parts])
    inverse = np.empty(n, np.int64)
    inverse[order] = np.arange(n)
    return pa.concat_tables(tables).take(pa.array(inverse))


def run_stages_reusing(table: pa.Table, old: pa.Table, old_pos: np.ndarray, chain: list[Stage], start: int,
                       unchanged: list[bool], ledger: Ledger, out: TaskOutputs, logged: set) -> pa.Table:
    """``chain[start:]`` on one batch of live rows, reusing stored outputs (module doc).

    ``table``: the rows as they enter stage ``start``; ``old``: the same rows as stored by the old
    run (row-aligned); ``old_pos``: the old chain position that decided each row (``len(chain)``
    for rows that passed every stage). Returns the rows that passed every stage."""
    same = np.ones(table.num_rows, bool)
    for i in range(start, len(chain)):
        st = chain[i]
        n = table.num_rows
        if n == 0:
            ledger.record(st.name, 0, 0)
            continue
        t0 = time.perf_counter()
        reached = old_pos >= i
        reuse = same & reached if unchanged[i] else np.zeros(n, bool)
        old_out = old_outputs(old, chain, i)
        if reuse.all():
            result = _filled(table, old_out)
        else:
            fresh = np.flatnonzero(~reuse)
            try:
                computed = _compute(st, table.take(pa.array(fresh)))
            except Exception:  # noqa: BLE001 - as a fresh read: the stage on the whole batch
                result, reuse, same = stage_result(st, table, out, logged), np.zeros(n, bool), np.zeros(n, bool)
            else:
                kept_idx = np.flatnonzero(reuse)
                sub = {k: v.take(pa.array(kept_idx)) for k, v in old_out.items()}
                result = _merge([(fresh, computed), (kept_idx, _filled(table.take(pa.array(kept_idx)), sub))], n)
        if unchanged[i]:
            same &= reuse
        else:
            for col, arr in old_out.items():
                got = result.column(col) if col in result.column_names else pa.nulls(n, arr.type)
                same &= _equal(got.cast(arr.type), arr)
            same &= reached
        live = np.ones(n, bool)
        for col in (REJECT, ERROR):
            if col in result.column_names:
                live &= np.asarray(pc.is_null(result.column(col)).to_numpy(zero_copy_only=False), bool)
        table = split_rows(result, st.name, ledger, out, time.perf_counter() - t0)
        keep = pa.array(live)
        old, old_pos, same = old.filter(keep), old_pos[live], same[live]
    return table
