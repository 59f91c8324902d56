"""Phase-1 planning and lineage: the task list of a run and the fingerprints that say what changed.

``plan_specs`` turns a run's inputs into ``TaskSpec``s (one per file, or per part of a splittable
file) with readable, unique ids (``task_id_for``). Each spec carries *prefix fingerprints*:
``prefix[0]`` covers the schema version, the read settings and the input's identity (canonical
name, size, mtime); ``prefix[i]`` adds the configuration (and ``Stage.version``, and the content
hash of its model and list files, ``Stage.lineage_assets``) of stage ``i-1`` (``stage_identity``). ``datapipe.engine.task`` compares them with a task's stored record to skip it,
rerun only the changed tail of its chain, or read the file again; ``chain_fingerprint`` is the
hash of a whole chain where no input identity is known.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

from datapipe.engine.check_cache import assets_digest
from datapipe.engine.lineage import fingerprint
from datapipe.io import warc_parts
from datapipe.io.jsonl import byte_ranges
from datapipe.io.parquet_input import row_group_ranges
from datapipe.io.readers import TEXT_FORMATS, detect_format
from datapipe.io.textdocs import resolve_fields
from datapipe.stage import registry

log = logging.getLogger(__name__)

SCHEMA_VERSION = 4  # 3: phase-1 kept rows in _filtered/, shards ordered by (warc_offset, id); 4: extract's second round of rules (issue 20): outputs of 3 are not reused. A stage's own code changes bump its ``Stage.version`` instead.


@dataclass
class TaskSpec:
    task_id: str
    input: str
    output: str
    stages: list[dict]
    fingerprint: str                       # identifies the task's whole output (= prefix[-1] when planned)
    input_format: str = "auto"
    batch_size: int = 256
    storage_options: dict = field(default_factory=dict)
    fields: dict | None = None             # resolved field mapping (text formats), see io/textdocs.py
    part: tuple[int, int] | None = None    # byte range (JSONL) or row-group range (Parquet); None = whole file
    prefix: list[str] | None = None        # prefix fingerprints (module doc); None = no retuning
    read_options: dict = field(default_factory=dict)  # extra keyword arguments of read_input
    assets: list[str | None] | None = None  # per stage: content digest of its lineage assets (None: no files)
    #: Bytes of rows the task holds before it spills sorted runs (None: ``spill.default_buffer_bytes``);
    #: a memory setting only, outside the fingerprints: the shards do not depend on it.
    buffer_bytes: int | None = None


def stage_version(name: str) -> int:
    """``Stage.version`` of the registered stage ``name`` (1 for an unknown name: ``build_chain``
    reports those)."""
    return getattr(registry().get(name), "version", 1)


def stage_identity(item: dict, assets: str | None = None) -> dict | list:
    """What a chain item's output depends on besides its input: ``{name: config}``, the stage
    class's ``version`` where it is above 1, and ``assets``, the content digest of the files it
    loads (``stage_assets``), where it names any (so that fingerprints of version-1 stages
    without files stay as they were)."""
    (name, _), = item.items()
    extra: dict = {}
    if (version := stage_version(name)) != 1:
        extra["version"] = version
    if assets is not None:
        extra["assets"] = assets
    return [item, extra] if extra else item


def stage_assets(stages: list[dict]) -> list[str | None]:
    """Per chain item: ``check_cache.assets_digest`` of the configured stage's ``lineage_assets``
    (content hashes of its model and list files; None when it loads none). Cheap after the first
    call: each file's hash is remembered by its identity on disk."""

    reg = registry()
    out: list = []  # stage instances
    for item in stages:
        (name, cfg), = item.items()
        cls = reg.get(name)
        if cls is None:
            out.append(None)
            continue
        try:
            st = cls(cls.Config(**(cfg or {})))
        except ValueError:  # a bad config: the manifest check reports it
            out.append(None)
            continue
        out.append(assets_digest(st))
    return out


def chain_fingerprint(stages: list[dict], extra: dict | None = None) -> str:
    """Hash of the stage chain (configuration, stage versions, schema version): equal -> equal hash."""
    return fingerprint({"v": SCHEMA_VERSION, "stages": [stage_identity(s) for s in stages], "extra": extra or {}},
                       length=16)


def prefix_fingerprints(read_settings: dict, stages: list[dict], assets: list[str | None] | None = None) -> list[str]:
    """``[f0, f1, ..., fn]``: ``f0`` = hash(schema version, ``read_settings``), ``fi`` = hash(f(i-1),
    ``stage_identity`` of stage i-1): a stage's new config or version changes its fingerprint and
    every later one, not the earlier ones.

    ``read_settings`` holds everything the read depends on: the input's identity, format, field
    mapping, part, batch size and read options. ``assets``: per stage, the content digest of its
    files (``stage_assets``). Hex strings of 16 characters.
    """
    out = [fingerprint({"v": SCHEMA_VERSION, "read": read_settings}, length=16)]
    for i, st in enumerate(stages):
        out.append(fingerprint(out[-1], stage_identity(st, assets[i] if assets else None), length=16))
    return out


def task_id_for(path: str) -> str:
    """Readable, unique task id: file stem + hash of the input's canonical name.

    ``path`` should already be canonical (``datapipe.io.paths.canonical_input``): then every
    spelling of one file gives one id. The id names files under the output directory, so it never
    holds ``/`` or ``\\`` (one path segment, never ``.``/``..``) and never starts with ``.``/``_``/``-``
    (``ls`` hides such files and ``pyarrow.dataset`` skips them: a reader of ``documents/`` would lose them).
    """
    stem = path.rstrip("/").rsplit("/", 1)[-1]
    for suffix in (".gz", ".zst", ".warc", ".wet", ".wat", ".arc", ".jsonl", ".ndjson", ".json", ".parquet"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:80].lstrip("._-")
    return f"{safe or 'input'}-{hashlib.sha1(path.encode()).hexdigest()[:8]}"


def plan_specs(inputs: list[str], output: str, stages: list[dict], fingerprint: str, fmt: str = "auto",
               preset: str = "auto", fields: dict | None = None, split_bytes: int = 0,
               batch_size: int = 256, storage_options: dict | None = None,
               identities: dict[str, dict] | None = None, read_options: dict | None = None,
               assets: list[str | None] | None = None) -> list[TaskSpec]:
    """The phase-1 tasks for ``inputs``: one per file, or one per part of a splittable file (plain
    JSONL: byte ranges; Parquet: row groups; gzip WARC: byte ranges cut at member starts).

    A file in ``k > 1`` parts gets task ids ``<task_id_for(path)>-p00000`` ... (deterministic for
    the same ``split_bytes``). With ``identities`` (input -> ``input_identity``), each spec gets
    prefix fingerprints and ``fingerprint`` = the last one (lineage); otherwise ``fingerprint``
    is used as given. An input that cannot be sized (a URL answering 404 or 500, a file gone since
    it was listed) is one task, which then errors the file with the reason. ``assets``: per stage,
    the content digest of its files (``stage_assets``), part of the prefixes. Raises ValueError for
    an unknown preset/field key or duplicate ids.
    """
    from fsspec.core import url_to_fs

    so = storage_options or {}
    ro = dict(read_options or {})
    specs = []
    for p in inputs:
        f = detect_format(p) if fmt == "auto" else fmt
        mapping = resolve_fields(preset, fields, f) if f in TEXT_FORMATS else None
        parts = None
        try:
            if f == "jsonl" and split_bytes:
                fs, lp = url_to_fs(p, **so)
                parts = byte_ranges(p, fs.size(lp), split_bytes)
            elif f == "parquet" and split_bytes:
                parts = row_group_ranges(p, so, split_bytes)
            elif f in ("warc", "wet") and split_bytes:  # gzip per record: cut at member starts
                fs, lp = url_to_fs(p, **so)
                parts = warc_parts.warc_byte_ranges(p, fs.size(lp), split_bytes)
        except Exception as e:  # noqa: BLE001 - a URL answering 404/500, a file gone since listing:
            # one task, which errors the file with the reason; the other inputs run.
            log.warning("input %s: cannot be sized for splitting (%s: %s); read as one task", p, type(e).__name__, e)
            parts = None
        base = task_id_for(p)
        for k, part in enumerate(parts or [None]):
            tid = base if part is None else f"{base}-p{k:05d}"
            prefix = None
            fp = fingerprint
            if identities is not None:
                read = {"input": identities.get(p, {"path": p}), "format": f, "fields": mapping, "part": part,
                        "batch_size": batch_size, "options": ro}
                if part is not None and f in ("warc", "wet"):
                    read["part_reader"] = warc_parts.VERSION  # a change in what the part reader yields rereads parts
                prefix = prefix_fingerprints(read, stages, assets)
                fp = prefix[-1]
            specs.append(TaskSpec(tid, p, output, stages, fp, f, batch_size, so, mapping, part, prefix, ro, assets))
    ids = [s.task_id for s in specs]
    if len(set(ids)) != len(ids):
        raise ValueError("two inputs map to the same task id")
    return specs
