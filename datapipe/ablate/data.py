"""Per-domain token pools of a finished run, held-out sets, and per-mixture training sets.

Nothing is re-extracted or re-tokenized. The pool of a domain is read from phase 3's
intermediate encoded files (``RUN/_tokenize/<fp>/enc``, kept with ``tokenize.keep_intermediate``:
every kept document) or else from the run's token shards (rows with ``copy == 0``; a domain
the run downsampled then only offers its sampled documents).

Every output is a token-shard folder in the run's own format (``token_schema`` rows +
``index.json``, ``format: datapipe.tokens/1``), so ``datapipe.loader.TokenShardDataset`` and any
external trainer that reads the main job's shards read them too.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datapipe.env import shared_data
from datapipe.formats.tokens import AtomicParquetWriter, ids_array, token_schema
from datapipe.io.parquet import write_json_atomic
from datapipe.stages.phases.tokenize.mixture import MixConfig, doc_uniform, plan_mixture
from datapipe.stages.phases.tokenize.tokenizer import TokenizeConfig, load_tokenizer

INDEX_FORMAT = "datapipe.tokens/1"
_COLS = ["doc_id", "domain", "num_tokens", "input_ids"]
_HELDOUT_SALT = 0xAB1A  # independent of the run's sampling hash (salt 0) and shuffle (salt 1)


class RunNotReady(ValueError):
    """The run named by the ablation has no usable phase-3 output."""


@dataclass
class Pool:
    """Documents per domain. ``train[d]`` / ``heldout[d]``: tables (doc_id, domain, num_tokens,
    input_ids) with disjoint documents. ``index``: the run's ``index.json``; ``source``: where read."""

    train: dict[str, pa.Table]
    heldout: dict[str, pa.Table]
    index: dict
    source: str
    dtype: np.dtype = field(default=np.dtype(np.uint16))

    def available(self) -> dict[str, int]:
        """Training tokens per domain (BOS/EOS included)."""
        return {d: int(pc.sum(t.column("num_tokens")).as_py() or 0) for d, t in self.train.items()}


def _pool_files(run: Path, tokens: str) -> tuple[dict, list[Path], bool]:
    idx_path = run / tokens / "index.json"
    if not idx_path.is_file():
        raise RunNotReady(f"{idx_path} not found: {run} is not a finished run (phase 3 writes it; "
                          "run `datapipe run` with mix: and tokenize: sections first)")
    index = json.loads(idx_path.read_text())
    if not str(index.get("format", "")).startswith("datapipe.tokens/"):
        raise RunNotReady(f"{idx_path}: not a datapipe token index")
    marker = run / "_phases" / "tokenize.json"
    if marker.is_file():
        m = json.loads(marker.read_text())
        fp = (m.get("stats") or {}).get("fingerprint") or m.get("fingerprint", "")  # the work folder's name
        enc = sorted((run / "_tokenize" / fp[:16] / "enc").glob("*.parquet"))
        if fp and enc:
            return index, enc, True
    return index, [run / tokens / s["path"] for s in index["shards"]], False


def load_pool(run: str, tokens: str, domains: list[str] | None, fraction: float, max_tokens: int,
              seed: int) -> Pool:
    """Read a finished run's documents per domain and split off the held-out documents.

    A document is held out when ``doc_uniform(id, seed, salt)`` < ``fraction`` (at least one per
    domain with two or more documents); held-out documents never enter training, and at most
    ``max_tokens`` of them (lowest hash first) form the domain's eval set.
    Raises RunNotReady (no index), ValueError (unknown or empty domain in ``domains``).
    """
    index, files, intermediate = _pool_files(Path(run), tokens)
    parts = []
    for f in files:
        t = pq.read_table(f, columns=_COLS + ([] if intermediate else ["copy"]))
        if not intermediate:  # token shards repeat upsampled documents: keep each once
            t = t.filter(pc.equal(t.column("copy"), 0)).drop_columns(["copy"])
        parts.append(t.select(_COLS))
    table = pa.concat_tables(parts).combine_chunks() if parts else pa.table({c: [] for c in _COLS})
    table = table.sort_by([("doc_id", "ascending")])  # file order must not matter
    present = sorted(set(table.column("domain").to_pylist()))
    wanted = domains or present
    missing = sorted(set(wanted) - set(present))
    if missing:
        raise ValueError(f"domain(s) {missing} have no documents in {run}; the run has {present}")
    train, heldout = {}, {}
    for d in wanted:
        t = table.filter(pc.equal(table.column("domain"), d))
        u = doc_uniform(t.column("doc_id").to_pylist(), seed, _HELDOUT_SALT)
        out = u < fraction
        if not out.any() and t.num_rows >= 2:
            out[np.argmin(u)] = True
        order = np.flatnonzero(out)[np.argsort(u[out], kind="stable")]
        ntok = t.column("num_tokens").to_numpy()[order]
        keep = order[: max(1, int(np.searchsorted(np.cumsum(ntok), max_tokens, side="right")))] if len(order) else order
        heldout[d] = t.take(pa.array(np.sort(keep), pa.int64()))
        train[d] = t.filter(pa.array(~out))
    src = "intermediate encoded files" if intermediate else "token shards (copy == 0)"
    return Pool(train, heldout, index, src, np.dtype(index["dtype"]))


def _write_token_set(folder: Path, table: pa.Table, dtype: np.dtype, index: dict, extra: dict,
                     row_group_tokens: int = 1 << 16) -> dict:
    """Write ``table`` (token_schema columns) as one shard + ``index.json`` under ``folder``."""
    import fsspec

    folder.mkdir(parents=True, exist_ok=True)
    fs = fsspec.filesystem("file")
    table = table.cast(token_schema(dtype))
    with AtomicParquetWriter(str(folder / "shard-00000.parquet"), fs, table.schema,
                             row_group_tokens=row_group_tokens) as w:
        w.write(table)
    per_dom: dict[str, int] = {}
    for d, n in zip(table.column("domain").to_pylist(), table.column("num_tokens").to_numpy()):
        per_dom[d] = per_dom.get(d, 0) + int(n)
    total = sum(per_dom.values())
    out = {"format": INDEX_FORMAT, "dtype": dtype.name, "tokenizer": index.get("tokenizer"),
           "seed": index.get("seed"), "config_fingerprint": index.get("config_fingerprint"),
           "total_tokens": total, "total_documents": table.num_rows, "tokens_per_domain": dict(sorted(per_dom.items())),
           "shards": [{"path": "shard-00000.parquet", "documents": table.num_rows, "tokens": total,
                       "tokens_per_domain": dict(sorted(per_dom.items())), "row_group_tokens": w.row_group_sizes}]}
    write_json_atomic(str(folder / "index.json"), out | extra, fs=fs, sort_keys=True)
    return out | extra


def _with_copy(t: pa.Table, copy: np.ndarray) -> pa.Table:
    return pa.table({"doc_id": t.column("doc_id"), "domain": t.column("domain"), "copy": pa.array(copy, pa.int32()),
                     "num_tokens": t.column("num_tokens"), "input_ids": t.column("input_ids")})


def plan_selection(pool: Pool, weights: dict[str, float], budget: int, max_epochs: float, seed: int) -> dict:
    """Which documents one mixture's training set takes, without writing it.

    Tokens per domain come from the main planner (``plan_mixture`` with ``total_tokens=budget``,
    ``max_epochs`` and ``fill_budget``: a capped domain's shortfall goes to the others). A domain
    needing ``r`` epochs is taken ``floor(r)`` times whole plus a prefix of a permutation seeded
    by (seed, domain) -- the same for every mixture, so mixtures differ in amounts, not in which
    documents (less noise between proxy runs). Returns ``{"rows": {domain: (whole, prefix)}``
    (``prefix``: int64 row indices), ``"tokens": {domain: int}``, ``"plan"``, ``"signature"``}``:
    two mixtures with the same signature have the same training set (an effective duplicate).
    """
    active = {d: w for d, w in weights.items() if w > 0}
    plan = plan_mixture(pool.available(), MixConfig(weights=active, total_tokens=budget,
                                                   max_epochs=max_epochs, fill_budget=True))
    rows, tokens = {}, {}
    for i, d in enumerate(sorted(pool.train)):
        p, t = plan["domains"].get(d), pool.train[d]
        want = p["planned_tokens"] if p else 0.0
        if want <= 0 or t.num_rows == 0:
            continue
        ntok = t.column("num_tokens").to_numpy().astype(np.int64)
        whole = int(want // ntok.sum())
        rest = want - whole * ntok.sum()
        perm = np.random.default_rng([seed, i, 0xD0]).permutation(t.num_rows)
        starts = np.cumsum(ntok[perm]) - ntok[perm]
        prefix = perm[: int(np.searchsorted(starts, rest, side="left"))]  # docs starting before `rest`
        rows[d] = (whole, prefix)
        tokens[d] = int(whole * ntok.sum() + ntok[prefix].sum())
    sig = tuple(sorted((d, w, len(pre)) for d, (w, pre) in rows.items()))  # prefixes of one permutation
    return {"rows": rows, "tokens": tokens, "plan": plan, "signature": repr(sig)}


def materialize(pool: Pool, weights: dict[str, float], budget: int, max_epochs: float, seed: int,
                folder: Path, selection: dict | None = None) -> dict:
    """Write the training set of one mixture (``plan_selection``) to ``folder`` (shard +
    ``index.json``); return the index. Rows are shuffled with ``seed``. The index adds ``mixture``
    (target, achieved shares, epochs, plan reasons) and ``budget_tokens``. Raises ValueError when
    the mixture selects no tokens."""
    sel = selection or plan_selection(pool, weights, budget, max_epochs, seed)
    parts = []
    for d, (whole, prefix) in sorted(sel["rows"].items()):
        t = pool.train[d]
        rows = np.concatenate([np.tile(np.arange(t.num_rows), whole), prefix])
        copy = np.concatenate([np.repeat(np.arange(whole), t.num_rows), np.full(len(prefix), whole)])
        parts.append(_with_copy(t.take(pa.array(rows, pa.int64())), copy))
    if not parts:
        raise ValueError(f"mixture {weights} selects no training tokens")
    table = pa.concat_tables(parts)
    table = table.take(pa.array(np.random.default_rng([seed, 0x5F]).permutation(table.num_rows), pa.int64()))
    mix = mixture_summary(pool, weights, sel)
    return _write_token_set(folder, table, pool.dtype, pool.index, {"mixture": mix, "budget_tokens": budget})


def mixture_summary(pool: Pool, weights: dict[str, float], sel: dict) -> dict:
    """``{"target", "achieved" (token shares), "epochs", "reasons"}`` of a ``plan_selection``."""
    ach = sel["tokens"]
    total = sum(ach.values())
    avail = pool.available()
    return {"target": weights, "achieved": {d: (ach.get(d, 0) / total if total else 0.0) for d in weights},
            "epochs": {d: (ach.get(d, 0) / avail[d] if avail.get(d) else 0.0) for d in weights},
            "reasons": {d: p["reason"] for d, p in sel["plan"]["domains"].items()
                        if p.get("reason") and weights.get(d)}}


def read_extra_texts(paths: list[str], per_line: bool) -> list[str]:
    """Texts of an extra held-out set's files (globs, ``$DATAPIPE_SHARED_DATA`` expanded, ``.gz``
    read through gzip): one per file, or one per non-blank line with ``per_line``; files sorted.
    Raises FileNotFoundError naming a missing file."""
    import glob
    import gzip
    import os


    shared = str(shared_data())  # $DATAPIPE_SHARED_DATA, defaulting like the rest of datapipe
    expanded = [os.path.expandvars(p.replace("${DATAPIPE_SHARED_DATA}", shared)
                                   .replace("$DATAPIPE_SHARED_DATA", shared)) for p in paths]
    files = sorted({f for p in expanded for f in (glob.glob(p) or [p])})
    texts = []
    for f in files:
        if not Path(f).is_file():
            raise FileNotFoundError(f"heldout.extra file not found: {f}")
        raw = Path(f).read_bytes()
        body = (gzip.decompress(raw) if f.endswith(".gz") else raw).decode("utf-8")
        texts += [ln for ln in body.splitlines() if ln.strip()] if per_line else [body] * bool(body.strip())
    return texts


def run_tokenizer(index: dict):
    """The run's tokenizer, loaded from its ``index.json`` config (``config.tokenize``)."""

    return load_tokenizer(TokenizeConfig(**index["config"]["tokenize"]))


def _tokenize_extra(paths: list[str], per_line: bool, index: dict):
    """Texts of the extra files, encoded with the run's tokenizer (its manifest config)."""
    texts = read_extra_texts(paths, per_line)
    ids, lengths = run_tokenizer(index).encode_docs(texts)
    names = [f"extra-{i}" for i in range(len(texts))]
    return names, ids, lengths


def write_eval_sets(pool: Pool, extra: list, folder: Path) -> dict[str, dict]:
    """Write each domain's held-out set and each extra set to ``folder/<name>/``; return
    ``{name: index}``. Raises ValueError when an extra name repeats a domain or another extra."""
    out = {}
    for d, t in pool.heldout.items():
        out[d] = _write_token_set(folder / d, _with_copy(t, np.zeros(t.num_rows, np.int32)), pool.dtype,
                                  pool.index, {"eval_set": d, "kind": "heldout_domain"})
    for e in extra:
        if e.name in out:
            raise ValueError(f"heldout.extra name {e.name!r} repeats a domain or another extra set")
        names, ids, lengths = _tokenize_extra(e.paths, e.per_line, pool.index)
        t = pa.table({"doc_id": names, "domain": [e.name] * len(names), "copy": np.zeros(len(names), np.int32),
                      "num_tokens": lengths.astype(np.int32), "input_ids": ids_array(ids, lengths)})
        out[e.name] = _write_token_set(folder / e.name, t, pool.dtype, pool.index,
                                       {"eval_set": e.name, "kind": "extra"})
    return out


def natural_shares(pool: Pool) -> dict[str, float]:
    """Each domain's share of the pool's training tokens (the Dirichlet prior when none is given)."""
    a = pool.available()
    total = sum(a.values())
    return {d: (n / total if total else 0.0) for d, n in a.items()}


def vocab_map(pool: Pool, vocab_size: int, size: int) -> np.ndarray:
    """int64 [vocab_size] lookup: the ``size - 1`` ids most frequent in the training pool -> 0..size-2
    (by falling count, ties by id), every other id -> ``size - 1``."""
    counts = np.zeros(vocab_size, np.int64)
    for t in pool.train.values():
        ids = t.column("input_ids").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        counts += np.bincount(ids.astype(np.int64), minlength=vocab_size)[:vocab_size]
    top = np.lexsort((np.arange(vocab_size), -counts))[: size - 1]
    table = np.full(vocab_size, size - 1, np.int64)
    table[top] = np.arange(len(top))
    return table


def read_flat_tokens(index_path: Path, limit: int | None = None) -> np.ndarray:
    """All ids of a token-set folder's shards back to back (index order), at most ``limit``; int64."""
    index = json.loads(Path(index_path).read_text())
    chunks, n = [], 0
    for s in index["shards"]:
        col = pq.read_table(Path(index_path).parent / s["path"], columns=["input_ids"]).column(0)
        flat = col.combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.int64)
        chunks.append(flat)
        n += len(flat)
        if limit is not None and n >= limit:
            break
    flat = np.concatenate(chunks) if chunks else np.zeros(0, np.int64)
    return flat[:limit] if limit is not None else flat
