"""Progress lines that fit the terminal: one line per task at any width from 40 columns up.

rich's ``Progress`` lays its columns out in a table; when the columns are wider than the
terminal it squeezes each one, cutting numbers (``0.2…``) and pushing units onto a second line.
Here each line is composed as one ``Text``: the pieces are tried from the most to the least
informative layout, the first layout that leaves room for a bar of at least ``MIN_BAR`` cells is
drawn, and the bar takes the rest (at most ``MAX_BAR``). What a narrow terminal loses, in order:
the rate in bytes, the rate in records, the long phase name, the word ``records``, the byte
counts. The ETA, the percentage, files done and records read stay.
"""
from __future__ import annotations

from rich.console import Console
from rich.filesize import decimal
from rich.progress import ProgressColumn, SpinnerColumn, Task
from rich.text import Text

MIN_BAR, MAX_BAR = 8, 40


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _bytes_done(task: Task) -> str:
    total = int(task.total or 0)
    done = int(task.completed)
    unit_of = decimal(total or 1)  # "412.3 MB": the unit of the total, shared by both numbers
    suffix = unit_of.split(" ")[-1]
    base = {"bytes": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15}.get(suffix, 1)
    if base == 1:
        return f"{done:,}/{total:,} bytes"
    return f"{done / base:.1f}/{total / base:.1f} {suffix}"


def _bar(width: int, fraction: float) -> Text:
    filled = round(width * min(max(fraction, 0.0), 1.0))
    return Text.assemble(("━" * filled, "bar.complete"), ("━" * (width - filled), "bar.back"))


def phase1_layouts(task: Task) -> list[list[str]]:
    """The text pieces of the phase-1 line, richest layout first; the bar goes after the first piece."""
    f = task.fields
    pct = f"{task.percentage:3.0f}%" if task.total else "  ?%"
    speed = task.finished_speed or task.speed
    rate = f"{decimal(int(speed))}/s" if speed else "?/s"
    eta = f"eta {_clock(task.time_remaining)}"
    files = f"{f['done']}/{f['tasks']} {f['unit']}"
    recs = f"{f['records']:,}"
    rps = f"({f['rps']:,.0f}/s)"
    long, short = task.description, task.description.split(":")[0]
    size = _bytes_done(task)
    return [
        [long, pct, size, rate, eta, f"{files},", f"{recs} records", rps],
        [long, pct, size, eta, f"{files},", f"{recs} records", rps],
        [long, pct, size, eta, f"{files},", f"{recs} records"],
        [short, pct, size, eta, f"{files},", f"{recs} records"],
        [short, pct, size, eta, f"{files},", f"{recs} rec"],
        [short, pct, eta, f"{files},", f"{recs} rec"],
        [short, pct, eta, files],
    ]


def fit_line(layouts: list[list[str]], width: int, fraction: float | None, head: Text | None = None) -> Text:
    """The first layout that fits ``width`` cells with a bar (``fraction`` not None) of at least
    ``MIN_BAR``; the last layout, cut to ``width``, when none does. ``head`` (a spinner) comes first."""
    lead = head.cell_len + 1 if head is not None else 0
    for pieces in layouts:
        text_len = lead + sum(len(p) for p in pieces) + len(pieces) - 1
        bar = 0 if fraction is None else min(MAX_BAR, width - text_len - 1)
        if (fraction is None or bar >= MIN_BAR) and text_len + (bar + 1 if fraction is not None else 0) <= width:
            break
    else:
        bar = MIN_BAR if fraction is not None else 0
    line = Text()
    if head is not None:
        line.append_text(head)
        line.append(" ")
    line.append(pieces[0], style="bold")
    if fraction is not None:
        line.append(" ")
        line.append_text(_bar(bar, fraction))
    if len(pieces) > 1:
        line.append(" " + " ".join(pieces[1:]))
    line.truncate(width, overflow="ellipsis")
    return line


class Phase1Column(ProgressColumn):
    """The whole phase-1 line (bar, bytes, ETA, files, records) as one column fitted to the console."""

    def __init__(self, console: Console):
        super().__init__()
        self.console = console

    def render(self, task: Task) -> Text:
        frac = task.completed / task.total if task.total else 0.0
        return fit_line(phase1_layouts(task), self.console.width, frac)


class PhaseColumn(ProgressColumn):
    """A later phase's line: spinner, name, current step (cut with an ellipsis if long), elapsed time."""

    def __init__(self, console: Console):
        super().__init__()
        self.console = console
        self.spinner = SpinnerColumn(finished_text="✓")

    def render(self, task: Task) -> Text:
        head = self.spinner.render(task)
        head = head if isinstance(head, Text) else Text(str(head))
        elapsed = _clock(task.finished_time if task.finished else task.elapsed)
        name, step = task.description, str(task.fields.get("step", ""))
        room = self.console.width - (head.cell_len + 1) - len(name) - len(elapsed) - 2
        if len(step) > room:
            step = step[:max(room - 1, 0)] + "…" if room > 1 else ""
        pieces = [name, step, elapsed] if step else [name, elapsed]
        return fit_line([pieces], self.console.width, None, head=head)
