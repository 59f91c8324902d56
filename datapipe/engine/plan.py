"""What a run will do, and why: every phase-1 task and every phase as skip / rerun / run.

``make_plan`` reads only success records and phase markers (nothing is written), so
``datapipe run --dry-run`` prints exactly what a run would recompute. The same plan drives the
run: its task specs are what phase 1 submits, its list of stale task outputs is what the run
removes (outputs of inputs no longer in the manifest), and its phase order is the run's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from datapipe.engine.lineage import canonical_json, fingerprint
from datapipe.engine.task import KINDS, common_prefix, marker_url, missing_outputs
from datapipe.engine.task_plan import TaskSpec, plan_specs, stage_assets
from datapipe.io.parquet import fs_and_path, join, read_json
from datapipe.io.paths import input_identity
from datapipe.phase import (
    DOCUMENTS,
    INTERMEDIATE,
    PhaseContext,
    documents_chain,
    initial_lineage,
    phase_fingerprint,
    phases,
    read_marker,
)
from datapipe.phase import marker_url as phase_marker_url
from datapipe.stage import registry

#: Where phase-1 tasks leave files; phases add per-task files there too (``rejected/dedup-<task>``).
TASK_FOLDERS = ("_tasks", *KINDS.values(), DOCUMENTS.folder)
PHASE1 = "phase1"
#: A task id as ``datapipe.engine.task_plan.task_id_for`` makes it (``-pNNNNN`` for a byte-range part).
TASK_ID = r"(?P<task>.+-[0-9a-f]{8}(?:-p\d{5})?)"


class PlanError(ValueError):
    """``--from``/``--only`` names a phase this manifest does not run, or the output holds files
    datapipe did not write where a rerun would remove stale ones."""




def task_file_patterns() -> dict[str, list[re.Pattern]]:
    """Folder -> regexes of the per-task file names datapipe writes there: phase 1's
    ``<task>.parquet|json`` and every registered phase's per-task datasets (group ``task``)."""
    out: dict[str, list[re.Pattern]] = {f: [re.compile(TASK_ID + r"\.(?:parquet|json)")] for f in TASK_FOLDERS}
    for cls in phases():
        for ds in cls.writes:
            if ds.per_task and ds.folder:   # also a phase's own per-task folder (dolma/)
                head, _, tail = ds.pattern.partition("{task}")
                out.setdefault(ds.folder, []).append(re.compile(re.escape(head) + TASK_ID + re.escape(tail)))
    return out


@dataclass
class TaskPlan:
    spec: TaskSpec
    action: str          # skip | rerun | read
    why: str
    start: int | None = None  # first stage rerun from stored rows (action rerun)


@dataclass
class PhasePlan:
    name: str
    action: str          # skip | run
    why: str
    fingerprint: str
    upstream: dict
    forced: bool = False  # --from / --only: rerun whatever the marker says


@dataclass
class RunPlan:
    tasks: list[TaskPlan]
    phases: list[PhasePlan]
    stale: list[str] = field(default_factory=list)       # files of task ids no longer in the plan
    skipped_inputs: list[tuple[str, str]] = field(default_factory=list)
    duplicates: list[tuple[str, str]] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)   # files phases that run remove before writing anew

    @property
    def specs(self) -> list[TaskSpec]:
        return [t.spec for t in self.tasks]

    @property
    def task_ids(self) -> list[str]:
        return sorted(t.spec.task_id for t in self.tasks)


def tasks_fingerprint(records: list[dict]) -> str:
    """Lineage of phase 1's output: every task id with its fingerprint (``failed:`` for a task that failed)."""
    return fingerprint(sorted((r["task_id"], ("failed:" if r.get("failed") else "") + r["fingerprint"])
                              for r in records))


def manifest_specs(manifest, inputs: list[str]) -> list[TaskSpec]:
    """Phase-1 task specs of ``manifest`` over canonical ``inputs``, with lineage fingerprints."""

    mi = manifest.inputs
    so = mi.storage_options
    # Defaults filled in: a default changed in code changes the fingerprint too, and spelling a
    # default out in the manifest does not.
    stages = manifest.effective_stage_configs()
    ids = {p: input_identity(p, so, mi.identity) for p in inputs}
    read_options = {k: v for k, v in {"max_record_bytes": getattr(mi, "max_record_bytes", None),
                                      "limit": mi.limit}.items() if v is not None}
    split = 0 if mi.limit else mi.split_bytes  # "N records per file": a limited file is one task
    return plan_specs(inputs, manifest.output, stages, "", mi.format, mi.preset, mi.fields, split,
                      manifest.batch_size, so, identities=ids, read_options=read_options,
                      assets=stage_assets(stages))


def _task_plan(spec: TaskSpec, force: bool) -> TaskPlan:
    done = read_json(marker_url(spec), spec.storage_options)
    if force:
        return TaskPlan(spec, "read", "forced (--from phase1)")
    if done is None:
        fs, p = fs_and_path(join(spec.output, "errors", f"{spec.task_id}.parquet"), spec.storage_options)
        return TaskPlan(spec, "read", "retry: no success record (failed or interrupted before)"
                        if fs.exists(p) else "input added")
    gone = missing_outputs(spec, done)
    if gone:
        return TaskPlan(spec, "read", f"outputs missing ({PurePosixPath(gone[0]).parent.name}/"
                                      f"{PurePosixPath(gone[0]).name}): file read again")
    if done.get("fingerprint") == spec.fingerprint:
        return TaskPlan(spec, "skip", "up to date")
    k = common_prefix(done.get("prefix"), spec.prefix)
    if k == 0:
        return TaskPlan(spec, "read", "input or read settings changed" if done.get("prefix")
                        else "made by an older datapipe")
    new = [next(iter(s)) for s in spec.stages]
    old = done.get("stage_names") or []
    start = k - 1
    old_assets = done.get("stage_assets") or [None] * len(old)
    if (start < len(new) and start < len(old) and new[start] == old[start] and spec.assets
            and done.get("stages") and canonical_json(done["stages"][start]) == canonical_json(spec.stages[start])
            and old_assets[start] != spec.assets[start]):
        why = f"files of {new[start]} changed"
    elif start < len(new) and start < len(old) and new[start] == old[start]:
        why = f"config of {new[start]} changed"
    elif start < len(new) and new[start] not in old:
        why = f"stage {new[start]} added"
    elif start < len(old) and old[start] not in new:
        why = f"stage {old[start]} removed"
    else:
        why = "stage order changed"

    reg = registry()
    if k == 1 or any("payload" in getattr(reg[n], "needs", ()) for n in new[start:]):
        return TaskPlan(spec, "read", why + " (a stage that needs the raw record reruns: file read again)")
    return TaskPlan(spec, "rerun", why + (f" (rerun from {new[start]} on stored rows)" if start < len(new)
                                          else " (stored rows re-split)"), start)


#: What datapipe's atomic writers append to a file's name while writing it (``.tmp-<hex>``, the
#: token-shard writer's ``.tmp-<pid>-<hex>``).
TEMP_SUFFIX = re.compile(r"\.tmp-(?:\d+-)?[0-9a-f]+")


def recorded_task_ids(fs, root: str) -> set[str]:
    """Task ids this output has (or had) a record of: a success record ``_tasks/<id>.json`` or the
    errors shard ``errors/<id>.parquet`` a task writes (a task that failed on every attempt has
    only that). A per-task file of any other id is not ours."""
    out = set()
    for folder, ext in (("_tasks", ".json"), (KINDS["errors"], ".parquet")):
        for p in fs.glob(f"{root}/{folder}/*{ext}"):
            name = PurePosixPath(p).name
            if re.fullmatch(TASK_ID + re.escape(ext), name):
                out.add(name[: -len(ext)])
    return out


def _removal_order(path: str) -> tuple:
    """Records last: a run killed while removing stale files leaves each task's record (the
    proof the rest was ours) until its other files are gone."""
    parts = PurePosixPath(path).parts
    rank = 2 if "_tasks" in parts else 1 if KINDS["errors"] in parts[-2:-1] else 0
    return rank, path


def stale_files(output: str, storage_options: dict | None, task_ids: set[str]) -> list[str]:
    """Files under the task folders whose task id is not in ``task_ids`` (inputs removed), and
    leftovers of killed writers (``*.tmp-*``, there and in ``_phases/`` and the output's top level),
    in removal order (success records last).

    A per-task file is ours only when its task id has (or had) a record (``recorded_task_ids``):
    a name that merely looks like one (``documents/thesis-2024abcd.parquet``) is not. Raises
    PlanError, before anything is removed, when the folders datapipe manages hold a file that is
    not ours (``notes.txt``, ``thesis.parquet`` in an existing directory given as the output):
    removing those would delete a user's files without a word.
    """
    fs, root = fs_and_path(output, storage_options)
    root = root.rstrip("/")
    out, foreign = [], []
    patterns = task_file_patterns()
    known = recorded_task_ids(fs, root) | set(task_ids)
    # versions of the documents between two transforms: the engine's own, wholly
    folders = list(patterns) + [p[len(root) + 1:] for p in fs.glob(f"{root}/{INTERMEDIATE}/*") if fs.isdir(p)]
    for folder in folders:
        for p in fs.glob(f"{root}/{folder}/*"):
            name = PurePosixPath(p).name
            base, tmp, rest = name.partition(".tmp-")
            is_temp = bool(tmp) and TEMP_SUFFIX.fullmatch(tmp + rest) is not None
            ids = {m.group("task") for m in (rx.fullmatch(base) for rx in patterns.get(folder, patterns["_tasks"]))
                   if m}
            if ids & set(task_ids) and not tmp:   # "dedup-<id>" also reads as task "dedup-<id>"
                continue
            elif folder.startswith(INTERMEDIATE + "/") or (is_temp and ids & known):
                out.append(p)   # the versions between two transforms are the engine's own, wholly
            elif ids & known and not tmp:
                out.append(p)
            else:
                foreign.append(f"{folder}/{name}")
    # a killed run's half-written marker or ledger (write_json_atomic's temporary name)
    for g in ("_phases/*.json.tmp-*", "ledger.json.tmp-*"):
        for p in fs.glob(f"{root}/{g}"):
            rest = PurePosixPath(p).name.partition(".tmp-")[2]
            if fs.isfile(p) and TEMP_SUFFIX.fullmatch(".tmp-" + rest):
                out.append(p)
    if foreign:
        raise PlanError(f"{output} holds {len(foreign)} file(s) that datapipe did not write in the folders it "
                        f"manages ({', '.join(sorted(foreign)[:3])}{', ...' if len(foreign) > 3 else ''}): a run "
                        "would delete them; move them away or choose another --output")
    return sorted(out, key=_removal_order)


def own_folders(manifest) -> list[str]:
    """Folders of the output (relative) that a run of ``manifest`` writes in or removes from: the
    task folders, markers, versions of the documents and every registered phase's datasets and
    work folders, under its present config and the one its marker recorded."""
    out = set(TASK_FOLDERS) | {"_phases", INTERMEDIATE}
    so = manifest.inputs.storage_options
    for cls in phases():
        configs = [cls(manifest).config()] if cls.enabled(manifest) else []
        m = read_marker(manifest.output, cls.name, so)
        if m is not None:
            configs.append(m.get("config") or {})
        for cfg in configs:
            out |= {d.folder.split("/")[0] for d in cls.datasets(cfg) if d.folder}
        out |= {w.split("/")[0] for w in cls.work}
    return sorted(out)


def symlinked_folders(manifest) -> list[str]:
    """Those of ``own_folders`` (and the versions of the documents under ``_documents/``) that are
    symbolic links on a local output: a run would delete and write in the folder they point to."""
    import os

    fs, root = fs_and_path(manifest.output, manifest.inputs.storage_options)
    proto = fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol
    if proto not in ("file", "local") or not os.path.isdir(root):
        return []
    names = own_folders(manifest)
    inter = os.path.join(root, INTERMEDIATE)
    if os.path.isdir(inter) and not os.path.islink(inter):
        names += [f"{INTERMEDIATE}/{n}" for n in sorted(os.listdir(inter))]
    return [n for n in names if os.path.islink(os.path.join(root, n))]


def check_own_folders(manifest) -> None:
    """Raise PlanError (one line) when one of the run's own folders in the output is a symlink:
    checked before any work, so nothing is removed or written through it."""
    links = symlinked_folders(manifest)
    if links:
        raise PlanError(f"{manifest.output}: {', '.join(n + '/' for n in links)} "
                        f"{'is a symbolic link' if len(links) == 1 else 'are symbolic links'}: a run would "
                        "delete and write files where it points; replace it with a real folder or choose "
                        "another --output")


def phase_leftovers(manifest) -> list[str]:
    """Files a fresh run of ``manifest`` would not write: those of a phase it no longer runs (a
    ``tokenize:`` section or ``dolma_jsonl`` taken out, ``dedup:`` replaced by publishing), with that
    phase's marker, and those an earlier configuration of a phase wrote elsewhere (``tokenize.output``
    changed). Found from each marker's recorded config and the phase's ``output_globs``."""
    so = manifest.inputs.storage_options
    fs, root = fs_and_path(manifest.output, so)
    root = root.rstrip("/")
    enabled = [ph(manifest) for ph in phases() if ph.enabled(manifest)]
    now = {g for ph in enabled for g in ph.output_globs(ph.config())}
    out: set[str] = set()
    # versions of the documents no transform of this chain writes any more
    chain = {dst for _, dst in documents_chain(enabled).values()}
    for d in fs.glob(f"{root}/{INTERMEDIATE}/*"):
        if d[len(root) + 1:] not in chain:
            out.update(p for p in fs.find(d))
    for cls in phases():
        m = read_marker(manifest.output, cls.name, so)
        if m is None:
            continue
        for g in cls.output_globs(m.get("config") or {}):
            if g not in now:
                out.update(p for p in fs.glob(f"{root}/{g}") if fs.isfile(p))
        if not cls.enabled(manifest):
            out.add(fs_and_path(phase_marker_url(manifest.output, cls.name), so)[1])
    return sorted(out)


def _producer(name: str, enabled, before: str) -> str:
    """The phase that wrote dataset ``name`` last before phase ``before`` ("phase 1" for its rows)."""
    last = "phase 1"
    for ph in enabled:
        if ph.name == before:
            break
        if any(d.name == name for d in ph.writes):
            last = ph.name
    return last


def plan_phases(manifest, lineage: dict[str, str], task_ids: list[str], forced: set[str]) -> list[PhasePlan]:
    """Each enabled phase with its fingerprint and whether its marker still matches."""
    enabled = [ph(manifest) for ph in phases() if ph.enabled(manifest)]
    so = manifest.inputs.storage_options
    chain = documents_chain(enabled)
    lineage = dict(lineage)
    out = []
    for ph in enabled:
        folders = chain.get(ph.name)
        ctx = phase_context(None, manifest, task_ids, lineage, folders)
        fp, upstream = phase_fingerprint(ph, lineage, folders)
        m = read_marker(manifest.output, ph.name, so)
        if ph.name in forced:
            action, why = "run", "forced (--only/--from)"
        elif m is None or "upstream" not in m:
            action, why = "run", "not run yet"
        elif m.get("fingerprint") == fp and ph.outputs_present(ctx):
            action, why = "skip", "up to date"
        elif m.get("fingerprint") == fp:
            action, why = "run", "outputs missing"
        elif ("assets" in m and m["assets"] != ph.assets_digest()
              and canonical_json(m.get("config")) == canonical_json(ph.config())):
            action, why = "run", f"files of {ph.name} changed"
        elif m.get("config_fingerprint") != ph.config_fingerprint():
            action, why = "run", f"config of {ph.name} changed"
        elif folders is not None and m.get("folders") not in (None, list(folders)):
            action, why = "run", f"writes the documents to {folders[1]}/ now (the chain of transforms changed)"
        else:
            ups = [k for k in upstream if m["upstream"].get(k) != upstream[k]]
            names = sorted({_producer(k, enabled, ph.name) for k in ups}) or ["upstream"]
            action, why = "run", "upstream " + ", ".join(names) + " changed"
        out.append(PhasePlan(ph.name, action, why, fp, upstream, forced=ph.name in forced))
        for d in ph.writes:
            lineage[d.name] = fp
    return out


def phase_context(client, manifest, task_ids: list[str], lineage: dict, folders: tuple[str, str] | None,
                  progress=None, ledger=None) -> PhaseContext:
    """The context a phase runs (or is planned) with; ``folders``: a transform's (read, written)."""
    ctx = PhaseContext(client, manifest, manifest.output, manifest.inputs.storage_options, task_ids, lineage,
                       ledger=ledger, documents_in=folders[0] if folders else None,
                       documents_out=folders[1] if folders else None)
    if progress is not None:
        ctx.progress = progress
    return ctx


def check_phase_names(manifest, force_from: str | None = None, only: list[str] | None = None) -> list[str]:
    """The enabled phases' names, after checking ``force_from`` and ``only`` name one of them (or
    ``phase1``). Raises PlanError. Cheap: run before anything is created (the output folder)."""
    names = [ph.name for ph in phases() if ph.enabled(manifest)]
    for n in ([force_from] if force_from else []) + list(only or []):
        if n != PHASE1 and n not in names:
            raise PlanError(f"unknown or disabled phase {n!r}; this manifest runs: {PHASE1}, {', '.join(names)}")
    return names


def make_plan(manifest, inputs, force_from: str | None = None, only: list[str] | None = None) -> RunPlan:
    """The plan of a run of ``manifest`` over ``inputs`` (an ``InputSet`` or list of canonical names).

    ``force_from``: ``phase1`` (read every file again) or a phase name (that phase and every later
    one rerun); ``only``: phase names rerun whatever their markers say. Raises PlanError for an
    unknown phase name.
    """
    names = check_phase_names(manifest, force_from, only)
    check_own_folders(manifest)
    forced: set[str] = set(only or [])
    if force_from:   # phase1: every phase after it too, as --help says
        forced |= set(names if force_from == PHASE1 else names[names.index(force_from):])
    specs = manifest_specs(manifest, list(inputs))
    tasks = [_task_plan(s, force_from == PHASE1) for s in specs]
    ids = sorted(s.task_id for s in specs)
    lineage = initial_lineage(fingerprint(sorted((s.task_id, s.fingerprint) for s in specs)))
    planned = plan_phases(manifest, lineage, ids, forced)
    stale = sorted(set(stale_files(manifest.output, manifest.inputs.storage_options, set(ids)))
                   | set(phase_leftovers(manifest)), key=_removal_order)
    return RunPlan(tasks, planned, stale, list(getattr(inputs, "skipped", [])),
                   list(getattr(inputs, "duplicates", [])), phase_files(manifest, ids, planned))


def phase_files(manifest, task_ids: list[str], planned: list[PhasePlan]) -> list[str]:
    """Files the phases that run remove before writing anew (``Phase.replaced_files``), after
    checking that no phase's folder holds a file it did not write (``Phase.foreign_files``:
    PlanError naming them, before anything is removed)."""
    enabled = [ph(manifest) for ph in phases() if ph.enabled(manifest)]
    chain = documents_chain(enabled)
    runs = {p.name for p in planned if p.action == "run"}
    foreign, replaced = [], []
    for ph in enabled:
        ctx = phase_context(None, manifest, task_ids, {}, chain.get(ph.name))
        foreign += ph.foreign_files(ctx)
        if ph.name in runs:
            replaced += ph.replaced_files(ctx)
    if foreign:
        raise PlanError(f"{manifest.output} holds {len(foreign)} file(s) that datapipe did not write in the "
                        f"folders of its phases ({', '.join(sorted(foreign)[:3])}{', ...' if len(foreign) > 3 else ''})"
                        ": a run would delete them or mix them with its output; move them away or choose "
                        "another --output")
    return sorted(replaced)


def describe(plan: RunPlan) -> list[str]:
    """Human-readable lines: one per task and phase, then skipped inputs and stale outputs."""
    lines = ["phase 1 (per input file):"]
    for t in plan.tasks:
        part = f" part {t.spec.part[0]}-{t.spec.part[1]}" if t.spec.part else ""
        lines.append(f"  {t.action:5s} {t.spec.task_id}{part}: {t.why}   [{t.spec.input}]")
    lines.append("phases:")
    for p in plan.phases:
        lines.append(f"  {p.action:5s} {p.name}: {p.why}")
    if plan.stale:
        lines.append(f"removed (inputs no longer in the manifest, phases no longer run, or leftovers of killed "
                     f"writers): {len(plan.stale)} file(s)")
        lines += [f"  {p}" for p in plan.stale]
    if plan.replaced:
        lines.append(f"replaced (removed before the phases that run write them anew): {len(plan.replaced)} file(s)")
        lines += [f"  {p}" for p in plan.replaced]
    if plan.duplicates:
        lines.append("inputs naming a file already listed (read once):")
        lines += [f"  {given} -> {canon}" for given, canon in plan.duplicates]
    if plan.skipped_inputs:
        lines.append(f"files skipped while expanding directory inputs: {len(plan.skipped_inputs)}")
        lines += [f"  {p}: {why}" for p, why in plan.skipped_inputs]
    return lines


__all__ = ["make_plan", "describe", "RunPlan", "TaskPlan", "PhasePlan", "tasks_fingerprint", "PHASE1"]
