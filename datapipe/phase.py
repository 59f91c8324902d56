"""The phase contract: global work over the whole run, after the per-file tasks of phase 1.

A phase (dedup, publishing ``documents/``, the Dolma export, mix + tokenize, the report) is a
registered class:

* ``name``: the step's name in the CLI (``--only``/``--from``), markers and ``ledger.json``;
* ``sections``: manifest sections it is configured by, each with its strict pydantic class;
* ``reads`` / ``writes``: the named outputs it consumes and produces (``tasks`` is phase 1's
  output; ``*`` reads everything produced so far);
* ``enabled(manifest)``, ``required_stages(manifest)`` (phase-1 stages it needs appended to the
  chain), ``check(manifest)`` (before any work), ``outputs_present(ctx)`` and ``run(ctx)``.

Lineage: a phase's fingerprint is the hash of its name, ``version``, configuration and the
fingerprints of exactly the outputs it reads. The runner skips a phase whose marker
``OUTPUT/_phases/<name>.json`` holds that fingerprint and whose outputs exist; anything upstream
that changed changes the fingerprint, so a rerun recomputes exactly what depends on the change.
A new global step is one module that subclasses ``Phase`` and calls ``register_phase``.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from pydantic import BaseModel

from datapipe.engine.ledger import StageCounts
from datapipe.io.parquet import join, read_json, write_json_atomic

MARKERS = "_phases"


def fingerprint(*parts: Any) -> str:
    """sha256 (hex) of the JSON of ``parts`` (keys sorted): equal inputs -> equal fingerprint."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class PhaseContext:
    """What a phase's ``run`` gets. ``documents`` are the task ids of the plan (sorted): a phase
    reads only their shards. ``lineage`` maps output names to fingerprints computed so far."""

    client: Any
    manifest: Any
    output: str
    storage_options: dict
    task_ids: list[str]
    lineage: dict[str, str]
    progress: Callable[[str], None] = lambda step: None
    ledger: Any = None

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
    version: ClassVar[int] = 1          # bump when the phase decides differently on equal inputs
    sections: ClassVar[dict[str, type[BaseModel]]] = {}
    reads: ClassVar[tuple[str, ...]] = ("tasks",)
    writes: ClassVar[str] = ""

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

    def config_fingerprint(self) -> str:
        return fingerprint(self.name, self.version, self.config())

    def check(self) -> None:
        """Fail before any work (missing tokenizer, bad reference directory). Raise with a clear message."""

    def assets(self) -> list | None:
        """Files ``check`` loads, or None: as ``Stage.assets`` (a phase naming them is checked once
        per config and size + mtime of those files, ``datapipe.engine.check_cache``)."""
        return None

    def outputs_present(self, ctx: PhaseContext) -> bool:
        """True when the phase's outputs are still on disk (a marker alone does not prove it)."""
        return True

    @classmethod
    def output_globs(cls, config: dict) -> list[str]:
        """Glob patterns, relative to the output, of the files the phase writes under ``config``
        (a marker's ``config``, as ``config()`` returns it). A rerun removes what matches a pattern
        of a phase no longer run, or of an earlier configuration that wrote elsewhere, so that it
        equals a fresh run (``datapipe.engine.plan.phase_leftovers``)."""
        return []

    def run(self, ctx: PhaseContext) -> PhaseResult:  # pragma: no cover - abstract
        raise NotImplementedError


_PHASES: dict[str, type[Phase]] = {}


def register_phase(cls: type[Phase]) -> type[Phase]:
    """Class decorator: make a phase available to the runner, in registration order."""
    if not cls.name or not cls.writes:
        raise ValueError(f"{cls.__name__} needs a name and the output it writes")
    if cls.name in _PHASES and _PHASES[cls.name] is not cls:
        raise ValueError(f"phase name {cls.name!r} registered twice")
    _PHASES[cls.name] = cls
    return cls


def phases() -> list[type[Phase]]:
    """Every registered phase, in run order (imports the phase modules on first use)."""
    from datapipe.stages.phases import PHASE_MODULES, load_all

    load_all()
    # Run order is the order of PHASE_MODULES, not of import (a module imported early registers early).
    rank = {m: i for i, m in enumerate(PHASE_MODULES)}
    return sorted(_PHASES.values(), key=lambda c: rank.get(c.__module__, len(rank)))


def section_classes() -> dict[str, type[BaseModel]]:
    """Manifest section name -> pydantic class, over all registered phases."""
    out: dict[str, type[BaseModel]] = {}
    for p in phases():
        out.update(p.sections)
    return out


def phase_fingerprint(phase: Phase, lineage: dict[str, str]) -> tuple[str, dict[str, str]]:
    """(fingerprint, upstream fingerprints used) of ``phase`` given the outputs computed so far."""
    keys = sorted(lineage) if "*" in phase.reads else list(phase.reads)
    upstream = {k: lineage.get(k, "absent") for k in keys}
    return fingerprint(phase.config_fingerprint(), upstream), upstream


def marker_url(output: str, name: str) -> str:
    return join(output, MARKERS, f"{name}.json")


def read_marker(output: str, name: str, storage_options: dict | None = None) -> dict | None:
    return read_json(marker_url(output, name), storage_options)


def write_marker(output: str, name: str, record: dict, storage_options: dict | None = None) -> None:
    write_json_atomic(marker_url(output, name), record, storage_options)
