"""``datapipe.dedup``: the pipeline's global dedup on a few documents, in this process, no cluster.

It runs the phase's own code (``stages.phases.dedup.phase.run_dedup``: exact, lines, MinHash LSH
with exact Jaccard verification, connected components, representatives) on one shard written
to a temporary run directory, with a client that runs each Dask task in turn here. The
signatures come from the ``dedup_signatures`` stage with the config's settings, so the kept set
and the clusters are those a ``datapipe run`` with the same ``dedup:`` section gives for the same
documents (ids, URLs and dates included: the survivor of a cluster follows ``dedup.survivor``,
by default the canonical URL, then the shortest URL, then the earliest ``warc_date``, then the
smallest id).
"""
from __future__ import annotations

import os
import re
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from datapipe.formats.documents import conform, document_schema
from datapipe.io.readers import TEXT_FORMATS, detect_format, read_input
from datapipe.io.textdocs import resolve_fields
from datapipe.manifest.suggest import config_error
from datapipe.stages.dedup_signatures import DedupSignatures, stage_config
from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.phases.dedup.phase import load_stats, run_dedup

#: The one shard's name (a phase-1 task id would be there in a run).
_SHARD = "docs"


class SyncClient:
    """What ``run_dedup`` asks of a ``distributed.Client`` (``map``, ``submit``, ``gather``), run
    at once in this process, in order. Results stand in for futures."""

    def map(self, fn, *iterables, **kwargs):  # kwargs: Client's pure=, key=... (no meaning here)
        return [fn(*args) for args in zip(*iterables)]

    def submit(self, fn, *args, **kwargs):
        return fn(*args)

    def gather(self, futures):
        return futures


@dataclass
class DedupResult:
    """What dedup decided. ``ids``: every input id in input order; ``kept``: the ids kept, in input
    order; ``duplicate_of``: rejected id -> the kept id it duplicates (exact and near duplicates);
    ``reasons``: rejected id -> ``dedup:exact`` | ``dedup:near`` | ``dedup:lines`` (a document left
    empty by line removal); ``documents``: the kept rows (``id``, ``text`` after line removal,
    ``warc_date``); ``counts``: per step ``{in, kept, rejected, ...}`` as in ``ledger.json``;
    ``stats``: the phase's figures (cluster-size histograms, bands, rows, candidate pairs)."""

    ids: list[str]
    kept: list[str]
    duplicate_of: dict[str, str]
    reasons: dict[str, str]
    documents: pa.Table
    counts: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)

    @property
    def clusters(self) -> list[list[str]]:
        """Each group of duplicates as ``[kept id, rejected ids sorted...]``, sorted by kept id.
        Exact duplicates of a near-duplicate point to their own representative, as in a run's
        ``duplicate_of`` column."""
        groups: dict[str, list[str]] = defaultdict(list)
        for doc, rep in self.duplicate_of.items():
            groups[rep].append(doc)
        return [[rep, *sorted(m)] for rep, m in sorted(groups.items())]

    @property
    def rejected(self) -> list[str]:
        """Rejected ids in input order."""
        return [i for i in self.ids if i in self.reasons]


def _config(config, threshold, num_perm, ngram, seed, bands, rows, exact, lines, max_line_count, near):
    """The DedupConfig; ValueError naming each bad setting (closest known one for a typo)."""
    from pydantic import ValidationError


    try:
        if config is not None:
            return config if isinstance(config, DedupConfig) else DedupConfig(**config)
        mh = {"enabled": near, "threshold": threshold, "num_perm": num_perm, "ngram": ngram, "seed": seed}
        if bands is not None:
            mh.update(bands=bands, rows=rows)
        return DedupConfig(exact=exact, lines={"enabled": lines, "max_count": max_line_count}, minhash=mh)
    except ValidationError as e:
        raise ValueError(config_error("dedup", e, DedupConfig)) from None


def _read_paths(paths) -> pa.Table:
    """Documents of ``paths``: JSONL/Parquet files through the pipeline's readers (same ids as a
    run), any other file as one document (id = the path as given)."""

    rows = []
    for p in map(os.fspath, paths):
        fmt = detect_format(p)
        name = re.sub(r"\.(gz|zst|zstd)$", "", p.lower())
        if name.endswith((".warc", ".wet", ".wat", ".arc")):  # pages need extraction first: a run's job
            raise ValueError(f"{p}: WARC input; dedup takes texts, JSONL/Parquet documents or text files "
                             "(run the pipeline, or dedup its _filtered/ shards)")
        if fmt in TEXT_FORMATS:
            for it in read_input(p, fmt, fields=resolve_fields("auto", None, fmt)):
                if it.status == "document":
                    rows.append({"id": it.row["id"], "text": it.row.get("text"), "warc_date": it.row.get("warc_date")})
        else:
            rows.append({"id": p, "text": Path(p).read_text(encoding="utf-8", errors="replace"), "warc_date": None})
    return pa.Table.from_pylist(rows, schema=pa.schema([("id", pa.string()), ("text", pa.string()),
                                                        ("warc_date", pa.string())]))


def _looks_like_paths(items: list) -> bool:
    """True when every item is a one-line string naming an existing file (or a glob's shape)."""
    return bool(items) and all(isinstance(x, str) and "\n" not in x and len(x) < 4096
                               and (os.path.isfile(x) or os.path.isdir(x)) for x in items)


def _as_docs(docs, paths, ids, dates) -> pa.Table:
    if docs is not None and paths is not None:
        raise TypeError("dedup takes texts or paths=, not both")
    if docs is not None and not isinstance(docs, (str, pa.Table)) and _looks_like_paths(list(docs)):
        raise ValueError(f"dedup was given {len(list(docs))} string(s) that name existing files "
                         f"(first: {next(iter(docs))}): pass paths=[...] to read them, or texts=[...] "
                         "to deduplicate the strings themselves")
    if paths is not None:
        t = _read_paths(paths)
    elif isinstance(docs, pa.Table):
        t = docs
    elif docs is not None and all(isinstance(d, os.PathLike) for d in docs) and len(docs):
        t = _read_paths(docs)
    else:
        texts = [docs] if isinstance(docs, str) else list(docs or [])
        if any(not isinstance(x, str) for x in texts):
            raise TypeError("dedup takes texts (str), a pyarrow Table with a text column, or paths (pathlib.Path or paths=)")
        t = pa.table({"text": pa.array(texts, pa.string())})
    n = t.num_rows
    if ids is not None:
        t = _replace(t, "id", pa.array([str(i) for i in ids], pa.string()))
    elif "id" not in t.column_names:
        t = _replace(t, "id", pa.array([f"{i:08d}" for i in range(n)], pa.string()))  # input order wins ties
    if dates is not None:
        t = _replace(t, "warc_date", pa.array(list(dates), pa.string()))
    if "text" not in t.column_names:
        raise ValueError(f"no 'text' column among {', '.join(t.column_names)}")
    ids_ = t.column("id").to_pylist()
    if len(set(ids_)) != len(ids_) or None in ids_:
        raise ValueError("document ids must be unique and not null")
    return t


def _replace(t: pa.Table, name: str, arr) -> pa.Table:
    if len(arr) != t.num_rows:
        raise ValueError(f"{name}: {len(arr)} values for {t.num_rows} documents")
    i = t.schema.get_field_index(name)
    return t.set_column(i, name, arr) if i >= 0 else t.append_column(name, arr)


def dedup(docs=None, *, texts=None, paths=None, threshold: float = 0.8, num_perm: int = 128, ngram: int = 5, seed: int = 1,
          bands: int | None = None, rows: int | None = None, exact: bool = True, near: bool = True,
          lines: bool = False, max_line_count: int = 1, config=None, ids=None, dates=None) -> DedupResult:
    """Deduplicate ``docs`` in this process, as the pipeline's ``dedup:`` phase would.

    ``texts=``: a list of texts (str), taken as texts whatever they say; ``paths=``: file names
    (str or Path): JSONL and Parquet files are read as a run reads them (same ids), any other file
    is one document. ``docs`` (positional): texts, a ``pyarrow.Table`` with ``text`` (optional
    ``id``, ``warc_date``), or a list of ``pathlib.Path``; a positional list of strings that all
    name existing files is refused (ValueError: say ``paths=`` or ``texts=``), never silently
    deduplicated as the file names' own text.
    ``ids``/``dates``: one per document (default ids ``00000000``, ``00000001``, ... so the first
    of a cluster is kept). Settings: ``threshold`` (Jaccard of word ``ngram`` shingles, (0, 1)),
    ``num_perm`` [2, 1024], ``seed``, ``bands``/``rows`` (default: chosen as the pipeline does),
    ``exact``, ``near`` (MinHash), ``lines`` (remove lines seen more than ``max_line_count`` times),
    or a whole ``config`` (``DedupConfig`` or the manifest's ``dedup:`` mapping; then the
    keyword settings are ignored).

    Returns a ``DedupResult``. Raises ValueError for settings out of range or unknown (one line
    per setting), ValueError for duplicate or null ids, TypeError for inputs of another kind. Meant for
    up to some 10^5 documents: everything is held in memory and run on one core.
    """

    cfg = _config(config, threshold, num_perm, ngram, seed, bands, rows, exact, lines, max_line_count, near)
    if texts is not None:
        if docs is not None or paths is not None:
            raise TypeError("dedup takes one of texts=, paths= or a positional argument")
        texts = [texts] if isinstance(texts, str) else list(texts)
        if any(not isinstance(x, str) for x in texts):
            raise TypeError("dedup(texts=...) takes strings")
        t = _as_docs(pa.table({"text": pa.array(texts, pa.string())}), None, ids, dates)
    else:
        t = _as_docs(docs, paths, ids, dates)
    sig = DedupSignatures(stage_config(cfg))
    schema = document_schema([sig])
    shard = conform(sig(conform(t, schema)), schema)
    with tempfile.TemporaryDirectory(prefix="datapipe-dedup-") as tmp:
        os.makedirs(os.path.join(tmp, "_filtered"))
        pq.write_table(shard, os.path.join(tmp, "_filtered", f"{_SHARD}.parquet"))
        counts = run_dedup(SyncClient(), tmp, cfg.model_copy(update={"keep_work": False}), task_ids=[_SHARD])

        stats = load_stats(tmp)
        kept_t = pq.read_table(os.path.join(tmp, "documents", f"{_SHARD}.parquet"), columns=["id", "text", "warc_date"])
        rej_path = os.path.join(tmp, "rejected", f"dedup-{_SHARD}.parquet")
        rej = pq.read_table(rej_path, columns=["id", "reject_reason", "duplicate_of"]) if os.path.exists(rej_path) \
            else None
    reasons, dup_of = {}, {}
    if rej is not None:
        for i, r, d in zip(*(rej.column(c).to_pylist() for c in ("id", "reject_reason", "duplicate_of"))):
            reasons[i] = r
            if d is not None:
                dup_of[i] = d
    all_ids = t.column("id").to_pylist()
    kept_set = set(kept_t.column("id").to_pylist())
    order = {i: k for k, i in enumerate(all_ids)}
    kept_t = kept_t.take(pa.array(sorted(range(kept_t.num_rows), key=lambda r: order[kept_t.column("id")[r].as_py()])))
    return DedupResult(all_ids, [i for i in all_ids if i in kept_set], dup_of, reasons, kept_t,
                       {k: v.to_dict() for k, v in counts.items()}, stats)
