"""Text documents (JSONL lines, Parquet rows) -> document rows: field mapping, presets, row building.

A *field mapping* says where a document's parts are in an input object (JSONL) or row (Parquet):

* ``text``: the document text (required: an object without it, or with a non-string value, is an
  ``errored`` record ``read:missing_text``);
* ``id``: the input's own document id, kept in the ``warc_record_id`` column;
* ``url``, ``date``: go to ``url`` (and ``host``) and ``warc_date``;
* ``metadata``: the input fields kept, as a JSON object in the ``metadata`` column: a list of
  top-level names, or ``"*"`` for every field except the top-level ones mapped above (which
  have their own columns).

Each of ``text``/``id``/``url``/``date`` is a dotted path (``metadata.url``) or a list of paths
(the first present wins). Named presets give the layouts of common datasets; a manifest may
override single entries (``inputs.fields``).

Row ids: ``id`` = ``doc_id("<source>:<offset>")`` where offset is the byte offset of the line in
the decompressed JSONL stream, or the row index in the Parquet file: unique within a run, stable
across reruns and independent of how the file is split into tasks.
"""
from __future__ import annotations

import json
import os

from datapipe.io.items import ReadItem, doc_id, host_of

FIELD_KEYS = ("text", "id", "url", "date", "metadata")

#: Dataset layouts. dolma: {"id","text","source","added","created","metadata":{..., "url"}};
#: redpajama (v1): {"text","meta":{"url","timestamp",...}}; redpajama_v2: {"raw_content","doc_id",...};
#: fineweb (Parquet): text, id, dump, url, date, file_path, language, language_score, token_count.
PRESETS: dict[str, dict] = {
    "dolma": {"text": "text", "id": "id", "url": ["metadata.url", "url"], "date": ["created", "metadata.date_download"],
              "metadata": "*"},
    "redpajama": {"text": "text", "id": ["meta.id", "id"], "url": ["meta.url", "url"],
                  "date": ["meta.timestamp", "meta.date_download"], "metadata": "*"},
    "redpajama_v2": {"text": "raw_content", "id": "doc_id", "url": ["url", "meta.url"],
                     "date": ["date_download", "meta.date_download"], "metadata": "*"},
    "fineweb": {"text": "text", "id": "id", "url": "url", "date": "date", "metadata": "*"},
}
#: Preset used when the manifest says ``auto``, per input format.
DEFAULT_PRESET = {"jsonl": "dolma", "parquet": "fineweb"}


def resolve_fields(preset: str = "auto", overrides: dict | None = None, fmt: str = "jsonl") -> dict:
    """The field mapping for ``fmt`` (``jsonl``/``parquet``): ``preset`` (``auto`` = per format) + overrides.

    Returns a plain dict with the keys of ``FIELD_KEYS`` (values: path, list of paths, ``"*"``/list
    for metadata, or None). Raises ValueError for an unknown preset or key, or a missing ``text``.
    """
    name = DEFAULT_PRESET.get(fmt, "dolma") if preset == "auto" else preset
    if name not in PRESETS:
        raise ValueError(f"unknown field preset {preset!r}; known: auto, {', '.join(sorted(PRESETS))}")
    bad = set(overrides or {}) - set(FIELD_KEYS)
    if bad:
        raise ValueError(f"unknown field mapping key(s) {sorted(bad)}; known: {', '.join(FIELD_KEYS)}")
    fields = dict(PRESETS[name], **(overrides or {}))
    if not fields.get("text"):
        raise ValueError("the field mapping needs a 'text' field")
    return fields


def get_path(obj, path):
    """Value at a dotted ``path`` (or the first present of a list of paths) in nested dicts; None if absent."""
    if path is None:
        return None
    for p in ([path] if isinstance(path, str) else path):
        cur = obj
        for part in p.split("."):
            if not isinstance(cur, dict) or part not in cur:
                cur = None
                break
            cur = cur[part]
        if cur is not None:
            return cur
    return None


def top_level(fields: dict) -> set[str] | None:
    """Top-level names a mapping reads (None = all, when metadata is ``"*"``): the Parquet columns to load."""
    if fields.get("metadata") == "*":
        return None
    names = set(fields.get("metadata") or [])
    for key in ("text", "id", "url", "date"):
        v = fields.get(key)
        for p in ([v] if isinstance(v, str) else v or []):
            names.add(p.split(".", 1)[0])
    return names


def _top_names(path) -> set[str]:
    """The top-level field names among ``path`` (a path or list of paths); nested ones are not."""
    return {p for p in ([path] if isinstance(path, str) else path or []) if "." not in p}


def base_row(source: str, offset: int, nbytes: int | None = None) -> dict:
    """Provenance fields of the text record at ``offset`` (byte offset or row index) of ``source``."""
    return {"id": doc_id(f"{source}:{offset}"), "source": source,
            "warc_file": os.path.basename(source.rstrip("/")), "warc_offset": offset,
            "record_type": "text", "payload_bytes": nbytes}


def text_item(obj, fields: dict, source: str, offset: int, nbytes: int) -> ReadItem:
    """One input object -> a ``ReadItem`` (``record_type="text"``, so ``extract`` passes it through).

    ``offset``: byte offset of the line (JSONL) or row index (Parquet); ``nbytes``: the object's
    size in the input. An errored item's ``detail`` says why; the caller prefixes where.
    """
    row = base_row(source, offset, nbytes)
    if not isinstance(obj, dict):
        return ReadItem(row, "errored", "read:not_an_object", f"a JSON {type(obj).__name__}, not an object")
    text = get_path(obj, fields["text"])
    if not isinstance(text, str):
        got = "absent" if text is None else f"a {type(text).__name__}"
        return ReadItem(row, "errored", "read:missing_text", f"text field {fields['text']!r} is {got}")
    url = get_path(obj, fields.get("url"))
    url = url if isinstance(url, str) else None
    rid, date = get_path(obj, fields.get("id")), get_path(obj, fields.get("date"))
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, (str, int))):
        # an object or list id was stored as its Python repr: no id anyone can look up
        return ReadItem(row, "errored", "read:bad_id",
                        f"id field {fields.get('id')!r} is a {type(rid).__name__}, not a string or integer")
    keep = fields.get("metadata")
    if keep == "*":
        skip = set().union(*(_top_names(fields.get(k)) for k in ("text", "id", "url", "date")))
        meta = {k: v for k, v in obj.items() if k not in skip}
    else:
        meta = {k: obj[k] for k in keep or [] if k in obj}
    row.update(text=text, url=url, host=host_of(url), content_type="text/plain",
               warc_record_id=None if rid is None else str(rid), warc_date=None if date is None else str(date),
               metadata=json.dumps(meta, ensure_ascii=False, default=str) if meta else None)
    return ReadItem(row)
