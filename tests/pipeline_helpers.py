"""Helpers that run real pipeline code paths on small inputs (no special cases per file)."""
from __future__ import annotations

import pyarrow as pa

from datapipe.engine.task import rows_to_table
from datapipe.formats.documents import PAYLOAD_FIELD, document_schema
from datapipe.io.readers import read_input
from datapipe.stages.extract import Extract, ExtractConfig


def read_items(path):
    return list(read_input(str(path)))


def extract_rows(rows: list[dict], **cfg) -> pa.Table:
    """Run the extract stage (sandboxed, as in the pipeline) on reader rows."""
    st = Extract(ExtractConfig(**cfg))
    schema = pa.schema(list(document_schema([st])) + [PAYLOAD_FIELD])
    return st(rows_to_table(rows, schema))


def extract_html(payload: bytes, http_charset: str | None = None, **cfg) -> dict:
    row = {"id": "x", "record_type": "response", "payload": payload, "charset": http_charset}
    return extract_rows([row], **cfg).to_pylist()[0]
