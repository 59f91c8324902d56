"""Manifest: a YAML job description -> a validated ``Manifest`` (pydantic).

A bad manifest fails before any work with ``ManifestError``, whose message names the file, the
line and the field (``manifests/x.yaml:12: stages[1].langid.min_score: Input should be a valid
number``); an unknown stage lists the known ones.

A manifest is data, not code: it is read with ``yaml.safe_load`` (no Python tags) after
``datapipe.manifest.yaml_guard`` bounds what its aliases expand to, a stage name
is only looked up in the registry of stages shipped with datapipe (``datapipe.stage.registry``),
a phase section only among the sections of registered phases (``datapipe.phase``), and nothing from the YAML is evaluated or
imported. Folder names it gives for outputs stay inside the run directory (datapipe.engine.safe_paths).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from datapipe.io.members import MAX_RECORD_BYTES
from datapipe.io.textdocs import PRESETS, resolve_fields
from datapipe.manifest import yaml_guard
from datapipe.manifest.path_settings import rebase
from datapipe.manifest.suggest import did_you_mean, pydantic_lines
from datapipe.phase import phases, section_classes
from datapipe.stage import Stage, registry


class ManifestError(ValueError):
    """The manifest cannot be used; the message says where and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Inputs(_Strict):
    """Where records come from. ``paths`` are local paths, globs, or fsspec URLs (http(s)://, s3://).

    ``crawl`` is a Common Crawl crawl id (``CC-MAIN-2026-08``) resolved through its
    ``warc.paths.gz`` under ``base_url``; ``crawl_files`` takes the first N files of that list.
    ``format``: ``auto`` (from each file name), ``warc``, ``jsonl`` or ``parquet``. For text formats
    ``preset`` names the field layout (``auto`` = dolma for JSONL, fineweb for Parquet; see
    ``datapipe.io.textdocs.PRESETS``) and ``fields`` overrides single entries (text, id, url, date,
    metadata). Plain JSONL and gzip WARC files larger than ``split_bytes`` are read as several tasks
    (byte ranges; WARC cut at gzip member starts, see ``datapipe.io.warc_parts``), Parquet files as
    row-group ranges of about that many compressed bytes; 0 = never split.

    ``max_record_bytes`` caps one record's decompressed size, in bytes (default 32 MiB, at least
    1 KiB): a WARC record whose Content-Length, or whose HTTP body once its Content-Encoding is
    removed, is larger, or a longer JSONL line, is one errored ``read:record_too_large`` row; it is
    skipped while decompressing, never held, so a decompression bomb costs one row and a reader
    holds about the cap plus a few MiB. 32 MiB is 32 times Common Crawl's own payload limit (1 MiB
    since 2013, cc-notebooks "Truncated Records in WARC Files") and above the extract stage's
    ``max_payload_bytes`` (20 MB), which stays the rule for how large a page may be.
    """

    paths: list[str] = []
    crawl: str | None = None
    crawl_files: int = Field(1, ge=1)
    base_url: str = "https://data.commoncrawl.org/"
    format: Literal["auto", "warc", "wet", "arc", "jsonl", "parquet"] = "auto"
    preset: str = "auto"
    fields: dict[str, str | list[str] | None] = {}
    split_bytes: int = Field(256 * 2**20, ge=0)
    max_record_bytes: int = Field(MAX_RECORD_BYTES, ge=1024)
    #: At most this many records per input file (sample runs; None = all). Part of the read
    #: settings, so it is in every task's fingerprint; a limited file is one task (no split).
    limit: int | None = Field(None, ge=1)
    storage_options: dict[str, Any] = {}
    #: What tells a rerun that an input changed: ``stat`` (path, size, mtime) or ``content`` (also
    #: the sha256 of a local file's bytes; ``datapipe.io.paths.input_identity``).
    identity: Literal["stat", "content"] = "stat"

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v):
        if v != "auto" and v not in PRESETS:
            raise ValueError(f"unknown field preset {v!r}; known: auto, {', '.join(sorted(PRESETS))}")
        return v

    @field_validator("fields")
    @classmethod
    def _known_fields(cls, v):
        resolve_fields("dolma", v)  # raises ValueError for an unknown key or a null text field
        return v


#: Share of the machine's memory that ``memory_limit: auto`` gives the local workers together;
#: the rest is for the scheduler, the client and the extraction sandboxes (child processes, which
#: Dask's nanny does not count in a worker's memory).
AUTO_MEMORY_SHARE = 0.9


class Cluster(_Strict):
    """Dask cluster. ``address`` (tcp://HOST:PORT) connects to an existing scheduler; otherwise a
    ``LocalCluster`` with ``workers`` processes (default: one per core) of ``threads_per_worker``.

    The LocalCluster talks TLS with a throw-away CA (``runner.local_security``): no other process
    can use its scheduler. An external scheduler at a ``tls://`` address is reached with
    ``tls_ca_file`` (the CA that signed the scheduler's certificate), ``tls_cert`` and ``tls_key``
    (this client's certificate and key, PEM files; the key may sit in the cert file), or, without
    them, with Dask's own TLS configuration (``distributed.comm.tls.*``). A ``tcp://`` scheduler
    beyond loopback is unauthenticated: anyone who reaches it runs code on its workers (a warning).

    ``memory_limit`` is per worker process (the nanny restarts a worker above 95% of it):
    ``auto`` = ``AUTO_MEMORY_SHARE`` (90%) of the machine's memory (its cgroup limit if lower)
    split evenly between the workers (``worker_memory_limit``); or a size (``4GiB``), a fraction
    of the machine per worker (``0.25``), or ``none`` / ``0`` (no limit).
    """

    address: str | None = None
    workers: int | None = Field(None, ge=1)
    threads_per_worker: int = Field(1, ge=1)
    memory_limit: str = "auto"
    dashboard_address: str = "127.0.0.1:8787"
    retries: int = Field(2, ge=0)
    tls_ca_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    @model_validator(mode="after")
    def _tls(self):
        """TLS files only with a ``tls://`` address, a CA with a certificate, and files that exist."""
        given = [n for n in ("tls_ca_file", "tls_cert", "tls_key") if getattr(self, n)]
        if not given:
            return self
        if not (self.address or "").startswith("tls://"):
            raise ValueError(f"{', '.join(given)} need a tls:// address (cluster.address / --scheduler)")
        if not (self.tls_ca_file and self.tls_cert):
            raise ValueError("TLS to a scheduler needs both tls_ca_file and tls_cert (tls_key if not in the cert)")
        for n in given:
            v = getattr(self, n)
            if not v.lstrip().startswith("-----BEGIN") and not os.path.isfile(v):  # a path, or the PEM text
                raise ValueError(f"{n} {v!r} is not a file")
        return self

    @field_validator("address")
    @classmethod
    def _address(cls, v):
        """A scheduler address Dask can parse (``tcp://HOST:PORT``; the port is required): a bad one
        was a traceback from ``Client`` after the output folder was made."""
        if v is None:
            return v
        from distributed.comm.addressing import parse_address, parse_host_port

        try:
            scheme, loc = parse_address(v)
            _, port = parse_host_port(loc) if scheme in ("tcp", "tls") else (loc, 1)
        except ValueError as e:
            raise ValueError(f"address {v!r} is not a Dask scheduler address (tcp://HOST:PORT): {e}") from None
        if not 0 < int(port) < 65536:
            raise ValueError(f"address {v!r} is not a Dask scheduler address (tcp://HOST:PORT)")
        return v

    @field_validator("dashboard_address")
    @classmethod
    def _dashboard_address(cls, v):
        """``HOST:PORT`` or ``:PORT`` (port 0: any free one): 'nonsense' was a socket traceback at start."""
        _, sep, port = v.strip().rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"dashboard_address {v!r} is not HOST:PORT (e.g. 127.0.0.1:8787; port 0: any free one)")
        return v.strip()

    @field_validator("memory_limit")
    @classmethod
    def _memory_limit(cls, v):
        if v.strip().lower() in ("auto", "none", "0"):
            return "none" if v.strip() == "0" else v.strip().lower()  # Dask's 0 is no limit too
        try:
            f = float(v)
        except ValueError:
            from dask.utils import parse_bytes

            try:
                parse_bytes(v)
            except ValueError:
                raise ValueError(f"memory_limit {v!r} is not auto, none, a size (4GiB) or a fraction (0.25)") from None
            return v
        if not 0 < f <= 1:
            raise ValueError(f"memory_limit {v!r}: a fraction of the machine is in (0, 1]")
        return v

    def worker_memory_limit(self, n_workers: int) -> int | str | None:
        """The memory limit to give each of ``n_workers`` local workers: bytes for ``auto``, None
        for ``none``, else the manifest's value (Dask parses it).

        ``auto`` is ``AUTO_MEMORY_SHARE x memory / n_workers``. Dask's own ``auto``, given to each
        worker, is ``memory x threads_per_worker / cores``: it does not look at the number of
        workers, so one worker with a thread per core may use the whole machine, and two
        single-thread workers on a 64-core host get 1/64 of it each.
        """
        if self.memory_limit == "none":
            return None
        if self.memory_limit != "auto":
            return self.memory_limit
        from distributed.system import MEMORY_LIMIT

        return int(MEMORY_LIMIT * AUTO_MEMORY_SHARE / max(1, n_workers))


class Manifest(_Strict):
    name: str = "datapipe"
    inputs: Inputs
    output: str
    cluster: Cluster = Cluster()
    batch_size: int = Field(256, ge=1)          # documents per stage call
    shard_rows: int = Field(50_000, ge=1)       # max documents per output row group
    stages: list[dict[str, Any]] = []
    #: ``parquet`` shards are always written; each other entry names an export phase (e.g.
    #: ``dolma_jsonl``: ``OUTPUT/dolma/*.jsonl.zst``, after dedup).
    output_formats: list[str] = ["parquet"]
    #: Sections of registered phases (``dedup:``, ``mix:``, ``tokenize:``, ``report:``, ...), moved here at load.
    sections: dict[str, dict[str, Any] | None] = {}
    source_file: str | None = None

    @field_validator("output_formats")
    @classmethod
    def _known_formats(cls, v):

        known = ["parquet"] + [p.name for p in phases() if any(d.role == "export" for d in p.writes)]
        bad = [f for f in v if f not in known]
        if bad:
            raise ValueError(f"unknown output format {bad[0]!r}; known: {', '.join(known)}")
        return v

    @field_validator("stages")
    @classmethod
    def _one_key(cls, v):
        for i, item in enumerate(v):
            if not isinstance(item, dict) or len(item) != 1:
                raise ValueError(f"stages[{i}] must be a mapping with one key, the stage name (e.g. '- langid: {{}}')")
        return v

    def effective_stages(self) -> list[dict]:
        """The phase-1 chain as run: the manifest's stages, plus the stages each enabled phase
        requires and the chain lacks (``dedup_signatures``, configured from the ``dedup:`` section,
        so the two cannot drift)."""

        chain = [dict(s) for s in self.stages]
        for ph in phases():
            if ph.enabled(self):
                for st in ph.required_stages(self):
                    if not any(next(iter(st)) in s for s in chain):
                        chain.append(st)
        return chain

    def effective_stage_configs(self) -> list[dict]:
        """The phase-1 chain as run with every config field filled in (defaults included):
        ``[{name: config dict (JSON types)}]``, what ``ledger.json`` records as ``stage_configs``."""
        reg = registry()
        out = []
        for item in self.effective_stages():
            (name, cfg), = item.items()
            out.append({name: reg[name].Config(**(cfg or {})).model_dump(mode="json")})
        return out

    def build_stages(self) -> list[Stage]:
        """Instantiate the stage chain (configs were validated at load)."""
        reg = registry()
        out = []
        for item in self.effective_stages():
            (name, cfg), = item.items()
            cls = reg[name]
            out.append(cls(cls.Config(**(cfg or {}))))
        return out

    def section(self, name: str):
        """Validated config object of an optional phase section (``dedup``, ``mix``, ``tokenize``,
        ``report``, or any registered phase's), or None when the manifest does not have it."""
        raw = getattr(self, name) if name in type(self).model_fields else self.sections.get(name)
        if raw is None:
            return None
        return _section_class(name)(**raw)


def _section_class(name: str):
    classes = section_classes()
    if name not in classes:
        raise ManifestError(f"section {name!r} is not a section of any registered phase; known: {', '.join(classes)}")
    return classes[name]


# ------------------------------------------------------------------ YAML with line numbers

class _DuplicateKey(Exception):
    """A key given twice in one YAML mapping: ``(key path, line of the second)``."""


def dotted_field(loc: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc))


def line_map(text: str) -> dict[tuple, int]:
    """Map each key path (tuple of str/int) in the YAML document to its 1-based line number.

    Raises _DuplicateKey for a key repeated in one mapping: YAML loaders keep the last value
    silently, so ``{min_score: 0.5, min_score: 0.99}`` or a second ``stages:`` would hide a setting.
    """
    lines: dict[tuple, int] = {}

    def walk(node, path):
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if (k.tag, k.value) in seen:
                        raise _DuplicateKey(path + (k.value,), k.start_mark.line + 1)
                    seen.add((k.tag, k.value))
                p = path + (k.value,)
                lines[p] = k.start_mark.line + 1
                walk(v, p)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                walk(v, path + (i,))

    root = yaml.compose(text)
    if root is not None:
        walk(root, ())
    return lines


#: The line of a key path set by an override (``--workers``, ``--input``...), not read from the file.
OVERRIDDEN = -1


def error_location(source: str, lines: dict[tuple, int], loc: tuple) -> str:
    path: tuple = ()
    for p in loc:  # YAML keys are strings; an int-keyed mapping (gopher n-gram sizes) reports ints
        path += (str(p) if isinstance(p, int) and path + (p,) not in lines else p,)
    while path and path not in lines:
        path = path[:-1]
    line = lines.get(path)
    field = dotted_field(loc)
    if line == OVERRIDDEN:
        return f"{source}: {field} (given on the command line)"
    return f"{source}:{line}: {field or '(top level)'}" if line else f"{source}: {field}"


def read_yaml_mapping(path: str | os.PathLike, what: str, overrides: dict[str, Any] | None = None,
                      rebase=None) -> tuple[dict, dict[tuple, int], str]:
    """Read a YAML job file: ``(data with ${VAR} expanded and overrides applied, key-path -> line, source)``.

    ``what`` names the document in errors ("manifest", "ablation manifest"). ``rebase(data, folder)``,
    if given, resolves the file's relative paths against its folder (before the overrides, which
    are the command line's and stay relative to the working directory). Raises ManifestError.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ManifestError(f"cannot read {what} {source}: {e.strerror}") from e
    try:
        data = yaml_guard.safe_load(text)
        lines = line_map(text)
    except yaml_guard.YamlSizeError as e:
        raise ManifestError(f"{source}:{e.line}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark else ""
        raise ManifestError(f"{source}{at}: not valid YAML: {getattr(e, 'problem', e)}") from e
    except _DuplicateKey as e:
        loc, line = e.args
        raise ManifestError(f"{source}:{line}: {dotted_field(loc)}: given twice in one mapping "
                            "(YAML would keep only the last value)") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: a {what} is a YAML mapping")
    data = _expand_env(data)
    if rebase is not None:
        data = rebase(data, Path(os.path.abspath(path)).parent)
    for key, value in (overrides or {}).items():
        _set(data, key, value)
        where = tuple(key.split("."))  # an error in it (or under it) is not on the file's lines
        for k in [k for k in lines if k[:len(where)] == where]:
            del lines[k]
        lines[where] = OVERRIDDEN
    data["source_file"] = source
    return data, lines, source


def validation_message(source: str, lines: dict[tuple, int], error: ValidationError, prefix: tuple = (),
                       model=None, also=(), list_known: bool = True) -> str:
    """One ``file:line: field: message`` line per pydantic error; an unknown key names the closest
    known setting of ``model`` (``datapipe.manifest.suggest``)."""

    return "\n".join(f"{error_location(source, lines, prefix + loc)}: {msg}"
                     for loc, msg in pydantic_lines(error, model, also, list_known))


def load_manifest(path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> Manifest:
    """Read, validate and return a manifest. Raises ManifestError (file, line, field named).

    Relative paths the manifest reads (``inputs.paths``, model, word-list, tokenizer and reference
    settings) resolve against the manifest's folder, not the working directory
    (``datapipe.manifest.path_settings``); ``output`` and ``overrides`` stay relative to the working directory."""

    data, lines, source = read_yaml_mapping(path, "manifest", overrides, rebase=rebase)
    return validate_manifest(data, source, lines)


def validate_manifest(data: dict, source: str = "<manifest>", lines: dict[tuple, int] | None = None) -> Manifest:
    """Validate a manifest mapping (plain data, as YAML gives it) exactly as ``load_manifest`` does:
    stage names only from the registry, phase sections only of registered phases. ``source`` and
    ``lines`` (key path -> line) name where errors are. Raises ManifestError."""

    lines = lines or {}
    data = dict(data)
    classes = section_classes()
    for key in list(data):
        if key in classes and key not in Manifest.model_fields:
            data.setdefault("sections", {})[key] = data.pop(key)
    try:
        m = Manifest(**data)
    except ValidationError as e:
        msg = validation_message(source, lines, e, model=Manifest, also=classes, list_known=False)
        if any(err["type"] == "extra_forbidden" and len(err["loc"]) == 1 for err in e.errors()):
            known = [k for k in Manifest.model_fields if k not in ("source_file", "sections")]
            msg += f"\n  known top-level keys: {', '.join(known)} (phase sections: {', '.join(classes)})"
        raise ManifestError(msg) from None
    _check_stages(m, source, lines)
    for name, cls in classes.items():
        raw = getattr(m, name) if name in Manifest.model_fields else m.sections.get(name)
        if raw is not None:
            if not isinstance(raw, dict):
                raise ManifestError(f"{error_location(source, lines, (name,))}: section {name!r} must be a mapping")
            try:
                section = cls(**raw)
            except ValidationError as e:
                raise ManifestError(validation_message(source, lines, e, (name,), model=cls)) from None
            try:  # checks that hold for the section in a manifest only (mix: weights of known domains)
                getattr(section, "check_in_manifest", lambda: None)()
            except ValueError as e:
                raise ManifestError(f"{error_location(source, lines, (name,))}: {e}") from None
    if not m.inputs.paths and not m.inputs.crawl:
        raise ManifestError(f"{error_location(source, lines, ('inputs',))}: give inputs.paths or inputs.crawl")
    return m


def _check_stages(m: Manifest, source: str, lines: dict) -> None:

    reg = registry()
    first: dict[str, int] = {}
    for i, item in enumerate(m.stages):
        (name, cfg), = item.items()
        if name not in reg:
            raise ManifestError(f"{error_location(source, lines, ('stages', i, name))}: unknown stage {name!r}"
                                f"{did_you_mean(name, reg)}; known stages: {', '.join(sorted(reg))}")
        if name in first:  # its output columns would be written twice: every file failed at run time
            raise ManifestError(f"{error_location(source, lines, ('stages', i, name))}: stage {name!r} is listed twice "
                                f"(stages[{first[name]}] and stages[{i}]); a stage runs once per run")
        first[name] = i
        if cfg is not None and not isinstance(cfg, dict):
            raise ManifestError(f"{error_location(source, lines, ('stages', i, name))}: config must be a mapping")
        try:
            reg[name].Config(**(cfg or {}))
        except ValidationError as e:
            raise ManifestError(validation_message(source, lines, e, ("stages", i, name), model=reg[name].Config)) from None


def _expand_env(obj):
    """Expand ``${VAR}`` and ``${VAR:-default}`` in string values (e.g. the shared data directory)."""
    if isinstance(obj, dict):
        return {k: _expand_env(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_expand_env(v) for v in obj]
    if isinstance(obj, str) and "${" in obj:
        import re

        def sub(mt):
            var, _, default = mt.group(1).partition(":-")
            return os.environ.get(var, default)
        return re.sub(r"\$\{([^}]+)\}", sub, obj)
    return obj


def _set(data: dict, dotted: str, value) -> None:
    keys = dotted.split(".")
    d = data
    for k in keys[:-1]:
        d = d.setdefault(k, {})
        if not isinstance(d, dict):
            raise ManifestError(f"cannot override {dotted}: {k} is not a mapping")
    d[keys[-1]] = value
