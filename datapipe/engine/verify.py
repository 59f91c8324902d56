"""The end-of-run invariant, checked from the files themselves (not from markers).

After every run: rows in ``documents/`` equal the ledger's final kept; no record (id, source, offset) is in both
``documents/`` and ``rejected/``, and none repeats in ``documents/``; ``documents/`` holds nothing but
this run's shards and ``rejected/dedup-*`` no temporary file; the rows phase 1 stored
(``_filtered/``, ``rejected/<task>``, ``errors/<task>``) equal what its ledger says it read as
documents or errors; dedup's outputs conserve its sources; and the token index's
``total_documents`` equals the rows in its shards. A violation raises ``InvariantError`` naming
the file or count (``datapipe run`` exits 3).
"""
from __future__ import annotations

import pyarrow.parquet as pq

from datapipe.engine.ledger import Ledger, LedgerError
from datapipe.io.parquet import fs_and_path, read_json


class InvariantError(LedgerError):
    """The run's files disagree with its ledger or with each other."""


def _rows(fs, paths: list[str]) -> int:
    return sum(pq.ParquetFile(fs.open(p, "rb")).metadata.num_rows for p in paths)


def _ids(fs, paths: list[str]) -> list[tuple]:
    """Record identities ``(id, source, warc_offset)``: ``id`` alone repeats when two inputs hold
    the same WARC-Record-ID (copied files; field cases do this)."""
    out: list[tuple] = []
    for p in paths:
        with fs.open(p, "rb") as fh:
            t = pq.read_table(fh, columns=["id", "source", "warc_offset"])
        out += list(zip(*(t.column(c).to_pylist() for c in ("id", "source", "warc_offset"))))
    return out


def verify_run(output: str, storage_options: dict | None, ledger: Ledger, task_records: list[dict],
               tokens_dir: str | None = None) -> dict:
    """Check the invariant (module doc); return the counts checked. Raises InvariantError."""
    fs, root = fs_and_path(output, storage_options)
    root = root.rstrip("/")
    ids = sorted(r["task_id"] for r in task_records)

    def present(folder: str, prefix: str = "") -> list[str]:
        return [p for p in (f"{root}/{folder}/{prefix}{t}.parquet" for t in ids) if fs.exists(p)]

    docs = present("documents")
    # Any other file (a shard of no input, a killed writer's *.tmp-*) would be read by whoever
    # globs the published folder.
    extra = sorted(set(fs.glob(f"{root}/documents/*")) - set(docs))
    if extra:
        raise InvariantError(f"documents/ holds {len(extra)} file(s) of no input of this run (a stale shard or "
                             f"a killed writer's temporary file), e.g. {extra[0]}")
    temps = sorted(fs.glob(f"{root}/rejected/dedup-*.tmp-*"))
    if temps:
        raise InvariantError(f"rejected/ holds {len(temps)} temporary file(s) of dedup, e.g. {temps[0]}")
    n_docs = _rows(fs, docs)
    if n_docs != ledger.kept:
        raise InvariantError(f"documents/ holds {n_docs} rows but the ledger's final kept is {ledger.kept}")
    doc_ids = _ids(fs, docs)
    if len(set(doc_ids)) != len(doc_ids):
        raise InvariantError(f"documents/ repeats {len(doc_ids) - len(set(doc_ids))} record(s)")
    rejected = present("rejected") + present("rejected", "dedup-")
    both = set(doc_ids) & set(_ids(fs, rejected))
    if both:
        raise InvariantError(f"{len(both)} record(s) are both kept and rejected, e.g. id {sorted(both)[0][0]}")
    for r in task_records:
        t, st = r["task_id"], r["ledger"]["stages"]["read"]
        stored = [p for p in (f"{root}/{f}/{t}.parquet" for f in ("_filtered", "rejected", "errors")) if fs.exists(p)]
        want = st["in"] - sum(st["rejected"].values())  # non-document records are counted, not stored
        got = _rows(fs, stored)
        if got != want:
            raise InvariantError(f"task {t} ({r['input']}): its shards hold {got} rows, its ledger says {want} "
                                 "documents and read errors")
    n_src = _rows(fs, present("_filtered"))
    n_dedup = _rows(fs, present("rejected", "dedup-"))
    if n_src != n_docs + n_dedup:
        raise InvariantError(f"_filtered/ holds {n_src} rows but documents/ + rejected/dedup-* hold {n_docs + n_dedup}")
    out = {"documents": n_docs, "dedup_rejected": n_dedup}
    if tokens_dir:
        index = read_json(f"{root}/{tokens_dir}/index.json", storage_options)
        if index is not None:
            shards = [f"{root}/{tokens_dir}/{s['path']}" for s in index["shards"]]
            n_tok = _rows(fs, shards)
            if n_tok != index["total_documents"]:
                raise InvariantError(f"{tokens_dir}/index.json says {index['total_documents']} documents, "
                                     f"its shards hold {n_tok}")
            listed = set(shards)
            others = sorted(set(fs.glob(f"{root}/{tokens_dir}/*.parquet")) - listed
                            | set(fs.glob(f"{root}/{tokens_dir}/*.tmp-*")))   # a killed writer's temp
            if others:
                raise InvariantError(f"{tokens_dir}/ holds shard(s) or temporary file(s) its index does not list, "
                                     f"e.g. {others[0]}")
            out["token_rows"] = n_tok
    return out
