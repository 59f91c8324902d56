"""One stage on plain data, outside a run: ``datapipe.stages.get(name, **cfg).apply(texts)``.

The stage's own ``__call__`` runs, on a table built like the runner builds one (the document
schema of ``datapipe.formats.documents``), so signals and decisions are those of a pipeline run on the same
text. Columns a stage reads besides the text (its class's ``reads``) are filled in first:
``lang``/``lang_score`` by the ``langid`` stage (default config) when not given, ``host`` from
``url``. A column that only the input can give (the class's ``requires``: ``url`` for
``url_blocklist``; the raw page for ``extract``) must be passed; the error says so.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from datapipe.api.stage_score import add_aliases
from datapipe.formats.documents import PAYLOAD_FIELD, conform, document_schema
from datapipe.io.items import host_of
from datapipe.stage import ERROR, REJECT, Stage
from datapipe.stages.langid import LangId

#: Where each column comes from in a run.
PROVIDED_BY = {"lang": "the langid stage", "lang_score": "the langid stage", "host": "the url",
               "url": "the input (WARC-Target-URI, or the url field of a text input)",
               "payload": "the input (the raw HTTP body of a WARC response)",
               "record_type": "the reader (response, text, ...)",
               "charset": "the input (the HTTP Content-Type header)"}

_LANGID: dict[str, Stage] = {}


def _as_table(data, raw: bool) -> pa.Table:
    """``data`` as a table: texts (``raw``: pages, str or bytes) -> ``text`` (``payload``)."""
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        return data
    if hasattr(data, "columns") and hasattr(data, "to_dict"):  # a pandas DataFrame
        return pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, (str, bytes)):
        data = [data]
    items = list(data)
    if items and all(isinstance(x, dict) for x in items):
        return pa.Table.from_pylist(items)
    bad = [type(x).__name__ for x in items if x is not None and not isinstance(x, (str, bytes))]
    if bad:
        raise TypeError(f"expected texts (str), a pyarrow Table or rows (dicts); got {bad[0]}")
    if raw:
        return pa.table({"payload": pa.array([x.encode() if isinstance(x, str) else x for x in items], pa.binary())})
    return pa.table({"text": pa.array([x.decode() if isinstance(x, bytes) else x for x in items], pa.string())})


def _set(t: pa.Table, name: str, values, type_=None) -> pa.Table:
    n = t.num_rows
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        values = [values] * n  # one value for every row (lang="en")
    if len(values) != n:
        raise ValueError(f"{name}: {len(values)} values for {n} rows")
    arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(list(values), type_)
    i = t.schema.get_field_index(name)
    return t.set_column(i, name, arr) if i >= 0 else t.append_column(name, arr)


def _present(t: pa.Table, name: str) -> bool:
    return name in t.column_names and t.column(name).null_count < t.num_rows


def default_langid() -> Stage:
    """The ``langid`` stage with its default config, loaded once per process."""
    if "default" not in _LANGID:

        _LANGID["default"] = LangId()
    return _LANGID["default"]


def apply_stage(stage: Stage, data, lang=None, url=None, **columns) -> pa.Table:
    """Run ``stage`` on ``data`` and return its signals and decisions, one row per input, in order.

    ``data``: a list of texts (str; for ``extract``: pages, str or bytes), a ``pyarrow.Table`` or
    pandas DataFrame with a ``text`` (``payload``) column, or a list of row dicts. ``lang``, ``url``
    and any other column (``id``, ``charset``, ...) may be given as a list of the same length or
    one value for all rows.

    Returns a ``pyarrow.Table``: ``id`` (string; the given ids, else "0", "1", ...), the input
    columns ``url``/``host``/``text``/``lang``/``lang_score`` where known (``text`` after the stage,
    for stages that edit it), the stage's signal columns (types of ``stage.fields``),
    ``reject_reason`` and ``error_reason`` (string, null = none), ``kept`` (bool), and the same
    names for every stage (``datapipe.api.stage_score``): ``label`` (string), ``score`` (float64) and
    ``skipped`` (string: why a text was not looked at, e.g. its language; a
    ``SkippedTextWarning`` says how many).

    Raises ValueError when a column the stage cannot do without is missing (the message names
    what provides it in a run), or when lengths differ; TypeError for data of another kind.
    """
    raw = "payload" in getattr(stage, "needs", ())
    t = _as_table(data, raw)
    for name, values in (("lang", lang), ("url", url), *columns.items()):
        if values is not None:
            t = _set(t, name, values)
    if raw and "payload" not in t.column_names:
        raise ValueError(f"{stage.name} reads the raw page ({PROVIDED_BY['payload']}): pass HTML, not extracted text")
    if not raw and "text" not in t.column_names:
        raise ValueError(f"{stage.name} reads a 'text' column; the table has {', '.join(t.column_names)}")
    n = t.num_rows
    if "id" not in t.column_names:
        t = _set(t, "id", [str(i) for i in range(n)], pa.string())
    if raw and not _present(t, "record_type"):
        t = _set(t, "record_type", ["response"] * n, pa.string())
    need = stage.reads
    for col in stage.requires:
        if not _present(t, col):
            raise ValueError(f"{stage.name} decides from '{col}', which comes from {PROVIDED_BY.get(col, 'the input')}: "
                             f"pass {col}=[...]")
    if "host" in need and _present(t, "url") and not _present(t, "host"):

        t = _set(t, "host", [host_of(u) for u in t.column("url").to_pylist()], pa.string())
    if "lang" in need and not _present(t, "lang"):
        t = _with_langid(stage, t)
    schema = document_schema([stage])
    if raw:
        schema = schema.append(PAYLOAD_FIELD)
    stage.ensure_setup()
    out = stage(conform(t, schema))

    return add_aliases(stage, _result(stage, out, given=set(t.column_names)))


def _with_langid(stage: Stage, t: pa.Table) -> pa.Table:
    """``lang``/``lang_score`` as the langid stage computes them (its decisions are not kept)."""
    lid = default_langid()
    try:
        lid.ensure_setup()
    except Exception as e:  # the model is missing or broken: say what would provide lang
        raise ValueError(f"{stage.name} reads 'lang', which {PROVIDED_BY['lang']} computes, and it could not "
                         f"load its model ({e}); pass lang=[...]") from e
    out = lid(conform(t.select(["id", "text"]), document_schema([lid])))
    t = _set(t, "lang", out.column("lang"))
    return _set(t, "lang_score", out.column("lang_score"))


def _result(stage: Stage, out: pa.Table, given: set[str]) -> pa.Table:
    cols = ["id"] + [c for c in ("url", "host", "text", "lang", "lang_score")
                     if c == "text" or c in given or c in stage.edits]
    if "payload" in stage.needs:
        cols += ["charset", "warnings"]
    cols += [f.name for f in stage.fields if f.name not in cols]
    res = out.select(cols)
    n = out.num_rows
    for c in (REJECT, ERROR):
        res = res.append_column(c, out.column(c) if c in out.column_names else pa.nulls(n, pa.string()))
    kept = pc.and_(pc.is_null(res.column(REJECT)), pc.is_null(res.column(ERROR)))
    return res.append_column("kept", kept)
