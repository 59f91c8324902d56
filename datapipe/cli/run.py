"""``datapipe run MANIFEST``: run a job and print its funnel."""
from __future__ import annotations

import sys
from urllib.parse import urlsplit

from rich.console import Console

from datapipe.cli.commands import COMMANDS
from datapipe.cli.progress import RunProgress
from datapipe.cli.termfmt import ledger_stages, print_funnel
from datapipe.engine import runner
from datapipe.engine.ledger import LedgerError
from datapipe.engine.lock import OutputLockedError, is_stale, read_lock
from datapipe.engine.lock import describe as lock_holder
from datapipe.engine.plan import PlanError, check_phase_names, describe, make_plan
from datapipe.engine.runner import limit_summary
from datapipe.io.paths import InputError
from datapipe.manifest.load import ManifestError, load_manifest
from datapipe.models import ModelError
from datapipe.phase import phases
from datapipe.stages.phases.tokenize.tokenizer import TokenizerError


def add_cli(sub) -> None:
    p = sub.add_parser(
        "run", help=COMMANDS["run"].help,
        description="Run a job described by a YAML manifest on Dask. A rerun into an existing output "
                    "equals a fresh run of the final manifest: finished work whose inputs and settings "
                    "are unchanged is skipped, a changed phase-1 stage reruns from the stored rows of the "
                    "stage before it (no re-reading or re-extraction unless extraction itself changed), "
                    "and every later phase whose upstream changed reruns. Outputs of inputs no longer in "
                    "the manifest are removed. See what would rerun, and why, with --dry-run. The funnel "
                    "is printed at the end and written to OUTPUT/ledger.json.",
        epilog="exit status: 0 every input file processed; 2 nothing run (bad manifest, missing "
               "model, tokenizer or input, output not writable or in use by another run, scheduler "
               "unreachable); 3 the ledger does not balance or the output files disagree with it "
               "(the message names the file and the count); 4 the run finished but some input files "
               "failed on every attempt (worker killed, e.g. over its memory limit, or a task "
               "exception): they are listed, errored as whole files in OUTPUT/errors/ and "
               "OUTPUT/ledger.json (failed_tasks), the other files' outputs are complete, and rerunning "
               "the same command retries only them.",
        )  # defaults are stated in each help text
    p.add_argument("manifest", help="path to the YAML manifest (e.g. manifests/cc-2026.yaml)")
    p.add_argument("--input", action="append", metavar="PATH",
                   help="input file, glob, directory or URL (repeatable); replaces the manifest's inputs")
    p.add_argument("--output", help="output directory or URL; replaces the manifest's output")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="use an existing Dask scheduler")
    p.add_argument("--workers", type=int, help="local worker processes (default: one per core)")
    p.add_argument("--dashboard", metavar="HOST:PORT", help="dashboard address of the local cluster; a host other than 127.0.0.1 (e.g. 0.0.0.0:8787) "
                        "exposes it to the network, without a password (a warning says so)")
    exports = [c for c in phases() if any(d.role == "export" for d in c.writes)]
    p.add_argument("--output-format", action="append", choices=["parquet"] + [c.name for c in exports],
                   metavar="FORMAT", help="parquet (always written) or an export: " + ", ".join(
                       f"{c.name} (also OUTPUT/{c.writes[0].glob})" for c in exports)
                   + "; repeatable; replaces the manifest's output_formats")
    p.add_argument("--limit", type=int, metavar="N",
                   help="read at most N records per input file (a sample run; sets inputs.limit, so the ledger "
                        "says so and a later run without it reads the files again)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (each input file and each phase: skip / rerun / read / run, and why; "
                        "files skipped while expanding directories; outputs that would be removed) and write nothing")
    p.add_argument("--from", dest="force_from", metavar="PHASE",
                   help="rerun PHASE and every phase after it whatever their records say; 'phase1' reads every "
                        "input file again (phases, in run order: phase1, " + ", ".join(c.name for c in phases()) + ")")
    p.add_argument("--only", action="append", metavar="PHASE",
                   help="rerun PHASE whatever its record says (repeatable); later phases rerun only if "
                        "their inputs changed")
    p.set_defaults(func=cmd_run)


def print_summary(out: Console, result, manifest) -> None:
    """The end of a run: the funnel (every reason, seconds per stage), tokens, totals, the report path.
    Fits ``out.width`` (80 columns in a pipe) without cutting a number."""

    print_funnel(out, ledger_stages(result.ledger), extra=("seconds",))
    lim = limit_summary(manifest, result.tasks)
    if lim:
        out.print(f"limited: at most {lim['records_per_file']:,} records per input file ({lim['inputs_cut']} of "
                  f"{len(result.tasks)} input(s) cut short): the funnel counts a sample", highlight=False)
    for cls in phases():   # each phase says what it made (tokens per domain, ...)
        if result.phases.get(cls.name):
            for line in cls(manifest).summary(result.phases[cls.name]):
                out.print(line, highlight=False)
    tot = result.ledger.totals()
    out.print(f"records in {tot['in']:,}: kept {tot['kept']:,}, rejected {tot['rejected']:,}, "
              f"errored {tot['errored']:,} in {result.seconds:.1f} s", highlight=False)
    out.print(f"ledger: {manifest.output}/ledger.json", highlight=False, soft_wrap=True)  # a path stays whole
    if result.report:
        out.print(f"report: {result.report}", highlight=False, soft_wrap=True)
        out.print(f"explore: datapipe inspect {manifest.output}", highlight=False, soft_wrap=True)


def cmd_run(args) -> int:

    err = Console(stderr=True, soft_wrap=True)
    out = Console()
    overrides = {}
    if args.input:
        overrides["inputs.paths"] = args.input
        overrides["inputs.crawl"] = None
    if args.output:
        overrides["output"] = args.output
    if args.scheduler:
        overrides["cluster.address"] = args.scheduler
    if args.workers is not None:  # --workers 0 is an error, not the manifest's value
        overrides["cluster.workers"] = args.workers
    if args.dashboard:
        overrides["cluster.dashboard_address"] = args.dashboard
    if args.output_format:
        overrides["output_formats"] = sorted(set(args.output_format) | {"parquet"})
    if args.limit is not None:
        overrides["inputs.limit"] = args.limit

    try:
        manifest = load_manifest(args.manifest, overrides)
        check_phase_names(manifest, args.force_from, args.only)  # before the output folder is probed (made)
        inputs = runner.check_before_work(manifest, probe_output=not args.dry_run)
    except (ManifestError, ModelError, InputError, TokenizerError, PlanError) as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False)
        return 2
    if args.dry_run:
        return _dry_run(out, err, manifest, inputs, args)
    skipped = f" ({len(inputs.skipped)} other file(s) skipped: see --dry-run)" if getattr(inputs, "skipped", None) else ""
    out.print(f"datapipe: {len(inputs)} input file(s) -> {manifest.output}{skipped}", highlight=False)
    show = not args.no_progress and sys.stderr.isatty()
    progress = RunProgress(err, len(inputs), show=show)

    def on_dashboard(url):
        out.print(f"Dask dashboard: {url}")
        port = urlsplit(url).port or 8787
        host = urlsplit(url).hostname if args.scheduler else "127.0.0.1"
        # The dashboard binds where the scheduler runs; from a laptop, tunnel to that machine.
        # Two short lines, so neither wraps at 80 columns: the command stays copyable.
        out.print(f"  from another machine: ssh -N -L {port}:{host}:{port} USER@{'GATEWAY' if args.scheduler else 'THIS_HOST'}",
                  highlight=False, soft_wrap=True)
        out.print(f"  then open http://localhost:{port}/status", highlight=False, soft_wrap=True)
        out.print(f"  per-stage counters so far: http://localhost:{port}/datapipe", highlight=False)


    try:
        with progress:
            result = runner.run(manifest, inputs, progress=progress.progress, on_dashboard=on_dashboard,
                                on_records=progress.on_records if show else None, on_plan=progress.on_plan,
                                on_phase=progress.on_phase, force_from=args.force_from, only=args.only)
    except (runner.ClusterError, OutputLockedError, PlanError) as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False)
        return 2
    except LedgerError as e:
        err.print(f"[bold red]ledger does not balance:[/] {e}")
        err.print("the files on disk disagree with the run's records (one removed or changed by hand?): "
                  "rerun with --from phase1, or --from the phase that writes them, to rebuild them",
                  highlight=False, soft_wrap=True)
        return 3
    print_summary(out, result, manifest)
    _print_unreadable(err, result.tasks)
    return _print_failed(err, result.failed)


def unreadable_inputs(records: list[dict]) -> list[tuple[str, dict]]:
    """Inputs (of tasks that finished) that gave no record but errored ones, e.g. a zero-byte
    file (``read:empty_file``) or one whose every member is damaged: ``(input, {reason: count})``."""
    out = []
    for r in records:
        st = r["ledger"]["stages"]["read"]
        if not r.get("failed") and st["kept"] == 0 and st["errored"] and not st["rejected"]:
            out.append((r["input"], st["errored"]))
    return out


def _print_unreadable(err: Console, records: list[dict]) -> None:
    bad = unreadable_inputs(records)
    if bad:
        err.print(f"[bold yellow]{len(bad)} input file(s) gave no record[/] (each counted as errored in the ledger):",
                  highlight=False, soft_wrap=True)
        for path, reasons in bad:
            err.print(f"  {path}: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())),
                      highlight=False, markup=False, soft_wrap=True)


def _dry_run(out: Console, err: Console, manifest, inputs, args) -> int:

    try:
        plan = make_plan(manifest, inputs, args.force_from, args.only)
    except PlanError as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False)
        return 2
    out.print(f"dry run: {len(inputs)} input file(s) -> {manifest.output} (nothing is written)", highlight=False)
    for line in describe(plan):
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    holder = read_lock(manifest.output, manifest.inputs.storage_options)
    if holder and not is_stale(holder):
        out.print(f"note: {lock_holder(manifest.output, holder)}", highlight=False, markup=False, soft_wrap=True)
    return 0


#: Exit status of a finished run in which some input files failed on every attempt.
EXIT_FILES_FAILED = 4


def _print_failed(err: Console, failed: list[dict]) -> int:
    """List the input files errored as a whole; exit 4 so a scheduler or script notices."""
    if not failed:
        return 0
    err.print(f"[bold red]{len(failed)} input file(s) failed on every attempt[/] (errored as whole files; "
              "rerun the same command to retry only them):", highlight=False, soft_wrap=True)
    for f in failed:
        part = f" part {f['part'][0]}-{f['part'][1]}" if f.get("part") else ""
        err.print(f"  {f['input']}{part}: {f['reason']}: {f['detail']}",
                  highlight=False, markup=False, soft_wrap=True)  # whole lines: paths stay copyable
    return EXIT_FILES_FAILED
