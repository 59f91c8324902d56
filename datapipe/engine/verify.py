"""The end-of-run invariant, checked from the files themselves (not from markers).

After every run: rows in ``documents/`` equal the ledger's final kept; no record (id, source,
offset) is in both ``documents/`` and a rejected dataset, and none repeats in ``documents/``;
``documents/`` holds nothing but this run's shards and no rejected dataset a temporary file; the
rows phase 1 stored (``_filtered/``, ``rejected/<task>``, ``errors/<task>``) equal what its ledger
says it read as documents or errors; every documents transform conserves its rows (rows read ==
rows written + rows in its rejected datasets, per the phase's declarations); and every phase's own
``verify`` hook holds (e.g. the token index's ``total_documents`` equals the rows in its shards).
A violation raises ``InvariantError`` naming the file or count (``datapipe run`` exits 3).
"""
from __future__ import annotations

from collections.abc import Sequence

import pyarrow.parquet as pq

from datapipe.engine.ledger import InvariantError, Ledger
from datapipe.engine.task import KINDS
from datapipe.io.parquet import fs_and_path
from datapipe.phase import DOCUMENTS


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
               transforms: Sequence[tuple] = (), checks: Sequence[tuple] = ()) -> dict:
    """Check the invariant (module doc); return the counts checked. Raises InvariantError.

    ``transforms``: ``[(phase class, folder read, folder written)]`` of the documents transforms
    that ran, in order (``datapipe.phase.documents_chain``); ``checks``: ``[(phase, ctx)]`` whose
    ``verify(ctx)`` hooks run last."""
    fs, root = fs_and_path(output, storage_options)
    root = root.rstrip("/")
    ids = sorted(r["task_id"] for r in task_records)

    def present(rels) -> list[str]:
        return [p for p in (f"{root}/{r}" for r in rels) if fs.exists(p)]

    def per_task(folder: str) -> list[str]:
        return present(f"{folder}/{t}.parquet" for t in ids)

    docs = per_task(DOCUMENTS.folder)
    # Any other file (a shard of no input, a killed writer's *.tmp-*) would be read by whoever
    # globs the published folder.
    extra = sorted(set(fs.glob(f"{root}/{DOCUMENTS.folder}/*")) - set(docs))
    if extra:
        raise InvariantError(f"{DOCUMENTS.folder}/ holds {len(extra)} file(s) of no input of this run (a stale "
                             f"shard or a killed writer's temporary file), e.g. {extra[0]}")
    removed: list[tuple] = []    # (phase class, dataset, files) of every transform's rejected datasets
    for cls, _src, _dst in transforms:
        for ds in cls.rejected():
            temps = sorted(fs.glob(f"{root}/{ds.glob}.tmp-*"))
            if temps:
                raise InvariantError(f"{ds.folder}/ holds {len(temps)} temporary file(s) of {cls.name}, "
                                     f"e.g. {temps[0]}")
            removed.append((cls, ds, present(ds.file(t) for t in ids)))
    n_docs = _rows(fs, docs)
    if n_docs != ledger.kept:
        raise InvariantError(f"{DOCUMENTS.folder}/ holds {n_docs} rows but the ledger's final kept is {ledger.kept}")
    doc_ids = _ids(fs, docs)
    if len(set(doc_ids)) != len(doc_ids):
        raise InvariantError(f"{DOCUMENTS.folder}/ repeats {len(doc_ids) - len(set(doc_ids))} record(s)")
    rejected = per_task(KINDS["rejected"]) + [p for _, _, files in removed for p in files]
    both = set(doc_ids) & set(_ids(fs, rejected))
    if both:
        raise InvariantError(f"{len(both)} record(s) are both kept and rejected, e.g. id {sorted(both)[0][0]}")
    for r in task_records:
        t, st = r["task_id"], r["ledger"]["stages"]["read"]
        stored = present(f"{KINDS[k]}/{t}.parquet" for k in ("kept", "rejected", "errors"))
        want = st["in"] - sum(st["rejected"].values())  # non-document records are counted, not stored
        got = _rows(fs, stored)
        if got != want:
            raise InvariantError(f"task {t} ({r['input']}): its shards hold {got} rows, its ledger says {want} "
                                 "documents and read errors")
    out = {"documents": n_docs}
    for cls, src, dst in transforms:
        n_src, n_dst = _rows(fs, per_task(src)), _rows(fs, per_task(dst))
        mine = [(ds, files) for c, ds, files in removed if c is cls]
        n_rej = sum(_rows(fs, files) for _, files in mine)
        if n_src != n_dst + n_rej:
            where = " + ".join([f"{dst}/"] + [ds.glob for ds, _ in mine])
            raise InvariantError(f"{src}/ holds {n_src} rows but {where} hold {n_dst + n_rej} ({cls.name})")
        for ds, files in mine:
            out[ds.name] = _rows(fs, files)
    for phase, ctx in checks:
        out.update(phase.verify(ctx))
    return out
