"""The Arrow schemas of a run, in one place.

Every shard of a run (``documents/``, ``rejected/``, ``errors/``) has exactly the same schema:
the base document fields below, then the signal fields of each stage in manifest order (and the
``text_before_<stage>`` snapshot of each stage that edits the text), then the decision fields.
Columns a stage never reached are null, never missing. ``documents/`` drops the snapshots;
dedup's rejections in ``rejected/`` keep them, null, so each folder has one schema.
"""
from __future__ import annotations

import pyarrow as pa

#: Provenance and text of a document. ``id`` is the hex SHA-1 (first 16 bytes) of the WARC-Record-ID
#: (or of ``source:offset`` for text inputs: byte offset of the JSONL line, or Parquet row index):
#: stable across runs, worker counts and task splits. For text inputs ``warc_record_id`` holds the
#: input's own document id and ``warc_offset`` that offset.
BASE_FIELDS: list[pa.Field] = [
    pa.field("id", pa.string(), nullable=False),
    pa.field("url", pa.string()),
    pa.field("host", pa.string()),
    pa.field("source", pa.string()),          # input file/URL the record came from
    pa.field("warc_file", pa.string()),       # base name of the input file
    pa.field("warc_record_id", pa.string()),
    pa.field("warc_date", pa.string()),       # ISO 8601 as written in WARC-Date
    pa.field("warc_offset", pa.int64()),      # byte offset of the record in the (compressed) file
    pa.field("record_type", pa.string()),     # response | conversion | resource | text
    pa.field("http_status", pa.int32()),
    pa.field("content_type", pa.string()),
    pa.field("charset", pa.string()),         # charset used to decode the payload
    pa.field("truncated", pa.bool_()),        # WARC-Truncated present, or payload shorter than HTTP Content-Length
    pa.field("warnings", pa.list_(pa.string())),
    pa.field("payload_bytes", pa.int64()),
    pa.field("metadata", pa.string()),        # text inputs: the input fields kept, as a JSON object
    pa.field("text", pa.string()),
    pa.field("lang", pa.string()),
    pa.field("lang_score", pa.float32()),
]

#: Raw payload travelling between reading and extraction only; never written.
PAYLOAD_FIELD = pa.field("payload", pa.binary())

DECISION_FIELDS: list[pa.Field] = [
    pa.field("reject_reason", pa.string()),
    pa.field("reject_stage", pa.string()),
    pa.field("error_reason", pa.string()),
    pa.field("error_stage", pa.string()),
    pa.field("duplicate_of", pa.string()),    # id of the kept representative (dedup rejections)
]

_BASE_NAMES = {f.name for f in BASE_FIELDS} | {f.name for f in DECISION_FIELDS}


def document_schema(stages) -> pa.Schema:
    """Schema for a stage chain: base fields + each stage's ``fields`` (first declaration wins) + decisions.

    Raises ValueError if two stages declare the same column with different types.
    """
    fields = list(BASE_FIELDS)
    seen = {f.name: f for f in fields}
    for st in stages:
        for f in getattr(st, "fields", []):
            if f.name in seen:
                if seen[f.name].type != f.type:
                    raise ValueError(f"column {f.name!r} declared as {seen[f.name].type} and {f.type}")
                continue
            seen[f.name] = f
            fields.append(f)
        if "text" in getattr(st, "edits", ()):
            snap = snapshot_column(st.name)
            if snap not in seen:
                seen[snap] = pa.field(snap, pa.string())
                fields.append(seen[snap])
    for f in DECISION_FIELDS:
        if f.name not in seen:
            fields.append(f)
    return pa.schema(fields)


#: Prefix of the per-stage text snapshots (phase-1 shards only; never in ``documents/``).
SNAPSHOT_PREFIX = "text_before_"


def snapshot_column(stage_name: str) -> str:
    """``text_before_<stage>``: the text as it entered a stage that edits it (``Stage.edits``),
    null where that stage left it unchanged. Lets a rerun start at any stage from stored rows."""
    return f"{SNAPSHOT_PREFIX}{stage_name}"


def without_snapshots(table: pa.Table) -> pa.Table:
    """``table`` without its text snapshots: they may hold text before PII masking, so the
    published documents (and dedup's rejections) never carry them."""
    drop = [c for c in table.column_names if c.startswith(SNAPSHOT_PREFIX)]
    return table.drop_columns(drop) if drop else table


def null_snapshots(table: pa.Table) -> pa.Table:
    """``table`` with every text snapshot column kept but all null: the same schema as phase 1's
    shards without the text they may hold (dedup's rejections)."""
    for i, name in enumerate(table.column_names):
        if name.startswith(SNAPSHOT_PREFIX):
            f = table.schema.field(i)
            table = table.set_column(i, f, pa.nulls(table.num_rows, type=f.type))
    return table


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Return ``table`` with exactly ``schema``: missing columns as nulls, extra columns dropped, types cast."""
    cols = []
    n = table.num_rows
    have = {name: i for i, name in enumerate(table.column_names)}  # column_names builds a new list per call
    for f in schema:
        if f.name in have:
            col = table.column(have[f.name])
            if col.type != f.type:
                col = col.cast(f.type)
            cols.append(col)
        else:
            cols.append(pa.nulls(n, type=f.type))
    return pa.Table.from_arrays(cols, schema=schema)
