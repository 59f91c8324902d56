"""The progress display of ``datapipe run``: one bar for phase 1, a spinner line per later phase.

Phase 1 counts input bytes (rate and ETA come from rich's columns), files (tasks) and records
read; bytes advance as tasks finish, records while they run (Dask events, see task.py). Later
phases have no totals known up front, so they show their current step.
Two ``Progress`` objects because the two kinds of line need different columns; one ``Live``
draws both.
"""
from __future__ import annotations

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from datapipe.phase import phases


class RunProgress:
    """Callbacks for ``runner.run`` (on_plan, on_records, progress, on_phase) drawing to ``console``."""

    def __init__(self, console: Console, n_files: int, show: bool = True):
        self.console, self.show = console, show
        self.files = Progress(TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
                              TransferSpeedColumn(), TimeRemainingColumn(),
                              TextColumn("{task.fields[done]}/{task.fields[tasks]} {task.fields[unit]}, "
                                         "{task.fields[records]:,} records ({task.fields[rps]:,.0f}/s)"),
                              console=console)
        self.phases = Progress(SpinnerColumn(finished_text="✓"), TextColumn("[bold]{task.description}"),
                               TextColumn("{task.fields[step]}"), TimeElapsedColumn(), console=console)
        self.n_files = n_files
        self.task = None  # added by on_plan, so that rates count from the start of the work
        self.bytes: dict[str, int] = {}
        self.running: dict[str, int] = {}  # task id -> records read so far (final count once done)
        self.phase_ids: dict[str, int] = {}
        self.steps: list[tuple[str, str]] = []  # every (phase, step) seen, for the log and tests
        self._live = Live(Group(self.files, self.phases), console=console, refresh_per_second=4,
                          transient=False) if show else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for tid in self.phase_ids.values():  # the last step of each phase has finished too
            self.phases.update(tid, total=1, completed=1)
        if self._live and self._live.is_started:
            self._live.stop()

    def _records(self, **kw) -> None:
        n = sum(self.running.values())
        elapsed = self.files.tasks[0].elapsed or 0.0
        self.files.update(self.task, records=n, rps=n / elapsed if elapsed > 0 else 0.0, **kw)

    def on_plan(self, task_bytes: dict[str, int]) -> None:
        """Phase 1 starts (the dashboard URL is printed already): draw from now on."""
        self.bytes = task_bytes
        unit = "files" if len(task_bytes) == self.n_files else "tasks"
        self.task = self.files.add_task("phase 1: read, extract, filter", total=sum(task_bytes.values()),
                                        done=0, tasks=len(task_bytes), unit=unit, records=0, rps=0.0)
        if self._live:
            self._live.start()

    def on_records(self, task_id: str, n: int) -> None:
        self.running[task_id] = max(n, self.running.get(task_id, 0))
        self._records()

    def progress(self, done: int, total: int, rec: dict) -> None:
        n = rec["ledger"]["stages"]["read"]["in"]
        self.running[rec["task_id"]] = n
        self.files.advance(self.task, self.bytes.get(rec["task_id"], 0))
        self._records(done=done)
        if not self.show:
            skipped = " (done before, skipped)" if rec.get("skipped") else ""
            if rec.get("failed"):
                skipped = f" (file errored: {rec['failed']['reason']})"
            self.console.print(f"  [{done}/{total}] {rec['task_id']}: {n} records{skipped}", highlight=False)

    def on_phase(self, phase: str, step: str) -> None:
        self.steps.append((phase, step))
        # phases are numbered after phase 1 in the order they start; labels come from the registry
        label = f"phase {len(self.phase_ids) + 2}: {_labels().get(phase, phase)}"
        if phase not in self.phase_ids:
            for tid in self.phase_ids.values():  # a new phase starts: the earlier ones are over
                self.phases.update(tid, total=1, completed=1)
            self.phase_ids[phase] = self.phases.add_task(label, total=None, step=step)
        self.phases.update(self.phase_ids[phase], step=step)
        if not self.show:
            self.console.print(f"  {label}: {step}", highlight=False)


def _labels() -> dict[str, str]:
    return {p.name: p.label or p.name for p in phases()}
