"""Run a job on Dask: phase 1 per input file, then the registered global phases.

Phase 1 is one task per input file (retried by Dask on failure; a file whose task fails on every
attempt is recorded as errored, see datapipe.engine.task_failure, and the run goes on). Then every
enabled phase of ``datapipe.phase`` runs in registration order (dedup or publish -> exports ->
mix + tokenize -> report); the runner knows none by name. What reruns is decided by lineage
(``datapipe.engine.plan``): a task or phase whose fingerprint matches its stored record is skipped, so a
rerun into an existing directory equals a fresh run of the final manifest. The run holds a lock
on its output, removes the outputs of inputs no longer in the manifest, and ends by checking
the invariant of ``datapipe.engine.verify`` (``in == kept + rejected + errored`` at every stage,
documents and token shards agree with the ledger).
"""
from __future__ import annotations

import json
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass

from datapipe import monitor
from datapipe.engine import check_cache, procenv
from datapipe.engine.asset_check import asset_error
from datapipe.engine.cluster import HealingLocalCluster
from datapipe.engine.ledger import Ledger, StageCounts
from datapipe.engine.lock import OutputLock
from datapipe.engine.orphans import orphaned_outputs
from datapipe.engine.plan import (
    PHASE1,
    RunPlan,
    check_phase_names,
    make_plan,
    phase_context,
    tasks_fingerprint,
)
from datapipe.engine.procenv import ProcessLimits
from datapipe.engine.task import PROGRESS_TOPIC, run_file_task
from datapipe.engine.task_failure import record_failed_task
from datapipe.engine.verify import verify_run
from datapipe.engine.warmup import ChainWarmup
from datapipe.formats.dataset_card import write_card
from datapipe.io.parquet import fs_and_path, join, remove_file, write_json_atomic
from datapipe.io.paths import InputError, InputSet, resolve_inputs
from datapipe.io.readers import detect_format
from datapipe.manifest.load import Manifest, ManifestError
from datapipe.phase import (
    INTERMEDIATE,
    documents_chain,
    initial_lineage,
    phase_fingerprint,
    phases,
    read_marker,
    write_marker,
)

log = logging.getLogger("datapipe")

#: Key prefix of every phase-1 task (``read-extract-filter-<task id>-<fingerprint>``).
PHASE1_KEY = "read-extract-filter-"


@dataclass
class RunResult:
    ledger: Ledger
    tasks: list[dict]
    output: str
    dashboard: str | None
    seconds: float
    phases: dict
    report: str | None = None

    @property
    def failed(self) -> list[dict]:
        """Phase-1 tasks that failed on every attempt: ``{task_id, input, part, reason, detail}``."""
        return failed_tasks(self.tasks)


def failed_tasks(records: list[dict]) -> list[dict]:
    return [{"task_id": r["task_id"], "input": r["input"], "part": r.get("part"), **r["failed"]}
            for r in records if r.get("failed")]


def spec_bytes(specs, storage_options: dict | None) -> dict[str, int]:
    """Input bytes each phase-1 task reads: a JSONL part its byte range, else the file's size
    shared evenly by its parts (Parquet row-group parts: close enough for a progress bar)."""
    from fsspec.core import url_to_fs

    sizes: dict[str, int] = {}
    parts: dict[str, int] = {}
    for s in specs:
        parts[s.input] = parts.get(s.input, 0) + 1
        if s.input not in sizes:
            try:
                fs, p = url_to_fs(s.input, **(storage_options or {}))
                sizes[s.input] = int(fs.size(p) or 0)
            except Exception:  # noqa: BLE001 - unknown size (e.g. no HEAD): the bar just lacks it
                sizes[s.input] = 0
    return {s.task_id: (s.part[1] - s.part[0]) if s.part and s.input_format == "jsonl"
            else sizes[s.input] // parts[s.input] for s in specs}


#: Formats whose record offsets (``warc_offset``) are byte positions in the file as stored.
_BYTE_OFFSET_FORMATS = ("warc", "arc", "wet")


def offset_starts(specs) -> dict[str, int | None]:
    """Per phase-1 task, the byte at which its records' offsets start (0, or its part's first
    byte), or None where offsets are not positions in the stored file (compressed JSONL counts
    decompressed bytes, Parquet counts rows): what the progress bar may read as bytes done."""
    out: dict[str, int | None] = {}
    for s in specs:
        plain_jsonl = s.input_format == "jsonl" and not s.input.endswith((".gz", ".zst", ".bz2", ".xz"))
        ok = s.input_format in _BYTE_OFFSET_FORMATS or plain_jsonl
        out[s.task_id] = (s.part[0] if s.part else 0) if ok else None
    return out


class ClusterError(RuntimeError):
    """The Dask scheduler named by ``cluster.address`` / ``--scheduler`` cannot be reached, or the
    local cluster cannot start (its dashboard address does not resolve or cannot be bound)."""


#: Stage configs whose assets this process has checked (``check_before_work``).
_CHECKED: set[str] = set()


def check_before_work(manifest: Manifest, probe_output: bool = True) -> InputSet:
    """Everything that can fail before work starts: stage assets (models, lists), phase assets
    (tokenizer, reference directories), inputs, the output location.

    A stage config's assets are checked once per process (loading them is most of the cost of a
    small run), and once per size + mtime of its asset files across processes where the stage
    names them (``Stage.assets``, ``datapipe.engine.check_cache``); an asset removed after that fails the
    worker's setup instead, which errors the file's task with the reason.

    Returns the resolved inputs (canonical names; ``skipped``/``duplicates`` listed).
    ``probe_output=False`` (``--dry-run``) leaves the output location untouched.
    Raises ModelError / InputError / ManifestError / TokenizerError.
    """

    for i, st in enumerate(manifest.build_stages()):
        # Assets resolve against the working directory and DATAPIPE_* variables: part of the key.
        env = sorted((k, v) for k, v in os.environ.items() if k.startswith("DATAPIPE_"))
        key = json.dumps([st.name, st.config.model_dump(mode="json"), os.getcwd(), env], sort_keys=True, default=str)
        if key not in _CHECKED:  # a notebook's second run of one chain does not load every model again
            if not check_cache.is_checked(st):  # checked by an earlier process, same asset files
                with asset_error(manifest, ("stages", i, st.name) if i < len(manifest.stages) else (st.name,)):
                    st.check()
                check_cache.remember(st)
            _CHECKED.add(key)
    for cls in phases():
        if cls.enabled(manifest):
            ph = cls(manifest)
            if not check_cache.is_checked(ph):
                with asset_error(manifest, (ph.name,)):
                    ph.check()
                check_cache.remember(ph)
    src = manifest.inputs
    inputs = resolve_inputs(src.paths, src.crawl, src.crawl_files, src.base_url, src.storage_options,
                            output=manifest.output)
    check_extraction(manifest, inputs)
    if probe_output:
        check_output_writable(manifest.output, src.storage_options)
    else:
        check_output_usable(manifest.output, src.storage_options)
    return inputs


def check_extraction(manifest: Manifest, inputs) -> None:
    """HTML inputs (WARC / ARC responses) need the ``extract`` stage: without it every page was
    kept with empty text and tokenized as a lone EOS. Raises ManifestError naming a file."""

    if any(next(iter(s)) == "extract" for s in manifest.stages):
        return
    fmt = manifest.inputs.format
    for path in inputs:
        name = str(path).lower()
        kind = detect_format(name) if fmt == "auto" else fmt
        if kind in ("warc", "arc") and ".wet" not in name and ".wat" not in name:  # WET is text already
            raise ManifestError(f"{manifest.source_file or 'manifest'}: stages: input {path} holds HTML pages "
                                "(WARC/ARC) and no stage extracts their text: add '- extract: {}' to stages")


def check_output_usable(output: str, storage_options: dict | None = None) -> None:
    """What can be told without writing (``--dry-run``): the output location is not a file and, on
    a local disk, its nearest existing folder is one this process may write in. Raises InputError."""

    try:
        fs, root = fs_and_path(output, storage_options)
        is_file = fs.exists(root) and not fs.isdir(root)
    except Exception as e:  # noqa: BLE001 - unreachable store, bad credentials: the real run would fail too
        raise InputError(f"output location not usable: {output}: {type(e).__name__}: {e}") from e
    if is_file:
        raise InputError(f"output location is a file, not a folder: {output}")
    proto = fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol
    if proto not in ("file", "local"):
        return
    here = os.path.abspath(root)
    while not os.path.exists(here):
        here = os.path.dirname(here)
    if not os.path.isdir(here):
        raise InputError(f"output location not usable: {output}: {here} is a file, not a folder")
    if not os.access(here, os.W_OK | os.X_OK):
        raise InputError(f"output location not writable: {output}: no permission to write in {here}")


def check_output_writable(output: str, storage_options: dict | None = None) -> None:
    """Create the output location and write + delete a probe file there; raise InputError if not possible."""
    import uuid


    try:
        fs, root = fs_and_path(output, storage_options)
        fs.makedirs(root, exist_ok=True)
        probe = f"{root.rstrip('/')}/.write-probe-{uuid.uuid4().hex[:8]}"
        with fs.open(probe, "wb") as fh:
            fh.write(b"ok")
        fs.rm(probe)
    except Exception as e:  # noqa: BLE001 - any failure here means the run could not write its shards
        raise InputError(f"output location not writable: {output}: {type(e).__name__}: {e}") from e


def dashboard_exposed(address: str | None) -> bool:
    """True when a dashboard address binds beyond loopback (``:8787`` and ``0.0.0.0:8787`` bind every interface)."""
    if not address:
        return False
    host = address.rsplit(":", 1)[0].strip("[]") if ":" in address else address
    return host not in ("127.0.0.1", "localhost", "::1")


#: With no worker at all for this long, a LocalCluster's waiting tasks fail (NoValidWorkerError).
NO_WORKERS_TIMEOUT = "10 minutes"


def local_cluster(n_workers: int, threads_per_worker: int = 1, memory_limit="auto",
                  dashboard_address: str | None = "127.0.0.1:8787", retries: int = 2):
    """The LocalCluster of ``datapipe run`` (and benchmarks/bench_scaling.py): worker processes
    (they must be able to start the extraction sandbox subprocess), each started with
    ``procenv.worker_environ`` (malloc thresholds, library thread pools capped to its threads:
    one host, one worker per core, see datapipe/engine/procenv.py).
    allowed_failures: a task whose worker dies (e.g. over memory_limit) is retried ``retries``
    times, like a task that raises, then reported as KilledWorker (its file errored, see run).
    A killed worker comes back (``HealingLocalCluster``: Dask's LocalCluster can drop it for
    good); should every worker stay gone for ``NO_WORKERS_TIMEOUT``, the waiting tasks fail
    (Dask's ``no-workers-timeout``) instead of the run waiting forever."""
    import dask


    env = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **procenv.worker_environ(threads_per_worker)}
    cfg = {"distributed.nanny.pre-spawn-environ": env,
           "distributed.scheduler.no-workers-timeout": NO_WORKERS_TIMEOUT, **procenv.DASK_CONFIG}
    with dask.config.set(cfg):
        return HealingLocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                                   memory_limit=memory_limit, dashboard_address=dashboard_address,
                                   host="127.0.0.1", silence_logs=logging.ERROR, security=local_security(),
                                   scheduler_kwargs={"allowed_failures": retries})


def local_security():
    """TLS with a throw-away CA for a LocalCluster (``distributed.Security.temporary``): scheduler,
    workers and client hold certificates signed by a key that only this process knows, so another
    local process reaching the scheduler's port cannot connect, let alone run code in a worker
    (the port is open to every user of the host). Needs the ``cryptography`` package."""
    from distributed.security import Security

    return Security.temporary()


def _dask_tls_configured() -> bool:
    import dask

    return bool(dask.config.get("distributed.comm.tls.ca-file", None))


def cluster_security(c):
    """The ``distributed.Security`` for ``cluster.address`` (``manifest.Cluster``): its ``tls_*``
    files when given (TLS required), else None, which lets Dask read its own configuration
    (``distributed.comm.tls.*``, e.g. ``DASK_DISTRIBUTED__COMM__TLS__CA_FILE``)."""
    if not (c.tls_ca_file or c.tls_cert):
        return None
    from distributed.security import Security

    return Security(tls_ca_file=c.tls_ca_file, tls_client_cert=c.tls_cert, tls_client_key=c.tls_key,
                    require_encryption=True)


@contextmanager
def dask_client(manifest: Manifest):
    """A ``distributed.Client`` for the manifest's cluster section (LocalCluster by default)."""
    from distributed import Client

    c = manifest.cluster
    if c.address:
        if c.address.startswith("tcp://") and dashboard_exposed(c.address.split("://", 1)[1]):
            log.warning("the Dask scheduler %s is reached without TLS: anyone who reaches it can run code on its "
                        "workers; use a tls:// address with cluster.tls_ca_file / tls_cert / tls_key", c.address)
        security = cluster_security(c)
        if c.address.startswith("tls://") and security is None and not _dask_tls_configured():
            raise ClusterError(f"the Dask scheduler at {c.address} talks TLS: give cluster.tls_ca_file and "
                               "cluster.tls_cert (or Dask's distributed.comm.tls.* configuration)")
        try:
            client = Client(c.address, security=security)
        except (OSError, TimeoutError) as e:  # wrong address, scheduler down, firewall
            raise ClusterError(f"cannot reach the Dask scheduler at {c.address}: {e}") from e
        try:
            yield client
        finally:
            client.close()
        return
    n = c.workers or os.cpu_count() or 1
    if dashboard_exposed(c.dashboard_address):
        log.warning("the Dask dashboard listens on %s: anyone who reaches this host can watch the run "
                    "(task names, file paths, counters) without a password; the default is 127.0.0.1 "
                    "(reach it through an SSH tunnel)", c.dashboard_address)
    # memory_limit auto: a share of the machine per worker (Cluster.worker_memory_limit), not Dask's auto
    try:
        cluster = local_cluster(n, c.threads_per_worker, c.worker_memory_limit(n), c.dashboard_address, c.retries)
    except (OSError, RuntimeError) as e:  # "Cluster failed to start": a dashboard host not resolving
        raise ClusterError(f"cannot start the local Dask cluster (dashboard {c.dashboard_address}): {e}") from e
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@contextmanager
def _client_for(manifest: Manifest, client):
    if client is not None:
        yield client
    else:
        with dask_client(manifest) as c:
            yield c


def _remove(paths: list[str], storage_options: dict | None) -> None:
    for p in paths:
        remove_file(p, storage_options)


def _prune_intermediates(output: str, storage_options: dict | None) -> None:
    """Remove the empty folders of document versions no transform writes any more."""

    fs, root = fs_and_path(output, storage_options)
    base = f"{root.rstrip('/')}/{INTERMEDIATE}"
    for d in fs.glob(f"{base}/*") + [base]:
        if fs.isdir(d) and not fs.find(d):
            fs.rm(d, recursive=True)


def run(manifest: Manifest, inputs: list[str] | None = None, progress=None, on_dashboard=None,
        on_records=None, on_plan=None, on_phase=None, client=None, force_from: str | None = None,
        only: list[str] | None = None) -> RunResult:
    """Run the whole job. ``progress(done, total, record)`` is called as files finish;
    ``on_records(task_id, records_read, offset)`` while they run; ``on_plan({task_id: input bytes},
    {task_id: byte where its offsets start, or None})``
    as phase 1 starts (after ``on_dashboard(url)``); ``on_phase(phase, step)`` as steps of the
    later phases start. ``client``: an existing ``distributed.Client`` (else one is made from the
    manifest's cluster section). ``force_from``/``only``: see ``datapipe.engine.plan.make_plan``.

    Raises OutputLockedError (another run writes there), LedgerError / InvariantError (the
    counts or files disagree), ClusterError.
    """
    t0 = time.time()
    check_phase_names(manifest, force_from, only)  # a bad --from creates nothing
    if inputs is None:
        inputs = check_before_work(manifest)
    so = manifest.inputs.storage_options
    with OutputLock(manifest.output, so):
        plan = make_plan(manifest, inputs, force_from, only)
        if force_from == PHASE1:
            _remove([join(manifest.output, "_tasks", f"{t}.json") for t in plan.task_ids], so)
        _remove(plan.stale, so)  # outputs of inputs no longer in the manifest; leftovers of killed writers
        _prune_intermediates(manifest.output, so)
        with _client_for(manifest, client) as cl:
            records, dashboard = _phase1(cl, manifest, plan, progress, on_dashboard, on_records, on_plan)
            ledger = Ledger()
            for r in records:
                ledger.merge(Ledger.from_dict(r["ledger"]))
            ledger.check()
            phase_stats = _phases(cl, manifest, plan, records, ledger, t0, on_phase)
        ledger.check()
        result = RunResult(ledger, records, manifest.output, dashboard, time.time() - t0, phase_stats)
        _write_ledger(manifest, result)
        enabled = [cls(manifest) for cls in phases() if cls.enabled(manifest)]
        chain = documents_chain(enabled)
        verify_run(manifest.output, so, ledger, records,
                   transforms=[(type(p), *chain[p.name]) for p in enabled if p.name in chain],
                   checks=[(p, phase_context(None, manifest, plan.task_ids, {}, chain.get(p.name))) for p in enabled])
        # the path a phase writing a report dataset gives in its stats (None when it did not run)
        result.report = next((phase_stats[p.name].get("path") for p in enabled if p.name in phase_stats
                              and any(d.role == "report" for d in p.writes)), None)
        # README.md: datasets.load_dataset(OUTPUT, config) finds documents, rejected, tokens
        tokens = next((d.folder for p in enabled for d in type(p).datasets(p.config()) if d.role == "tokens"), None)
        write_card(manifest.output, so, manifest.name, ledger.totals(), tokens)
    return result


def _phase1(client, manifest: Manifest, plan: RunPlan, progress, on_dashboard, on_records, on_plan):

    so = manifest.inputs.storage_options
    specs = plan.specs
    monitor.register(client)  # per-stage counters on the dashboard (/datapipe)
    client.register_plugin(ProcessLimits())  # thread pools capped per worker, external clusters too
    if specs:  # models, sandbox and kernels load beside a worker's first task, not in it (only
        # on workers that get one: see datapipe.engine.warmup)
        n_workers = len(client.scheduler_info().get("workers", {}))
        client.register_plugin(ChainWarmup(specs[0].stages, PHASE1_KEY,
                                           eager=0 < n_workers <= (os.cpu_count() or 1)))
    dashboard = client.dashboard_link
    if on_dashboard:
        on_dashboard(dashboard)
    if on_plan:
        on_plan(spec_bytes(specs, so), offset_starts(specs))
    from distributed import as_completed

    if on_records:  # live record counts from running tasks (see task.report_progress)
        client.subscribe_topic(PROGRESS_TOPIC, lambda ev: "records" in ev[1]
                               and on_records(ev[1]["task"], ev[1]["records"], ev[1].get("offset")))
    futures = {client.submit(run_file_task, s, key=f"{PHASE1_KEY}{s.task_id}-{s.fingerprint}",
                             retries=manifest.cluster.retries, pure=False): s for s in specs}
    records = []
    for fut in as_completed(futures):
        if fut.status == "error":  # every attempt failed: the file is errored, the run goes on
            exc = fut.exception()
            rec = record_failed_task(futures[fut], exc)
            log.warning("input %s errored as a whole file (%s): %s", rec["input"],
                        rec["failed"]["reason"], rec["failed"]["detail"])
        else:
            rec = fut.result()
        records.append(rec)
        if progress:
            progress(len(records), len(specs), rec)
    records.sort(key=lambda r: r["task_id"])
    return records, dashboard


def _phases(client, manifest: Manifest, plan: RunPlan, records: list[dict], ledger: Ledger, t0: float,
            on_phase) -> dict:
    """Run or skip every enabled phase by lineage; add their ledger rows; return their stats."""
    so = manifest.inputs.storage_options
    forced = {p.name for p in plan.phases if p.forced}
    lineage = initial_lineage(tasks_fingerprint(records))
    stats: dict = {}
    enabled = [cls(manifest) for cls in phases() if cls.enabled(manifest)]
    chain = documents_chain(enabled)
    for ph in enabled:
        folders = chain.get(ph.name)
        ctx = phase_context(client, manifest, plan.task_ids, lineage, folders,
                            (lambda step, n=ph.name: on_phase(n, step)) if on_phase else None, ledger)
        fp, upstream = phase_fingerprint(ph, lineage, folders)
        m = read_marker(manifest.output, ph.name, so)
        if ph.name not in forced and m and m.get("fingerprint") == fp and ph.outputs_present(ctx):
            rows = {k: StageCounts.from_dict(v) for k, v in (m.get("ledger") or {}).items()}
            result_stats = dict(m.get("stats") or {}, skipped=True)
        else:

            _remove(orphaned_outputs(ph, ctx), so)  # shards of tasks left with no rows to transform
            if "*" in ph.reads:  # it reads the ledger too: write what is known so far
                _write_ledger(manifest, RunResult(ledger, records, manifest.output, None, time.time() - t0, stats))
            try:
                res = ph.run(ctx)
            except Exception as e:  # noqa: BLE001 - only optional phases get past this
                if not getattr(ph, "optional", False):
                    raise
                log.warning("phase %s failed (the run goes on): %s: %s", ph.name, type(e).__name__, e)
                continue
            rows, result_stats = res.ledger, res.stats
            write_marker(manifest.output, ph.name, {
                "fingerprint": fp, "config_fingerprint": ph.config_fingerprint(), "assets": ph.assets_digest(),
                "upstream": upstream,
                "folders": list(folders) if folders else None, "config": ph.config(), "stats": res.stats,
                "ledger": {k: v.to_dict() for k, v in res.ledger.items()}}, so)
        for d in ph.writes:
            lineage[d.name] = fp
        for name, c in rows.items():  # e.g. dedup_exact, dedup_lines, dedup_near: they chain
            ledger.stages[name] = c
        if rows:
            client.log_event(PROGRESS_TOPIC, {"task": f"phase:{ph.name}", "run": manifest.output, "stages": {
                k: [c.n_in, c.kept, c.n_rejected, c.n_errored] for k, c in rows.items()}})
        stats[ph.name] = result_stats
    return stats


def limit_summary(manifest: Manifest, records: list[dict]) -> dict | None:
    """``{records_per_file, inputs_cut}`` of a run with ``inputs.limit`` (None without): the
    ledger says the funnel counts a sample, not the whole inputs."""
    n = manifest.inputs.limit
    if n is None:
        return None
    return {"records_per_file": n, "inputs_cut": sum(bool(r.get("limited")) for r in records)}


def _write_ledger(manifest: Manifest, result: RunResult) -> None:
    records = result.tasks
    # Effective configs (defaults filled in), so the ledger records the thresholds it applied.
    phase_configs = {ph.name: ph(manifest).effective_config() for ph in phases() if ph.enabled(manifest)}
    write_json_atomic(join(manifest.output, "ledger.json"),
                      dict(result.ledger.to_dict(), tasks=len(records), failed_tasks=failed_tasks(records),
                           seconds=round(result.seconds, 3), manifest=manifest.source_file,
                           limit=limit_summary(manifest, records),
                           stage_configs=manifest.effective_stage_configs(), phase_configs=phase_configs,
                           phases=result.phases),
                      manifest.inputs.storage_options)
