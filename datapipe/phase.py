"""The phase contract: global work over the whole run, after the per-file tasks of phase 1.

A phase (dedup, publishing ``documents/``, the Dolma export, mix + tokenize, the report, or a
user's own) is a registered class that declares the **datasets** it reads and writes:

* ``name``: the step's name in the CLI (``--only``/``--from``), its marker and ``ledger.json``;
  ``label``: how progress lines call it;
* ``sections``: manifest sections it is configured by, each with its strict pydantic class;
* ``reads``: names of datasets it consumes (``tasks``: phase 1's stored rows; ``documents``: the
  current version of the run's documents; ``*``: everything produced so far);
* ``writes``: the :class:`Dataset` s it produces (name, place in the run folder, role). A phase that
  writes :data:`DOCUMENTS` is a **documents transform**: it reads the previous version of the
  documents from ``ctx.documents_in`` and writes the next one to ``ctx.documents_out`` (folders
  the engine chooses: the first transform reads phase 1's kept rows, the last one writes
  ``documents/``); the rows it removes go to its own dataset of role ``rejected``, one file per task
  (``{task}`` in its pattern), which is how the end-of-run check accounts for them
  (``rows in == rows out + rows rejected``, per transform);
* ``enabled(manifest)``, ``required_stages(manifest)``, ``check()`` (before any work),
  ``outputs_present(ctx)``, ``run(ctx)`` and ``verify(ctx)`` (its own end-of-run check).

Order follows the declarations: documents transforms first (by ``rank``, then name), then every
phase after the writers of what it reads (ties by name), ``*`` readers last.

Lineage: a phase's fingerprint is the hash of its name, ``version``, configuration, the
fingerprints of exactly the datasets it reads and, for a transform, the folders it reads and
writes (so adding or removing a later transform reruns it into its new place). The runner skips a
phase whose marker ``OUTPUT/_phases/<name>.json`` holds that fingerprint and whose outputs exist;
the runner alone writes markers. Files a phase's datasets match are the run's own: a rerun
removes those of a phase no longer run, and nothing else.

Phases are found in the built-in modules of ``datapipe.stages.phases`` and through the entry-point
group ``datapipe.phases`` (a user's package: ``[project.entry-points."datapipe.phases"]
mine = "mypkg.decontam"``), so a new global step is one module that subclasses ``Phase`` and
calls ``register_phase``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from pydantic import BaseModel

import datapipe.stages.phases
from datapipe import plugins
from datapipe.engine.check_cache import assets_digest
from datapipe.engine.ledger import StageCounts
from datapipe.engine.lineage import fingerprint
from datapipe.engine.shuffle_store import Store
from datapipe.io.parquet import join, read_json, write_json_atomic

MARKERS = "_phases"
ROLES = ("documents", "rejected", "tokens", "export", "report")
#: Phase 1's kept rows: what the first documents transform reads (``datapipe.engine.task.KINDS``).
PHASE1_KEPT = "_filtered"
#: Where documents transforms other than the last write their version of the documents.
INTERMEDIATE = "_documents"


@dataclass(frozen=True)
class Dataset:
    """A set of files a phase writes: ``folder`` (relative to the run folder, ``""`` for its top
    level), ``pattern`` (file names inside it; ``{task}`` stands for a phase-1 task id, ``*`` for
    anything), ``role`` (one of ``ROLES``) and ``name`` (what other phases put in ``reads``)."""

    name: str
    folder: str
    pattern: str
    role: str

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"dataset {self.name!r}: role must be one of {', '.join(ROLES)}, not {self.role!r}")

    @property
    def glob(self) -> str:
        """Glob of every file of this dataset, relative to the run folder."""
        pat = self.pattern.replace("{task}", "*")
        return f"{self.folder}/{pat}" if self.folder else pat

    def file(self, task_id: str) -> str:
        """The file of ``task_id`` (a per-task dataset), relative to the run folder."""
        name = self.pattern.replace("{task}", task_id)
        return f"{self.folder}/{name}" if self.folder else name

    @property
    def per_task(self) -> bool:
        return "{task}" in self.pattern


#: The run's documents: whichever transform runs last writes them (publish when none does).
DOCUMENTS = Dataset("documents", "documents", "{task}.parquet", "documents")


@dataclass
class PhaseContext:
    """What a phase's ``run`` gets. ``task_ids`` are the task ids of the plan (sorted): a phase
    reads only their shards. ``lineage`` maps dataset names to fingerprints computed so far.
    ``documents_in`` / ``documents_out``: folders (relative to ``output``) a documents transform
    reads and writes; None for other phases."""

    client: Any
    manifest: Any
    output: str
    storage_options: dict
    task_ids: list[str]
    lineage: dict[str, str]
    progress: Callable[[str], None] = lambda step: None
    ledger: Any = None
    documents_in: str | None = None
    documents_out: str | None = None

    def url(self, *parts: str) -> str:
        return join(self.output, *parts)


@dataclass
class PhaseResult:
    """``stats``: JSON-able figures kept in the marker and ``ledger.json``; ``ledger``: stage rows
    this phase adds to the run's funnel, in order (each one's ``in`` = the previous one's kept)."""

    stats: dict = field(default_factory=dict)
    ledger: dict[str, StageCounts] = field(default_factory=dict)


class Phase:
    """Base class of global phases. Subclasses set the class attributes and implement ``run``."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""            # progress label; the name when empty
    version: ClassVar[int] = 1          # bump when the phase decides differently on equal inputs
    sections: ClassVar[dict[str, type[BaseModel]]] = {}
    reads: ClassVar[tuple[str, ...]] = ("documents",)
    writes: ClassVar[tuple[Dataset, ...]] = ()
    #: Folders (or top-level files) of scratch work the phase owns, relative to the run folder.
    work: ClassVar[tuple[str, ...]] = ()
    rank: ClassVar[int] = 100           # order among documents transforms (lower first)
    optional: ClassVar[bool] = False    # a failure is logged and the run goes on

    def __init__(self, manifest):
        self.manifest = manifest

    @classmethod
    def enabled(cls, manifest) -> bool:
        """Default: on when any of its sections is present in the manifest."""
        return any(manifest.section(s) is not None for s in cls.sections)

    @classmethod
    def required_stages(cls, manifest) -> list[dict]:
        """Phase-1 stages this phase needs (appended to the chain when missing)."""
        return []

    @classmethod
    def transforms_documents(cls) -> bool:
        return DOCUMENTS in cls.writes

    @classmethod
    def datasets(cls, config: dict) -> tuple[Dataset, ...]:
        """The datasets written under ``config`` (a marker's ``config``, as ``config()`` returns
        it); default ``writes``. A phase whose output folder is a setting overrides this."""
        return cls.writes

    @classmethod
    def rejected(cls) -> tuple[Dataset, ...]:
        """Its datasets of role ``rejected``: where the documents it removes go."""
        return tuple(d for d in cls.writes if d.role == "rejected")

    @classmethod
    def output_globs(cls, config: dict) -> list[str]:
        """Globs, relative to the run folder, of the files the phase writes under ``config``
        besides the documents (those belong to the chain). A rerun removes what matches a glob
        of a phase no longer run, or of an earlier configuration that wrote elsewhere."""
        return [d.glob for d in cls.datasets(config) if d != DOCUMENTS]

    def config(self) -> dict:
        """The configuration the fingerprint covers (validated sections, defaults filled in)."""
        out = {}
        for s in self.sections:
            cfg = self.manifest.section(s)
            out[s] = cfg.model_dump(mode="json") if cfg is not None else None
        return out

    def effective_config(self) -> dict:
        """``config()`` with an absent section replaced by its class's defaults (what the phase
        applies then): what ``ledger.json`` records as ``phase_configs``. Not fingerprinted, so
        spelling a default out does not rerun. A section class without defaults for every field
        stays None."""
        out = self.config()
        for s, cls in self.sections.items():
            if out.get(s) is None:
                try:
                    out[s] = cls().model_dump(mode="json")
                except ValueError:  # pydantic ValidationError: a required field, no default to show
                    pass
        return out

    @classmethod
    def applied_config(cls, config: dict, stats: dict) -> dict:
        """``config`` (its recorded sections) with what the phase chose while running filled in,
        from its result ``stats`` (e.g. LSH bands and rows left null in the manifest). Default: as is."""
        return config

    def config_fingerprint(self) -> str:
        """Hash of name, ``version``, ``config()`` and, when ``assets()`` names files, the content
        digest of those files (``assets_digest``): a tokenizer or reference set replaced in place
        reruns the phase."""
        digest = self.assets_digest()
        return fingerprint(self.name, self.version, self.config(), *([digest] if digest is not None else []))

    def assets_digest(self) -> str | None:
        """``datapipe.engine.check_cache.assets_digest`` of ``assets()``: a hash of the files'
        bytes and names (no folder, no mtime), None when it names none."""

        return assets_digest(self)

    def check(self) -> None:
        """Fail before any work (missing tokenizer, bad reference directory). Raise with a clear message."""

    def assets(self) -> list | None:
        """Files ``check`` loads or whose contents decide the phase's output (a tokenizer, the
        documents of reference runs), or None: a phase naming them is checked once per config and
        size + mtime of those files (``datapipe.engine.check_cache``), and their content hash is
        part of its fingerprint (``config_fingerprint``)."""
        return None

    def outputs_present(self, ctx: PhaseContext) -> bool:
        """True when the phase's outputs are still on disk (a marker alone does not prove it).
        Default for a transform: every task with input rows has its documents shard."""
        if not self.transforms_documents():
            return True

        store = Store(ctx.output, ctx.storage_options)
        return all(store.exists(f"{ctx.documents_out}/{t}.parquet") for t in ctx.task_ids
                   if store.exists(f"{ctx.documents_in}/{t}.parquet"))

    def foreign_files(self, ctx: PhaseContext) -> list[str]:
        """Files (relative to the run folder) in the folders of its datasets that it did not
        write and its run would remove or mix with its own: the plan refuses to run
        (``PlanError``) while there are any. Per-task datasets are checked by the engine (a
        file is ours when its task has a record); default none."""
        return []

    def replaced_files(self, ctx: PhaseContext) -> list[str]:
        """Files (relative to the run folder) its next run removes before writing anew, which
        ``--dry-run`` lists; default none."""
        return []

    def verify(self, ctx: PhaseContext) -> dict:
        """The phase's own end-of-run check beyond the engine's (raise ``InvariantError``);
        returns the counts checked. A transform's conservation is checked by the engine."""
        return {}

    def summary(self, stats: dict) -> list[str]:
        """Lines ``datapipe run`` prints about this phase's result ``stats`` (default none)."""
        return []

    def run(self, ctx: PhaseContext) -> PhaseResult:  # pragma: no cover - abstract
        raise NotImplementedError


_PHASES: dict[str, type[Phase]] = {}
_LOADED = False


def register_phase(cls: type[Phase]) -> type[Phase]:
    """Class decorator: make a phase available to the runner."""
    if not cls.name or not cls.writes:
        raise ValueError(f"{cls.__name__} needs a name and the datasets it writes")
    if cls.name in _PHASES and _PHASES[cls.name] is not cls:
        raise ValueError(f"phase name {cls.name!r} registered twice")
    for d in cls.writes:
        if not isinstance(d, Dataset):
            raise ValueError(f"{cls.__name__}.writes must hold Dataset objects, not {d!r}")
    _PHASES[cls.name] = cls
    return cls


def _load() -> None:
    global _LOADED
    if not _LOADED:
        # The built-in phases: importing their package registers them (here, not at module level:
        # the phase modules import this one).

        datapipe.stages.phases.load_all()
        _LOADED = True
    for obj in plugins.load(plugins.PHASES):
        if isinstance(obj, type) and issubclass(obj, Phase) and obj.name not in _PHASES:
            register_phase(obj)   # an entry point naming the class (a module registers on import)


def run_order(classes: list[type[Phase]]) -> list[type[Phase]]:
    """``classes`` in run order (module doc): transforms by (rank, name), then the others after
    the writers of what they read, ties by name; a cycle raises ValueError."""
    transforms = sorted((c for c in classes if c.transforms_documents()), key=lambda c: (c.rank, c.name))
    rest = sorted((c for c in classes if not c.transforms_documents()), key=lambda c: c.name)
    writers: dict[str, set[str]] = {}
    for c in rest:
        for d in c.writes:
            writers.setdefault(d.name, set()).add(c.name)
    deps = {}
    for c in rest:
        if "*" in c.reads:
            deps[c.name] = {o.name for o in rest if "*" not in o.reads}
        else:
            deps[c.name] = {w for r in c.reads for w in writers.get(r, ()) if w != c.name}
    order, done = [], set()
    while len(order) < len(rest):
        ready = [c for c in rest if c.name not in done and deps[c.name] <= done]
        if not ready:
            raise ValueError("phases read each other's datasets in a cycle: "
                             + ", ".join(c.name for c in rest if c.name not in done))
        order.append(ready[0])
        done.add(ready[0].name)
    return transforms + order


def phases() -> list[type[Phase]]:
    """Every registered phase, in run order (imports built-ins and plugins on first use)."""
    _load()
    return run_order(list(_PHASES.values()))


def section_classes() -> dict[str, type[BaseModel]]:
    """Manifest section name -> pydantic class, over all registered phases."""
    out: dict[str, type[BaseModel]] = {}
    for p in phases():
        out.update(p.sections)
    return out


def documents_chain(enabled: list[Phase]) -> dict[str, tuple[str, str]]:
    """``{phase name: (folder read, folder written)}`` of the enabled documents transforms, in run
    order: the first reads phase 1's kept rows, each next one what the previous wrote, the last
    writes ``documents/``."""
    transforms = [p for p in enabled if p.transforms_documents()]
    out, src = {}, PHASE1_KEPT
    for i, p in enumerate(transforms):
        dst = DOCUMENTS.folder if i == len(transforms) - 1 else f"{INTERMEDIATE}/{p.name}"
        out[p.name] = (src, dst)
        src = dst
    return out


def phase_fingerprint(phase: Phase, lineage: dict[str, str],
                      folders: tuple[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """(fingerprint, upstream fingerprints used) of ``phase`` given the datasets computed so far;
    ``folders``: a transform's (read, written) folders."""
    keys = sorted(lineage) if "*" in phase.reads else list(phase.reads)
    upstream = {k: lineage.get(k, "absent") for k in keys}
    parts: list = [phase.config_fingerprint(), upstream]
    if folders is not None:
        parts.append(list(folders))
    return fingerprint(*parts), upstream


def initial_lineage(tasks_fp: str) -> dict[str, str]:
    """Lineage before any phase: phase 1's rows, which are also the first version of the documents."""
    return {"tasks": tasks_fp, DOCUMENTS.name: tasks_fp}


def marker_url(output: str, name: str) -> str:
    return join(output, MARKERS, f"{name}.json")


def read_marker(output: str, name: str, storage_options: dict | None = None) -> dict | None:
    return read_json(marker_url(output, name), storage_options)


def write_marker(output: str, name: str, record: dict, storage_options: dict | None = None) -> None:
    write_json_atomic(marker_url(output, name), record, storage_options)
