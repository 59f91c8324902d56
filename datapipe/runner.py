"""Build and run a job on Dask: phase 1 per input file, then the global phases.

Phase 1 is one task per input file (retried by Dask on failure); phase 2 is global dedup
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


@contextmanager
def dask_client(manifest: Manifest, quiet: bool = False):
    """A ``distributed.Client`` for the manifest's cluster section (LocalCluster by default)."""
    from distributed import Client, LocalCluster

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
    # Worker processes must be able to start the extraction sandbox subprocess.
    cluster = LocalCluster(n_workers=n, threads_per_worker=c.threads_per_worker, processes=True,
                           memory_limit=c.memory_limit, dashboard_address=c.dashboard_address,
                           host="127.0.0.1", silence_logs=logging.ERROR)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def run(manifest: Manifest, inputs: list[str] | None = None, progress=None, on_dashboard=None,
        on_records=None) -> RunResult:
    """Run the whole job. ``progress(done, total, record)`` is called as files finish;
    ``on_records(task_id, records_read)`` while they run."""
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
        dashboard = client.dashboard_link
        if on_dashboard:
            on_dashboard(dashboard)
        from distributed import as_completed

        if on_records:  # live record counts from running tasks (see task._report_progress)
            client.subscribe_topic(PROGRESS_TOPIC, lambda ev: on_records(ev[1]["task"], ev[1]["records"]))

        futures = [client.submit(run_file_task, s, key=f"read-extract-filter-{s.task_id}",
                                 retries=manifest.cluster.retries, pure=False) for s in specs]
        records = []
        for fut in as_completed(futures):
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
            from datapipe.stages.dedup.phase2 import run_dedup

            counts = run_dedup(client, manifest.output, dedup, so)
            for name, c in counts.items():  # dedup_exact, dedup_lines, dedup_near: they chain
                ledger.stages[name] = c
            phases["dedup"] = {k: v.to_dict() for k, v in counts.items()}
        if "dolma_jsonl" in manifest.output_formats:
            from datapipe.io.dolma_export import export_dolma

            phases["dolma_jsonl"] = export_dolma(manifest.output, manifest.name, so, client)
        tok = manifest.section("tokenize")
        if tok is not None:
            from datapipe.stages.mix import MixConfig
            from datapipe.stages.mix_tokenize import run_mix_tokenize

            mix = manifest.section("mix") or MixConfig()
            phases["tokenize"] = run_mix_tokenize(client, manifest.output, mix, tok, so)
    ledger.check()
    result = RunResult(ledger, records, manifest.output, dashboard, time.time() - t0, phases)
    write_json_atomic(join(manifest.output, "ledger.json"),
                      dict(ledger.to_dict(), tasks=len(records), seconds=round(result.seconds, 3),
                           manifest=manifest.source_file, stage_configs=stages, phases=phases), so)
    try:  # the report explains the run; failing to draw it must not fail the run
        from datapipe.report import write_report

        result.report = write_report(manifest.output, storage_options=so)
    except Exception as e:  # noqa: BLE001
        log.warning("run report not written: %s: %s", type(e).__name__, e)
    return result
