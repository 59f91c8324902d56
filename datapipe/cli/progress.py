"""The progress display of ``datapipe run``: one bar for phase 1, a spinner line per later phase.

Phase 1 counts input bytes (rate and ETA from rich's speed estimate), files (tasks) and records
read. Records arrive while tasks run (Dask events, see task.py); so that the bar and its ETA move
with them and not only when a file finishes, a running task's bytes are estimated from its
records: records times the bytes per record of the tasks finished so far, or, before any has
finished, the byte position of its last record where the input's offsets are file bytes (WARC,
ARC, WET, plain JSONL). An estimate never reaches the task's size (at most 99%) and the bar never
goes back; a finished task counts its exact size. Later phases have no
totals known up front, so they show their current step. Every line fits the terminal's width
(``datapipe.cli.progress_line``). Two ``Progress`` objects because the two kinds of line differ; one
``Live`` draws both.
"""
from __future__ import annotations

from rich.console import Console, Group
from rich.live import Live
from rich.progress import Progress

from datapipe.cli.progress_line import Phase1Column, PhaseColumn

#: At most this share of a running task's bytes is counted from its records (the rest when it finishes).
ESTIMATE_CAP = 0.99

from datapipe.phase import phases


class RunProgress:
    """Callbacks for ``runner.run`` (on_plan, on_records, progress, on_phase) drawing to ``console``."""

    def __init__(self, console: Console, n_files: int, show: bool = True, get_time=None):
        self.console, self.show = console, show
        clock = {"get_time": get_time} if get_time is not None else {}  # tests drive the clock
        self.files = Progress(Phase1Column(console), console=console, **clock)
        self.phases = Progress(PhaseColumn(console), console=console, **clock)
        self.n_files = n_files
        self.task = None  # added by on_plan, so that rates count from the start of the work
        self.bytes: dict[str, int] = {}
        self.starts: dict[str, int | None] = {}  # task id -> byte where its offsets start (None: not bytes)
        self.running: dict[str, int] = {}  # task id -> records read so far (final count once done)
        self.offsets: dict[str, int] = {}  # task id -> offset of the last record reported
        self.finished: set[str] = set()
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
        read = max(self.files.tasks[0].completed, self.estimated_bytes())  # the bar never goes back
        self.files.update(self.task, records=n, rps=n / elapsed if elapsed > 0 else 0.0, completed=read, **kw)

    def estimated_bytes(self) -> float:
        """Bytes read so far: finished tasks' sizes plus each running task's estimate (see the module)."""
        fin_bytes = sum(self.bytes.get(t, 0) for t in self.finished)
        fin_recs = sum(self.running.get(t, 0) for t in self.finished)
        per_record = fin_bytes / fin_recs if fin_recs else None
        total = float(fin_bytes)
        for t, n in self.running.items():
            if t in self.finished:
                continue
            size = self.bytes.get(t, 0)
            if per_record is not None:
                est = n * per_record
            elif self.starts.get(t) is not None and t in self.offsets:
                est = self.offsets[t] - self.starts[t]
            else:
                est = 0.0
            total += min(max(est, 0.0), ESTIMATE_CAP * size)
        return total

    def on_plan(self, task_bytes: dict[str, int], starts: dict[str, int | None] | None = None) -> None:
        """Phase 1 starts (the dashboard URL is printed already): draw from now on. ``task_bytes``:
        input bytes per task; ``starts``: the byte at which a task's record offsets start, None
        where its offsets are not file bytes (compressed JSONL, Parquet rows)."""
        self.bytes = task_bytes
        self.starts = dict(starts or {})
        unit = "files" if len(task_bytes) == self.n_files else "tasks"
        self.task = self.files.add_task("phase 1: read, extract, filter", total=sum(task_bytes.values()),
                                        done=0, tasks=len(task_bytes), unit=unit, records=0, rps=0.0)
        if self._live:
            self._live.start()

    def on_records(self, task_id: str, n: int, offset: int | None = None) -> None:
        """A running task has read ``n`` records, the last at byte (or row) ``offset`` of its input."""
        if task_id in self.finished:  # a late event of a finished task
            return
        self.running[task_id] = max(n, self.running.get(task_id, 0))
        if offset is not None:
            self.offsets[task_id] = max(offset, self.offsets.get(task_id, offset))
        self._records()

    def progress(self, done: int, total: int, rec: dict) -> None:
        n = rec["ledger"]["stages"]["read"]["in"]
        self.running[rec["task_id"]] = n
        self.finished.add(rec["task_id"])
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
