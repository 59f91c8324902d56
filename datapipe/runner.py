"""Build and run a job on Dask: phase 1 per input file, then the global phases.

Phase 1 is one task per input file (retried by Dask on failure; a file whose task fails on every
attempt is recorded as errored, see datapipe.task_failure, and the run goes on); phase 2 is global dedup
(``dedup:`` section), phase 3 mixing + tokenization (``mix:``/``tokenize:``). Everything a run
writes lives under the manifest's ``output`` (local directory or fsspec URL). The merged ledger
is checked (``in == kept + rejected + errored`` at every stage) and written to ``ledger.json``.
"""
from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass

from datapipe.io.parquet import join, write_json_atomic
from datapipe.io.paths import resolve_inputs
from datapipe.ledger import Ledger
from datapipe.manifest import Manifest
from datapipe.task import PROGRESS_TOPIC, chain_fingerprint, plan_specs, run_file_task
from datapipe.task_failure import record_failed_task

log = logging.getLogger("datapipe")


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


def _remove_stale_tmp(output: str, storage_options: dict | None) -> None:
    """Delete ``*.tmp-*`` files left by phase-1 task attempts that died (a killed worker process
    cannot clean up after itself). Called once all phase-1 tasks have finished."""
    from datapipe.io.parquet import fs_and_path

    fs, root = fs_and_path(output, storage_options)
    for sub in ("documents", "rejected", "errors", "_tasks"):
        for p in fs.glob(f"{root.rstrip('/')}/{sub}/*.tmp-*"):
            try:
                fs.rm(p)
            except FileNotFoundError:
                pass


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


class ClusterError(RuntimeError):
    """The Dask scheduler named by ``cluster.address`` / ``--scheduler`` cannot be reached."""


def check_before_work(manifest: Manifest) -> list[str]:
    """Everything that can fail before work starts: stage assets (models, lists), inputs.

    Returns the resolved input list. Raises ModelError / InputError / ManifestError.
    """
    for st in manifest.build_stages():
        st.check()
    for name in ("dedup", "mix", "tokenize"):
        cfg = manifest.section(name)
        if cfg is not None and hasattr(cfg, "check"):
            cfg.check()
    i = manifest.inputs
    inputs = resolve_inputs(i.paths, i.crawl, i.crawl_files, i.base_url, i.storage_options)
    check_output_writable(manifest.output, i.storage_options)
    return inputs


def check_output_writable(output: str, storage_options: dict | None = None) -> None:
    """Create the output location and write + delete a probe file there; raise InputError if not possible."""
    import uuid

    from datapipe.io.parquet import fs_and_path
    from datapipe.io.paths import InputError

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


def local_cluster(n_workers: int, threads_per_worker: int = 1, memory_limit="auto",
                  dashboard_address: str | None = "127.0.0.1:8787", retries: int = 2):
    """The LocalCluster of ``datapipe run`` (and benchmarks/bench_scaling.py): worker processes
    (they must be able to start the extraction sandbox subprocess), each started with
    ``procenv.worker_environ`` (malloc thresholds, library thread pools capped to its threads:
    one host, one worker per core, see datapipe/procenv.py).
    allowed_failures: a task whose worker dies (e.g. over memory_limit) is retried ``retries``
    times, like a task that raises, then reported as KilledWorker (its file errored, see run)."""
    import dask
    from distributed import LocalCluster

    from datapipe import procenv

    env = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **procenv.worker_environ(threads_per_worker)}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": env, **procenv.DASK_CONFIG}):
        return LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                            memory_limit=memory_limit, dashboard_address=dashboard_address,
                            host="127.0.0.1", silence_logs=logging.ERROR,
                            scheduler_kwargs={"allowed_failures": retries})


@contextmanager
def dask_client(manifest: Manifest, quiet: bool = False):
    """A ``distributed.Client`` for the manifest's cluster section (LocalCluster by default)."""
    from distributed import Client

    c = manifest.cluster
    if c.address:
        try:
            client = Client(c.address)
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
    cluster = local_cluster(n, c.threads_per_worker, c.memory_limit, c.dashboard_address, c.retries)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def run(manifest: Manifest, inputs: list[str] | None = None, progress=None, on_dashboard=None,
        on_records=None, on_plan=None, on_phase=None) -> RunResult:
    """Run the whole job. ``progress(done, total, record)`` is called as files finish;
    ``on_records(task_id, records_read)`` while they run; ``on_plan({task_id: input bytes})``
    as phase 1 starts (after ``on_dashboard(url)``); ``on_phase(phase, step)`` as steps of the later phases start."""
    t0 = time.time()
    if inputs is None:
        inputs = check_before_work(manifest)
    so = manifest.inputs.storage_options
    mi = manifest.inputs
    stages = manifest.effective_stages()
    fp = chain_fingerprint(stages, {"format": mi.format, "preset": mi.preset, "fields": mi.fields})
    specs = plan_specs(inputs, manifest.output, stages, fp, mi.format, mi.preset, mi.fields,
                       mi.split_bytes, manifest.batch_size, so)  # large text files -> several tasks
    with dask_client(manifest) as client:
        from datapipe import monitor

        monitor.register(client)  # per-stage counters on the dashboard (/datapipe)
        from datapipe.procenv import ProcessLimits

        client.register_plugin(ProcessLimits())  # thread pools capped per worker, external clusters too
        dashboard = client.dashboard_link
        if on_dashboard:
            on_dashboard(dashboard)
        if on_plan:
            on_plan(spec_bytes(specs, so))
        from distributed import as_completed

        if on_records:  # live record counts from running tasks (see task._report_progress)
            client.subscribe_topic(PROGRESS_TOPIC, lambda ev: "records" in ev[1]
                                   and on_records(ev[1]["task"], ev[1]["records"]))

        futures = {client.submit(run_file_task, s, key=f"read-extract-filter-{s.task_id}",
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
        _remove_stale_tmp(manifest.output, so)  # every phase-1 task is done: no tmp file is live
        ledger = Ledger()
        for r in records:
            ledger.merge(Ledger.from_dict(r["ledger"]))
        ledger.check()
        phases = {}
        dedup = manifest.section("dedup")
        if dedup is not None:
            from datapipe.stages.phases.dedup.phase import run_dedup

            counts = run_dedup(client, manifest.output, dedup, so,
                               progress=on_phase and (lambda step: on_phase("dedup", step)))
            for name, c in counts.items():  # dedup_exact, dedup_lines, dedup_near: they chain
                ledger.stages[name] = c
            client.log_event(PROGRESS_TOPIC, {"task": "phase:dedup", "run": manifest.output, "stages": {
                k: [c.n_in, c.kept, c.n_rejected, c.n_errored] for k, c in counts.items()}})
            from datapipe.stages.phases.dedup.phase import load_stats

            # Step counts plus the marker's stats (cluster-size histograms, pairs, rounds) for the report.
            phases["dedup"] = {**{k: v.to_dict() for k, v in counts.items()}, "stats": load_stats(manifest.output, so)}
        if "dolma_jsonl" in manifest.output_formats:
            from datapipe.stages.phases.dolma_export import export_dolma

            if on_phase:
                on_phase("export", "dolma_jsonl")
            phases["dolma_jsonl"] = export_dolma(manifest.output, manifest.name, so, client)
        tok = manifest.section("tokenize")
        if tok is not None:
            from datapipe.stages.phases.tokenize.mixture import MixConfig
            from datapipe.stages.phases.tokenize.phase import run_mix_tokenize

            mix = manifest.section("mix") or MixConfig()
            phases["tokenize"] = run_mix_tokenize(client, manifest.output, mix, tok, so,
                                                  progress=on_phase and (lambda step: on_phase("tokenize", step)))
    ledger.check()
    result = RunResult(ledger, records, manifest.output, dashboard, time.time() - t0, phases)
    write_json_atomic(join(manifest.output, "ledger.json"),
                      dict(ledger.to_dict(), tasks=len(records), failed_tasks=failed_tasks(records),
                           seconds=round(result.seconds, 3),
                           manifest=manifest.source_file, stage_configs=stages, phases=phases), so)
    try:  # the report explains the run; failing to draw it must not fail the run
        from datapipe.report import write_report

        result.report = write_report(manifest.output, storage_options=so)
    except Exception as e:  # noqa: BLE001
        log.warning("run report not written: %s: %s", type(e).__name__, e)
    return result
