"""Read a finished run: the funnel, samples per reason, filters, one document (what-if: ``datapipe.inspect.what_if``).

Everything here returns plain Python data (what ``--json`` prints); ``inspect_cli`` renders it with
rich and ``report`` plots it. Shards are queried with DuckDB over the Parquet files, selecting only
the columns a question needs, so ``text`` is read only when asked for (or for one document).
"""
from __future__ import annotations

import io
import json
import os
import re
import zlib
from dataclasses import dataclass, field
from functools import cached_property

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from datapipe.engine.ledger import Ledger
from datapipe.inspect.errors import InspectError
from datapipe.inspect.rules import stage_signal_columns, thresholds
from datapipe.io.arc import parse_records
from datapipe.io.parquet import fs_and_path, join, read_json
from datapipe.io.readers import detect_format
from datapipe.io.warc import finish_record, iter_records_tolerant
from datapipe.manifest import yaml_guard
from datapipe.manifest.suggest import did_you_mean
from datapipe.stage import registry
from datapipe.stages.lib.charset import decode_html

#: Shard folders of a run and what ``--kept`` / ``--rejected`` / errors query.
KINDS = {"kept": "documents", "rejected": "rejected", "errors": "errors"}
#: Columns never shown as "signals": provenance, text and decisions.
NOT_SIGNALS = {"id", "url", "host", "source", "warc_file", "warc_record_id", "warc_date", "warc_offset",
               "record_type", "http_status", "content_type", "charset", "truncated", "warnings",
               "payload_bytes", "text", "reject_reason", "reject_stage", "error_reason", "error_stage",
               "duplicate_of"}


class NotARunError(ValueError):
    """The directory is not the output of ``datapipe run``."""



@dataclass
class Run:
    """A finished run directory (local path or fsspec URL). Use ``Run.open``."""

    url: str
    ledger_dict: dict
    storage_options: dict = field(default_factory=dict)

    @classmethod
    def open(cls, url: str, storage_options: dict | None = None) -> "Run":
        """Open ``url``; raise NotARunError unless it holds a ``ledger.json`` written by a run."""
        so = storage_options or {}
        try:
            led = read_json(join(str(url), "ledger.json"), so)
        except (OSError, ValueError) as e:
            raise NotARunError(f"{url}: cannot read ledger.json ({e})") from e
        if not isinstance(led, dict) or "stages" not in led:
            raise NotARunError(f"{url} is not a datapipe run: no ledger.json with a funnel "
                               f"(expected the --output directory of `datapipe run`)")
        return cls(str(url).rstrip("/"), led, so)

    @cached_property
    def ledger(self) -> Ledger:
        return Ledger.from_dict(self.ledger_dict)

    def files(self, kind: str) -> list[str]:
        """Parquet shard paths of ``kind`` (kept / rejected / errors), sorted."""
        fs, root = fs_and_path(self.url, self.storage_options)
        found = sorted(fs.glob(f"{root}/{KINDS[kind]}/*.parquet"))
        return [p if fs.protocol in ("file", "local") or "://" in p else f"{_proto(fs)}://{p}" for p in found]

    def schema(self, kind: str) -> pa.Schema | None:
        """Union of the shard schemas of ``kind`` (None when there are no shards)."""
        fs, _ = fs_and_path(self.url, self.storage_options)
        schemas = [pq.read_schema(_local(p), filesystem=None if _is_local(p) else fs) for p in self.files(kind)]
        return pa.unify_schemas(schemas) if schemas else None

    def columns(self, kind: str) -> list[str]:
        s = self.schema(kind)
        return list(s.names) if s is not None else []

    def connect(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection that can read the run's shard folders and nothing else.

        ``--where`` is user SQL: without the lock it could read any file the user can
        (``read_text('/etc/passwd')``), write files (``COPY ... TO``), attach databases or install
        extensions. ``allowed_directories`` names the shard folders, ``enable_external_access =
        false`` shuts every other file, network and extension access, and ``lock_configuration``
        keeps the query from turning it back on (DuckDB's own sandboxing settings).
        """
        con = duckdb.connect()
        fs, root = fs_and_path(self.url, self.storage_options)
        if _is_local(self.url):
            dirs = [os.path.join(os.path.realpath(root), d) + "/" for d in KINDS.values()]
            dirs += [os.path.join(os.path.abspath(root), d) + "/" for d in KINDS.values()]
        else:  # remote runs: DuckDB reads through fsspec and spells a path either way
            con.register_filesystem(fs)
            proto = _proto(fs)
            dirs = [f"{proto}://{root.lstrip('/')}/{d}/" for d in KINDS.values()]
            dirs += [f"{proto}:///{root.lstrip('/')}/{d}/" for d in KINDS.values()]
        con.execute(f"SET allowed_directories = [{', '.join(_sql_str(d) for d in dict.fromkeys(dirs))}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        return con

    def source(self, kind: str) -> str:
        """A DuckDB table expression over the shards of ``kind``, or raise if there are none."""
        files = self.files(kind)
        if not files:
            raise InspectError(f"{self.url} has no {KINDS[kind]}/ shards")
        lst = ", ".join(_sql_str(f) for f in files)
        return f"read_parquet([{lst}], union_by_name=true, filename=true, file_row_number=true)"

    def query(self, sql: str, params=None) -> pa.Table:
        return self.connect().sql(sql, params=params or None).to_arrow_table()

    def stage_configs(self) -> list[tuple[str, dict]]:
        """``[(stage name, config dict)]`` as run: from ledger.json, else from the manifest it names."""
        stages = self.ledger_dict.get("stage_configs")
        if stages is None and self.ledger_dict.get("manifest"):
            try:
                with open(self.ledger_dict["manifest"]) as fh:
                    stages = (yaml_guard.safe_load(fh.read()) or {}).get("stages")
            except (OSError, ValueError, yaml.YAMLError):  # gone, or no longer a manifest (YamlSizeError too)
                stages = None
        return [next(iter(s.items())) for s in (stages or [])]


def _proto(fs) -> str:
    return fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol


def _is_local(p: str) -> bool:
    return "://" not in p or p.startswith("file://")


def _local(p: str) -> str:
    return p[7:] if p.startswith("file://") else p


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# ------------------------------------------------------------------------------------ funnel

def funnel(run: Run, top: int = 20) -> dict:
    """The run's funnel from the ledger, with bytes per reason and distributions from the shards.

    ``stages``: per stage ``in``, ``kept``, ``rejected``/``errored`` as lists of
    ``{reason, count, share (of the stage's in), bytes (payload bytes of the stored rows; None for
    reasons without rows, e.g. non-documents)}``. ``languages``/``hosts``: kept documents by
    ``lang``/``host``. ``tokens``: from ``*/index.json`` of the tokenize phase, when present.
    """
    led = run.ledger
    bytes_by = _bytes_by_reason(run)
    stages = []
    for name, s in led.stages.items():
        def rows(counter, kind):
            return [{"reason": r, "count": n, "share": n / s.n_in if s.n_in else 0.0,
                     "bytes": bytes_by.get((kind, r))} for r, n in sorted(counter.items(), key=lambda kv: -kv[1])]
        stages.append({"stage": name, "in": s.n_in, "kept": s.kept, "rejected": rows(s.rejected, "rejected"),
                       "errored": rows(s.errored, "errors"), "seconds": s.seconds})
    out = {"run": run.url, "records_by_type": dict(led.records_by_type), "stages": stages,
           "totals": led.totals(), "kept": led.kept}
    out["languages"] = _distribution(run, "lang", top)
    out["hosts"] = _distribution(run, "host", top)
    out["tokens"] = tokens_summary(run)
    return out


def _bytes_by_reason(run: Run) -> dict:
    res = {}
    for kind, col in (("rejected", "reject_reason"), ("errors", "error_reason")):
        if not run.files(kind) or "payload_bytes" not in run.columns(kind):
            continue
        t = run.query(f"SELECT {col} AS r, sum(payload_bytes)::BIGINT AS b FROM {run.source(kind)} GROUP BY 1")
        for r, b in zip(t.column("r").to_pylist(), t.column("b").to_pylist()):
            res[(kind, r)] = b
    return res


def _distribution(run: Run, column: str, top: int) -> list[dict]:
    if not run.files("kept") or column not in run.columns("kept"):
        return []
    t = run.query(f"SELECT {ident(column)} AS v, count(*) AS n FROM {run.source('kept')} "
                  f"GROUP BY 1 ORDER BY n DESC, v LIMIT {int(top)}")
    total = run.ledger.kept or 1
    return [{column: v, "docs": n, "share": n / total}
            for v, n in zip(t.column("v").to_pylist(), t.column("n").to_pylist())]


def tokens_summary(run: Run) -> dict | None:
    """``tokens_per_domain`` and mixture targets from the tokenize phase's ``index.json`` (or None)."""
    fs, root = fs_and_path(run.url, run.storage_options)
    for p in sorted(fs.glob(f"{root}/*/index.json")):
        with fs.open(p, "r") as fh:
            idx = json.load(fh)
        if "tokens_per_domain" in idx:
            doms = (idx.get("mixture") or {}).get("domains", {})
            return {"index": p, "total_tokens": idx.get("total_tokens"),
                    "tokens_per_domain": idx["tokens_per_domain"],
                    "target_tokens": {d: v.get("target_tokens") for d, v in doms.items()}}
    return None


# ------------------------------------------------------------------------------- questions

def _kind_of_reason(run: Run, reason: str) -> tuple[str, str]:
    for name, s in run.ledger.stages.items():
        if reason in s.rejected:
            if reason.startswith("non_document:"):
                raise InspectError(f"{reason!r} records are counted in the ledger but not stored (not documents)")
            return "rejected", "reject_reason"
        if reason in s.errored:
            return "errors", "error_reason"
    known = sorted({r for s in run.ledger.stages.values() for r in list(s.rejected) + list(s.errored)})

    raise InspectError(f"no documents with reason {reason!r} in this run{did_you_mean(reason, known)}; "
                       f"reasons: {', '.join(known) or 'none'}")


def sample_reason(run: Run, reason: str, n: int = 5, seed: int = 0, text_lines: int = 5) -> dict:
    """``n`` rejected (or errored) documents of ``reason``, drawn with ``seed`` (same seed, same rows).

    Each sample has provenance, its stage's signal values and thresholds (``explain``) and the first
    ``text_lines`` lines of its text. Only the ``id`` column of every row is read to draw.
    """
    kind, col = _kind_of_reason(run, reason)
    src = run.source(kind)
    ids = run.query(f"SELECT id FROM {src} WHERE {col} = ? ORDER BY id", [reason]).column("id").to_pylist()
    rng = np.random.default_rng(seed)
    pick = sorted(rng.choice(len(ids), size=min(n, len(ids)), replace=False).tolist()) if ids else []
    chosen = [ids[i] for i in pick]
    cols = [c for c in run.columns(kind) if c not in ("warnings",)]
    t = run.query(f"SELECT {', '.join(map(ident, cols))} FROM {src} WHERE id IN (SELECT unnest(?))", [chosen])
    by_id = {r["id"]: r for r in t.to_pylist()}
    cfgs = dict(run.stage_configs())
    samples = []
    for i in chosen:
        r = by_id[i]
        stage = r.get("reject_stage") or r.get("error_stage")
        lines = (r.pop("text", None) or "").splitlines()
        samples.append({"id": i, "url": r.get("url"), "lang": r.get("lang"), "lang_score": r.get("lang_score"),
                        "stage": stage, "reason": reason,
                        "explain": explain(stage, reason, r, cfgs.get(stage)),
                        "text_head": lines[:text_lines], "text_lines": len(lines)})
    return {"reason": reason, "kind": kind, "total": len(ids), "seed": seed, "samples": samples}


def where(run: Run, kind: str, expr: str, limit: int = 20, columns: list[str] | None = None,
          with_text: bool = False) -> dict:
    """Documents of ``kind`` (kept / rejected / errors) matching a DuckDB SQL boolean ``expr``.

    Returns the matching count and the first ``limit`` rows (by id) with ``columns`` (default: id,
    url, lang, lang_score, the decision columns and every column named in ``expr``).
    """
    avail = run.columns(kind)
    if columns is None:
        named = [c for c in avail if re.search(rf"(?<![\w.]){re.escape(c)}(?!\w)", expr)]
        base = ["id", "url", "lang", "lang_score"] + (["reject_stage", "reject_reason"] if kind == "rejected" else
                                                      ["error_stage", "error_reason"] if kind == "errors" else [])
        columns = list(dict.fromkeys(base + named))
    if with_text and "text" not in columns:
        columns.append("text")
    if not with_text:
        columns = [c for c in columns if c != "text"]
    bad = [c for c in columns if c not in avail]
    if bad:
        raise InspectError(f"unknown column(s) {', '.join(bad)}; columns: {', '.join(avail)}")
    src = run.source(kind)
    try:
        con = run.connect()
        total = con.sql(f"SELECT count(*) FROM {src} WHERE ({expr})").fetchall()[0][0]
        t = con.sql(f"SELECT {', '.join(map(ident, columns))} FROM {src} WHERE ({expr}) "
                        f"ORDER BY id LIMIT {int(limit)}").to_arrow_table()
    except duckdb.Error as e:
        hint = (" (strings take single quotes in SQL: lang = 'de')"
                if isinstance(e, duckdb.BinderException) and '"' in expr else "")
        raise InspectError(f"bad --where expression {expr!r}: {str(e).splitlines()[0]}{hint}") from e
    return {"kind": kind, "where": expr, "count": total, "columns": columns, "rows": t.to_pylist()}


def explain(stage: str | None, reason: str | None, row: dict, config: dict | None) -> dict:
    """The signal values a stage decided on and the thresholds of its config, for one row."""

    if not stage or stage not in registry():   # read errors, rejections by a phase: no stage signals
        return {}
    cols = stage_signal_columns(stage, reason)
    return {"signals": {c: row.get(c) for c in cols if c in row}, "thresholds": thresholds(stage, reason, config)}


# ---------------------------------------------------------------------------------- one doc

def document(run: Run, doc_id: str) -> dict:
    """Everything about one document: provenance, signals, fate, near-dup cluster, raw location;
    ``occurrences``: every row with this id (``_occurrences``), the first of which is detailed."""
    found = _occurrences(run, doc_id)
    if not found:
        raise InspectError(f"no document with id {doc_id!r} in {run.url}")
    kind, fn, rn, _ = found[0]
    row = run.query(f"SELECT * EXCLUDE (file_row_number) FROM "
                    f"read_parquet({_sql_str(fn)}, file_row_number=true) WHERE file_row_number = ?",
                    [rn]).to_pylist()[0]
    if kind == "kept":
        fate = {"fate": "kept"}
    elif kind == "rejected":
        fate = {"fate": "rejected", "stage": row.get("reject_stage"), "reason": row.get("reject_reason")}
    else:
        fate = {"fate": "errored", "stage": row.get("error_stage"), "reason": row.get("error_reason")}
    if fate.get("stage"):
        fate["explain"] = explain(fate["stage"], fate["reason"], row, dict(run.stage_configs()).get(fate["stage"]))
    prov = {k: row.get(k) for k in ("url", "host", "source", "warc_file", "warc_record_id", "warc_date",
                                    "warc_offset", "record_type", "http_status", "content_type", "charset",
                                    "truncated", "warnings", "payload_bytes")}
    signals = {k: v for k, v in row.items() if k not in NOT_SIGNALS}
    return {"id": doc_id, "shard": fn, "provenance": prov, "signals": signals, "fate": fate,
            "occurrences": [o for *_, o in found],
            "cluster": near_dup_cluster(run, doc_id, row.get("duplicate_of")), "text": row.get("text"),
            "raw_location": {"file": row.get("source") or row.get("warc_file"), "offset": row.get("warc_offset")}}


def _occurrences(run: Run, doc_id: str) -> list[tuple[str, str, int, dict]]:
    """Every row holding ``doc_id``, kept, rejected or errored (an id repeats where two inputs hold
    the same WARC-Record-ID, e.g. a copied file): ``{fate, stage, reason, source, offset}`` each,
    ordered by fate, source and offset, each with where it is stored: ``(kind, shard file, row
    number, occurrence)``."""
    out = []
    for kind, fate, cols in (("kept", "kept", ()), ("rejected", "rejected", ("reject_stage", "reject_reason")),
                             ("errors", "errored", ("error_stage", "error_reason"))):
        if not run.files(kind):
            continue
        have = set(run.columns(kind))
        sel = [c if c in have else f"NULL AS {c}" for c in ("source", "warc_offset", *cols)]
        for r in run.query(f"SELECT filename, file_row_number, {', '.join(sel)} FROM {run.source(kind)} "
                           "WHERE id = ? ORDER BY source, warc_offset, filename, file_row_number", [doc_id]).to_pylist():
            out.append((kind, r["filename"], r["file_row_number"], {
                "fate": fate, "stage": r.get(cols[0]) if cols else None, "reason": r.get(cols[1]) if cols else None,
                "source": r["source"], "offset": r["warc_offset"]}))
    return out


def near_dup_cluster(run: Run, doc_id: str, duplicate_of: str | None) -> dict | None:
    """``{representative, members}`` when dedup recorded ``duplicate_of`` for this document's cluster."""
    if "duplicate_of" not in run.columns("rejected"):
        return None
    rep = duplicate_of or doc_id
    members = run.query(f"SELECT id FROM {run.source('rejected')} WHERE duplicate_of = ? ORDER BY id",
                        [rep]).column("id").to_pylist()
    if not members:
        return None
    return {"representative": rep, "members": [rep] + members, "size": len(members) + 1}


def raw_record(source: str, offset: int, storage_options: dict | None = None):
    """The WARC (or ARC) record at byte ``offset`` of ``source`` (a ``datapipe.io.warc_record.WarcRecord``).

    For gzip files (one member per record, as Common Crawl writes them) one member is read from the
    offset; for plain WARC the record is parsed from the offset on.
    """

    fs, path = fs_and_path(source, storage_options)
    with fs.open(path, "rb") as fh:
        fh.seek(offset)
        head = fh.read(2)
        fh.seek(offset)
        if head == b"\x1f\x8b":
            d = zlib.decompressobj(31)
            member = bytearray()
            while not d.eof:
                chunk = fh.read(1 << 16)
                if not chunk:
                    break
                member += d.decompress(chunk)
            stream = io.BytesIO(bytes(member))  # the member holds one plain WARC record
        else:
            stream = io.BytesIO(fh.read())
    if detect_format(source) == "arc":

        rec = next(parse_records(stream, lambda p: offset + p), None)
    else:
        rec = next(iter_records_tolerant(stream), None)
    if rec is None:
        raise InspectError(f"no WARC record at {source}:{offset}")
    return finish_record(rec)


def raw_html(source: str, offset: int, storage_options: dict | None = None) -> dict:
    """``{headers, http_status, html}`` of the record at ``source:offset``, decoded like extraction does."""

    rec = raw_record(source, offset, storage_options)
    body = rec.http.body if rec.http is not None else rec.block
    cs = None
    if rec.http is not None:
        m = re.search(r"charset=([\w.:-]+)", rec.http.headers.get("content-type", ""), re.I)
        cs = m.group(1) if m else None
    html, _ = decode_html(body, cs)
    return {"warc_record_id": rec.record_id, "url": rec.url, "error": rec.error,
            "http_status": rec.http.status if rec.http else None, "html": html}
