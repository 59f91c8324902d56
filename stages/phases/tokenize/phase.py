"""Phase 3 on Dask: domains -> tokens -> mixture plan -> sampled, shuffled token shards + index.json.

Three rounds of tasks over ``run_dir/documents/*.parquet`` (any fsspec URL):

1. encode (one task per documents shard): assign domains, batch-encode with EOS/BOS, write
   ``_tokenize/<fp>/enc/<name>.parquet``; return docs and tokens per domain.
2. sample (one task per shard): the planner's rates give each document's copies
   (``mix.copies``, a seeded hash of the id); every copy gets an int64 shuffle key; rows are written
   sorted by key to ``_tokenize/<fp>/sampled/<name>.parquet``; the (key, tokens) columns go back.
3. write (one task per output shard): the driver orders all keys and cuts the stream so shard ``s``
   holds the copies whose first token falls in ``[s*B, (s+1)*B)`` (B = ``shard_tokens``), i.e. a key
   range; each task reads that key range from every sampled file (row-group statistics skip the
   rest), sorts by key and writes ``<output>/shard-NNNNN.parquet`` atomically.

Everything that decides content (ids, rates, keys, cuts) is a function of the documents and the
config alone, so the shards are byte-identical whatever the number of workers. The work is done
when ``_tokenize.json`` (``DONE_FILE``) holds the same fingerprint (configs + tokenizer hash + inputs).
"""
from __future__ import annotations

import hashlib
import json
import re
import tempfile
import time
from pathlib import Path, PurePosixPath

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from datapipe.engine.lineage import digest, fingerprint
from datapipe.formats.tokens import AtomicParquetWriter, ids_array, token_schema
from datapipe.io.parquet import read_json, remove_temporaries, write_json_atomic
from datapipe.stages.phases.tokenize.mixture import (
    DomainAssigner,
    MixConfig,
    copies,
    plan_mixture,
    shuffle_keys,
)
from datapipe.stages.phases.tokenize.tokenizer import (
    TextTokenizer,
    TokenizeConfig,
    TokenizerError,
    bytes_sha256,
    files_sha256,
    load_tokenizer,
    resolve_files,
)

INDEX_FORMAT = "datapipe.tokens/1"
WORK = "_tokenize"           # intermediate files (removed unless keep_intermediate)
DONE_FILE = "_tokenize.json"  # the last finished run's fingerprint and result
_KEYED = [pa.field("key", pa.int64(), nullable=False)]
_CACHE: dict[str, TextTokenizer] = {}


#: zstd level of the work files (encoded, sampled): read once more and deleted, so speed over size.
INTERMEDIATE_LEVEL = 1


def config_fingerprint(mix: MixConfig, tok: TokenizeConfig, tokenizer_sha: str) -> str:
    """sha256 of what decides the shard bytes: mix config, tokenize config (minus speed-only knobs), tokenizer files."""
    t = tok.model_dump(exclude={"batch_size", "num_threads", "keep_intermediate"})
    # this exact JSON spelling: the value is recorded in index.json (the token-shard format)
    return digest(json.dumps({"mix": mix.model_dump(), "tokenize": t, "tokenizer": tokenizer_sha}, sort_keys=True))


def _worker_tokenizer(tok_cfg: dict, payload: dict[str, bytes]) -> TextTokenizer:
    """The tokenizer on a worker, rebuilt from file bytes shipped by the driver (no shared disk), cached."""
    key = hashlib.sha256(json.dumps(tok_cfg, sort_keys=True).encode() + b"".join(payload.values())).hexdigest()
    if key not in _CACHE:
        # The loaders take paths: the bytes go to a folder that is removed once they are loaded.
        with tempfile.TemporaryDirectory(prefix="datapipe-tok-") as tmp:
            d, paths = Path(tmp), {}
            for name, data in payload.items():
                (d / name).write_bytes(data)
                paths[name] = str(d / name)
            cfg = dict(tok_cfg)
            if cfg["tokenizer"] == "gpt2_bpe":
                cfg["vocab"], cfg["merges"] = paths["vocab"], paths["merges"]
            else:
                cfg["tokenizer"] = next(iter(paths.values()))
            _CACHE[key] = load_tokenizer(TokenizeConfig(**cfg))
    return _CACHE[key]


def _payload(cfg: TokenizeConfig) -> dict[str, bytes]:
    kind, files = resolve_files(cfg)
    if kind == "gpt2_bpe":
        return {"vocab": files[0].read_bytes(), "merges": files[1].read_bytes()}
    return {files[0].name: files[0].read_bytes()}


def _encode_file(src: str, dst: str, tok_cfg: dict, mix_cfg: dict, payload, so: dict) -> dict:
    fs, dst = fsspec.core.url_to_fs(dst, **so)
    if not fs.exists(dst):
        tok = _worker_tokenizer(tok_cfg, payload)
        assign = DomainAssigner(MixConfig(**mix_cfg))
        sfs, spath = fsspec.core.url_to_fs(src, **so)
        with sfs.open(spath, "rb") as fh:
            pf = pq.ParquetFile(fh)
            cols = [c for c in ["id", "url", "host", "source", "lang", "text", *assign.columns()]
                    if c in pf.schema_arrow.names]
            with AtomicParquetWriter(dst, fs, token_schema(tok.dtype), compression_level=INTERMEDIATE_LEVEL) as w:
                for batch in pf.iter_batches(batch_size=tok_cfg["batch_size"], columns=cols):
                    t = pa.Table.from_batches([batch])
                    texts = [x or "" for x in t.column("text").to_pylist()]
                    ids, lengths = tok.encode_docs(texts)
                    n = t.num_rows
                    w.write(pa.table([t.column("id").cast(pa.string()), pa.array(assign(t), pa.string()),
                                      pa.array(np.zeros(n, np.int32)), pa.array(lengths.astype(np.int32)),
                                      ids_array(ids, lengths)], schema=token_schema(tok.dtype)))
    t = pq.read_table(dst, columns=["domain", "num_tokens"], filesystem=fs)
    docs, tokens = {}, {}
    for d, n in zip(t.column("domain").to_pylist(), t.column("num_tokens").to_numpy()):
        docs[d] = docs.get(d, 0) + 1
        tokens[d] = tokens.get(d, 0) + int(n)
    return {"docs": docs, "tokens": tokens}


def _sample_file(src: str, dst: str, rates: dict[str, float], seed: int, so: dict):
    fs, dst = fsspec.core.url_to_fs(dst, **so)
    src = fsspec.core.url_to_fs(src, **so)[1]
    if not fs.exists(dst):
        t = pq.read_table(src, filesystem=fs)
        ids = t.column("doc_id").to_pylist()
        r = np.array([rates.get(d, 0.0) for d in t.column("domain").to_pylist()], dtype=np.float64)
        n_copies = copies(ids, r, seed)
        rows = np.repeat(np.arange(t.num_rows), n_copies)
        first = np.repeat(np.cumsum(n_copies) - n_copies, n_copies)
        copy_idx = (np.arange(len(rows)) - first).astype(np.int32)
        t = t.take(pa.array(rows)).set_column(2, "copy", pa.array(copy_idx))
        keys = shuffle_keys([ids[i] for i in rows], copy_idx, seed)
        t = pa.table([pa.array(keys)] + t.columns, schema=pa.schema(_KEYED + list(t.schema)))
        t = t.sort_by([("key", "ascending"), ("doc_id", "ascending"), ("copy", "ascending")])
        with AtomicParquetWriter(dst, fs, t.schema, row_group_rows=4096, compression_level=INTERMEDIATE_LEVEL) as w:
            w.write(t)
    t = pq.read_table(dst, columns=["key", "num_tokens", "copy"], filesystem=fs)
    distinct = int(np.count_nonzero(t.column("copy").to_numpy() == 0))
    return t.column("key").to_numpy(), t.column("num_tokens").to_numpy().astype(np.int64), distinct


def _write_shard(i: int, lo: int, hi: int | None, dst: str, sampled: list[str], dtype: str,
                 tok_cfg: dict, so: dict) -> dict:
    fs, dst = fsspec.core.url_to_fs(dst, **so)
    sampled = [fsspec.core.url_to_fs(p, **so)[1] for p in sampled]
    filt = [("key", ">=", lo)] + ([("key", "<", hi)] if hi is not None else [])
    parts = [pq.read_table(p, filesystem=fs, filters=filt) for p in sampled]
    t = pa.concat_tables(parts).sort_by([("key", "ascending"), ("doc_id", "ascending"), ("copy", "ascending")])
    t = t.drop_columns(["key"]).cast(token_schema(np.dtype(dtype)))
    with AtomicParquetWriter(dst, fs, t.schema, compression_level=tok_cfg["compression_level"],
                             row_group_tokens=tok_cfg["row_group_tokens"]) as w:
        w.write(t)
    per_dom = {}
    for d, n in zip(t.column("domain").to_pylist(), t.column("num_tokens").to_numpy()):
        per_dom[d] = per_dom.get(d, 0) + int(n)
    with fs.open(dst, "rb") as fh:
        sha = hashlib.sha256(fh.read()).hexdigest()
    return {"path": PurePosixPath(dst).name, "documents": t.num_rows, "tokens": sum(per_dom.values()),
            "tokens_per_domain": dict(sorted(per_dom.items())), "row_group_tokens": w.row_group_sizes,
            "sha256": sha}


def _shard_cuts(keys: np.ndarray, ntok: np.ndarray, budget: int) -> list[int]:
    """Lower key of each shard: shard s starts at the first copy whose first token is >= s*budget."""
    if len(keys) == 0:
        return []
    order = np.argsort(keys, kind="stable")
    k, n = keys[order], ntok[order]
    shard = (np.cumsum(n) - n) // budget
    starts = np.concatenate([[0], np.flatnonzero(np.diff(shard)) + 1])
    return [0] + sorted({int(x) for x in k[starts[1:]]})


_SHARD_NAME = re.compile(r"shard-\d{5}\.parquet")


def token_folder_files(fs, root: str, out: str) -> tuple[list[str], list[str]]:
    """(ours, foreign) files under the token folder ``out`` of the run at ``root`` (paths of
    ``fs``): ours are ``index.json``, the shards it lists and, while an unfinished phase's work
    folder (``_tokenize/``) exists, any ``shard-NNNNN.parquet``, with the temporary files of
    these; anything else (a user's file, a folder) is foreign and never removed."""
    if not fs.isdir(out):
        return [], []
    base = out.rstrip("/") + "/"
    try:
        with fs.open(base + "index.json", "r") as fh:
            index = json.load(fh)
    except (OSError, ValueError):
        index = None
    listed = {"index.json"} | {s.get("path") for s in (index or {}).get("shards", []) if isinstance(s, dict)}
    unfinished = fs.exists(f"{root.rstrip('/')}/{WORK}")
    ours, foreign = [], []
    for p in sorted(fs.find(out, withdirs=True)):
        rel = p[len(base):] if p.startswith(base) else p
        name = rel.partition(".tmp-")[0]
        if fs.isdir(p):
            if not any(q.startswith(p.rstrip("/") + "/") for q in fs.find(p)):
                foreign.append(p)   # an empty folder of someone else's
            continue
        if name in listed or (unfinished and _SHARD_NAME.fullmatch(name)):
            ours.append(p)
        else:
            foreign.append(p)
    return ours, foreign


def run_mix_tokenize(client, run_dir: str, mix: MixConfig, tokenize: TokenizeConfig,
                     storage_options: dict | None = None, progress=None, reuse: bool = True) -> dict:
    """Run phase 3 over ``run_dir/documents/*.parquet`` on the Dask ``client``; return counts.

    Writes ``run_dir/<tokenize.output>/shard-NNNNN.parquet`` (schema ``token_schema``), its
    ``index.json`` and the record ``run_dir/_tokenize.json``. Skips all work when the record's
    fingerprint matches and ``reuse`` (the phase passes False: the run's lineage decides). Raises TokenizerError (bad tokenizer/EOS/BOS/dtype) before any task runs.
    Returned dict: ``fingerprint``, ``skipped``, ``documents_in``, ``documents_sampled`` (distinct
    docs with >= 1 copy), ``rows`` (copies written), ``tokens``, ``tokens_per_domain``,
    ``available_tokens_per_domain``, ``docs_per_domain``, ``shards``, ``dtype``, ``plan``, ``seconds``.
    ``progress(step)``, if given, is called with a step's name as it starts (for the CLI).
    """
    t0 = time.time()
    progress = progress or (lambda step: None)
    so = storage_options or {}
    fs, root = fsspec.core.url_to_fs(run_dir, **so)
    root = root.rstrip("/")
    proto = fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol
    url = (lambda p: p) if proto in ("file", "local") else (lambda p: f"{proto}://{p}")
    tok = load_tokenizer(tokenize)
    inputs = sorted(fs.glob(f"{root}/documents/*.parquet"))
    cfg_fp = config_fingerprint(mix, tokenize, tok.sha256)
    sig = [(PurePosixPath(p).name, fs.info(p).get("size"), str(fs.checksum(p))) for p in inputs]
    fp = fingerprint(cfg_fp, sig)
    marker, out = f"{root}/{DONE_FILE}", f"{root}/{tokenize.output}"
    if reuse and fs.exists(marker) and fs.exists(f"{out}/index.json"):
        with fs.open(marker, "r") as fh:
            done = json.load(fh)
        if done.get("fingerprint") == fp:
            return done["result"] | {"skipped": True}
    work = f"{root}/{WORK}/{fp[:16]}"
    # an unfinished or outdated phase 3: its shards are not trusted; only files it wrote go
    ours, foreign = token_folder_files(fs, root, out)
    if foreign:
        raise ValueError(f"{out} holds {len(foreign)} file(s) that datapipe did not write (e.g. {foreign[0]}): "
                         "move them away or set tokenize.output to another folder")
    for p in ours:
        fs.rm(p)
    for d in (f"{work}/enc", f"{work}/sampled", out):
        fs.makedirs(d, exist_ok=True)
    names = [PurePosixPath(p).stem for p in inputs]
    enc = [f"{work}/enc/{n}.parquet" for n in names]
    sampled = [f"{work}/sampled/{n}.parquet" for n in names]
    tcfg, mcfg = tokenize.model_dump(), mix.model_dump()
    files = _payload(tokenize)
    if bytes_sha256(list(files.values())) != tok.sha256:  # the workers must build the tokenizer checked here
        raise TokenizerError(f"tokenizer files of {tokenize.tokenizer!r} changed while the run started; run again")
    payload = client.scatter(files, broadcast=True, hash=False)
    progress("tokenize documents")

    counts = client.gather(client.map(_encode_file, [url(p) for p in inputs], [url(p) for p in enc],
                                      tok_cfg=tcfg, mix_cfg=mcfg, payload=payload, so=so, pure=False))
    docs, avail = {}, {}
    for c in counts:
        for d, n in c["docs"].items():
            docs[d] = docs.get(d, 0) + n
        for d, n in c["tokens"].items():
            avail[d] = avail.get(d, 0) + n
    plan = plan_mixture(avail, mix)
    rates = {d: p["rate"] for d, p in plan["domains"].items()}

    progress("sample the mixture")
    keyed = client.gather(client.map(_sample_file, [url(p) for p in enc], [url(p) for p in sampled],
                                     rates=rates, seed=mix.seed, so=so, pure=False))
    keys = np.concatenate([k[0] for k in keyed]) if keyed else np.zeros(0, np.int64)
    ntok = np.concatenate([k[1] for k in keyed]) if keyed else np.zeros(0, np.int64)
    lows = _shard_cuts(keys, ntok, tokenize.shard_tokens)
    highs = lows[1:] + [None]
    shard_paths = [url(f"{out}/shard-{i:05d}.parquet") for i in range(len(lows))]
    progress("write token shards")
    shards = client.gather(client.map(_write_shard, list(range(len(lows))), lows, highs, shard_paths,
                                      sampled=[url(p) for p in sampled], dtype=tok.dtype.name,
                                      tok_cfg=tcfg, so=so, pure=False))
    remove_temporaries(fs, f"{out}/*")  # of shard writers killed mid-write; all writers returned
    got: dict[str, int] = {}
    for s in shards:
        for d, n in s["tokens_per_domain"].items():
            got[d] = got.get(d, 0) + n
    total = sum(got.values())
    for d, p in plan["domains"].items():
        p["achieved_tokens"] = got.get(d, 0)
        p["achieved_share"] = got.get(d, 0) / total if total else 0.0
    index = {
        "format": INDEX_FORMAT, "tokenizer": tok.info(), "dtype": tok.dtype.name, "seed": mix.seed,
        "config_fingerprint": cfg_fp, "config": {"mix": mcfg, "tokenize": tcfg},
        "inputs": [{"name": n, "size": s} for n, s, _ in sig],
        "mixture": plan, "total_tokens": total, "total_documents": sum(s["documents"] for s in shards),
        "tokens_per_domain": dict(sorted(got.items())), "shard_tokens": tokenize.shard_tokens, "shards": shards,
    }
    write_json_atomic(f"{out}/index.json", index, fs=fs, sort_keys=True)
    n_sampled = sum(k[2] for k in keyed)  # distinct documents in the mix at least once
    result = {"fingerprint": fp, "skipped": False, "documents_in": sum(docs.values()),
              "documents_sampled": n_sampled, "rows": len(keys), "tokens": total,
              "tokens_per_domain": dict(sorted(got.items())), "available_tokens_per_domain": dict(sorted(avail.items())),
              "docs_per_domain": dict(sorted(docs.items())), "shards": len(shards), "dtype": tok.dtype.name,
              "plan": plan, "seconds": round(time.time() - t0, 3)}
    write_json_atomic(marker, {"fingerprint": fp, "result": result}, fs=fs, sort_keys=True)
    if not tokenize.keep_intermediate:
        fs.rm(f"{root}/{WORK}", recursive=True)
    return result


# ------------------------------------------------------------------ the registered phase

from datapipe.engine.ledger import InvariantError  # noqa: E402
from datapipe.phase import (  # noqa: E402
    Dataset,
    Phase,
    PhaseContext,
    PhaseResult,
    register_phase,
)


@register_phase
class TokenizePhase(Phase):
    """Domain mixing to target weights and token shards (sections ``mix:`` and ``tokenize:``;
    on when ``tokenize:`` is present). Reads ``documents/``, writes ``OUTPUT/<tokenize.output>/``."""

    name = "tokenize"
    label = "mix + tokenize"
    sections = {"mix": MixConfig, "tokenize": TokenizeConfig}
    reads = ("documents",)
    writes = (Dataset("tokens", TokenizeConfig.model_fields["output"].default, "*", "tokens"),)
    work = (WORK, DONE_FILE)

    @classmethod
    def enabled(cls, manifest) -> bool:
        return manifest.section("tokenize") is not None

    def _configs(self):
        return self.manifest.section("mix") or MixConfig(), self.manifest.section("tokenize")

    def config(self) -> dict:
        if getattr(self, "_config", None) is None:

            mix, tok = self._configs()
            # speed-only knobs do not change the shards; the tokenizer's own bytes do (hashed, not
            # loaded: building a BPE costs about a second, and the fingerprint is asked for often)
            self._config = {"mix": mix.model_dump(mode="json"),
                            "tokenize": tok.model_dump(mode="json",
                                                       exclude={"batch_size", "num_threads", "keep_intermediate"}),
                            "tokenizer_sha256": files_sha256(resolve_files(tok)[1])}
        return self._config

    def check(self) -> None:
        load_tokenizer(self._configs()[1])  # TokenizerError before any work

    def assets(self) -> list:
        return resolve_files(self._configs()[1])[1]

    def outputs_present(self, ctx: PhaseContext) -> bool:
        """``index.json`` and every shard it lists are on disk."""
        folder = self._configs()[1].output
        index = read_json(ctx.url(folder, "index.json"), ctx.storage_options)
        if index is None:
            return False
        fs, root = fsspec.core.url_to_fs(ctx.url(folder), **ctx.storage_options)
        return all(fs.exists(f"{root}/{s['path']}") for s in index.get("shards", []))

    def _folder_files(self, ctx: PhaseContext) -> tuple[list[str], list[str]]:
        fs, root = fsspec.core.url_to_fs(ctx.output, **ctx.storage_options)
        ours, foreign = token_folder_files(fs, root, f"{root.rstrip('/')}/{self._configs()[1].output}")
        rel = len(root.rstrip("/")) + 1
        return [p[rel:] for p in ours], [p[rel:] for p in foreign]

    def foreign_files(self, ctx: PhaseContext) -> list[str]:
        """Files in the token folder that are not ``index.json``, a shard it lists or a shard of
        an unfinished run (``token_folder_files``)."""
        return self._folder_files(ctx)[1]

    def replaced_files(self, ctx: PhaseContext) -> list[str]:
        """The index and shards a rerun removes before writing new ones."""
        return self._folder_files(ctx)[0]

    @classmethod
    def datasets(cls, config: dict) -> tuple[Dataset, ...]:
        out = (config.get("tokenize") or {}).get("output") or TokenizeConfig.model_fields["output"].default
        return (Dataset("tokens", out.strip("/"), "*", "tokens"),)

    def verify(self, ctx: PhaseContext) -> dict:
        """The index's ``total_documents`` equals the rows of its shards, and the folder holds no
        shard or temporary file the index does not list."""
        folder = self._configs()[1].output
        index = read_json(ctx.url(folder, "index.json"), ctx.storage_options)
        if index is None:
            return {}
        fs, root = fsspec.core.url_to_fs(ctx.url(folder), **ctx.storage_options)
        shards = [f"{root}/{s['path']}" for s in index["shards"]]
        n_tok = sum(pq.ParquetFile(fs.open(p, "rb")).metadata.num_rows for p in shards)
        if n_tok != index["total_documents"]:
            raise InvariantError(f"{folder}/index.json says {index['total_documents']} documents, "
                                 f"its shards hold {n_tok}")
        others = sorted(set(fs.glob(f"{root}/*.parquet")) - set(shards) | set(fs.glob(f"{root}/*.tmp-*")))
        if others:
            raise InvariantError(f"{folder}/ holds shard(s) or temporary file(s) its index does not list, "
                                 f"e.g. {others[0]}")
        return {"token_rows": n_tok}

    def summary(self, stats: dict) -> list[str]:
        per = ", ".join(f"{d} {n:,}" for d, n in sorted(stats.get("tokens_per_domain", {}).items()))
        return [f"tokens: {stats.get('tokens', 0):,} ({stats.get('dtype')}) in {stats.get('shards')} shard(s) "
                f"under {self.manifest.output}/{self._configs()[1].output}; per domain: {per}"]

    def run(self, ctx: PhaseContext) -> PhaseResult:
        mix, tok = self._configs()
        return PhaseResult(stats=run_mix_tokenize(ctx.client, ctx.output, mix, tok, ctx.storage_options,
                                                  progress=ctx.progress, reuse=False))  # the runner's lineage decides
