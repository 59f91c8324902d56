"""The funnel as text that fits the terminal: ``datapipe run`` and ``datapipe inspect`` print it.

Numbers are never cut or wrapped: every numeric column is as wide as its widest value, and only
the first column (stage names, and the reasons beneath each stage) gives way, truncated with
"…". A console narrower than the numbers alone gets one line per stage and per reason instead
of a table. Pipes get the same layout as an 80-column terminal (rich's default width there).
"""
from __future__ import annotations

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

#: Columns between cells (``collapse_padding``: one padding column each side, shared).
_GAP = 2
#: Narrowest first column worth a table; below it the funnel is printed as lines.
MIN_NAME = 10


def os_error_line(e: OSError) -> str:
    """One line for an OSError a user caused (a missing folder, a file where a folder is expected):
    ``<path>: <why>``, without Python's ``[Errno N]``."""
    return f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e)


def cannot_write(err: Console, what: str, e: OSError) -> int:
    """Print ``error: cannot write <what>: <path>: <why>`` on ``err``; returns 2, the commands' exit
    status for it (an output path in a missing folder, a folder, under a file)."""
    from rich.markup import escape

    err.print("[bold red]error:[/] cannot write " + escape(f"{what}: {os_error_line(e)}"), highlight=False,
              soft_wrap=True)
    return 2


def ellipsize(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal cells, ending in "…" when cut (width >= 1)."""
    if cell_len(text) <= width:
        return text
    out = ""
    for ch in text:
        if cell_len(out + ch) > width - 1:
            break
        out += ch
    return out + "…"


def _num(v) -> str:
    return "" if v is None else f"{v:,}"


def _bytes(n) -> str:
    return "–" if n is None else f"{n / 1e6:,.2f} MB" if n >= 1e6 else f"{n / 1e3:,.1f} kB"


def funnel_rows(stages: list[dict], extra: tuple[str, ...]) -> tuple[list[str], list[list[str]], list[bool]]:
    """Header, cell strings and "is a reason row" flags of the funnel.

    ``stages``: ``[{stage, in, kept, rejected: [{reason, count, share?, bytes?}], errored: [...],
    seconds}]`` (``datapipe.inspect.reader.funnel``'s shape). ``extra``: more columns out of ``share``,
    ``bytes`` (reason rows only) and ``seconds`` (stage rows).
    """
    header = ["stage / reason", "in", "kept", "rejected", "errored", *extra]
    rows, is_reason = [], []
    for s in stages:
        rej, err = s.get("rejected") or [], s.get("errored") or []
        cells = [s["stage"], _num(s["in"]), _num(s["kept"]), _num(sum(r["count"] for r in rej)),
                 _num(sum(r["count"] for r in err))]
        for col in extra:
            cells.append(f"{s.get('seconds') or 0.0:,.1f}" if col == "seconds" else "")
        rows.append(cells)
        is_reason.append(False)
        for kind, items in (("rejected", rej), ("errored", err)):
            for r in items:
                cells = ["  " + r["reason"], "", "",  # as stored: what inspect --reason takes
                         _num(r["count"]) if kind == "rejected" else "", _num(r["count"]) if kind == "errored" else ""]
                for col in extra:
                    cells.append(f"{r['share']:.1%}" if col == "share" and r.get("share") is not None
                                 else _bytes(r.get("bytes")) if col == "bytes" else "")
                rows.append(cells)
                is_reason.append(True)
    return header, rows, is_reason


def print_funnel(console: Console, stages: list[dict], extra: tuple[str, ...] = ("seconds",),
                 title: str | None = "Funnel") -> None:
    """Print the funnel of ``stages`` (see ``funnel_rows``) within ``console.width`` columns."""
    header, rows, is_reason = funnel_rows(stages, extra)
    widths = [max(cell_len(r[i]) for r in [header] + rows) for i in range(len(header))]
    name_w = console.width - sum(widths[1:]) - _GAP * (len(header) - 1)
    if name_w < MIN_NAME:
        _print_lines(console, header, rows, is_reason)
        return
    name_w = min(name_w, widths[0])
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
              collapse_padding=True)
    for i, h in enumerate(header):
        w = name_w if i == 0 else widths[i]
        t.add_column(h, justify="left" if i == 0 else "right", no_wrap=True, min_width=w, max_width=w,
                     overflow="ellipsis")
    for cells, reason in zip(rows, is_reason):
        t.add_row(ellipsize(cells[0], name_w), *cells[1:], style="dim" if reason else None)
    console.print(t)


def _print_lines(console: Console, header: list[str], rows: list[list[str]], is_reason: list[bool]) -> None:
    """Too narrow for a table: ``name: col value, ...`` per row, wrapped by the console (numbers whole)."""
    for cells, reason in zip(rows, is_reason):
        parts = [f"{h} {v}" for h, v in zip(header[1:], cells[1:]) if v]
        console.print(f"{cells[0]}: " + ", ".join(parts), highlight=False, markup=False,
                      style="dim" if reason else None)


def ledger_stages(ledger) -> list[dict]:
    """``print_funnel``'s input from a ``datapipe.engine.ledger.Ledger`` (shares of the stage's in; no bytes)."""
    out = []
    def items(counter, n_in):
        return [{"reason": r, "count": n, "share": n / n_in if n_in else 0.0}
                for r, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))]
    for name, s in ledger.stages.items():
        out.append({"stage": name, "in": s.n_in, "kept": s.kept, "rejected": items(s.rejected, s.n_in),
                    "errored": items(s.errored, s.n_in), "seconds": s.seconds})
    return out


def config_lines(configs: list[tuple[str, dict]], width: int = 80, value_chars: int = 40) -> list[str]:
    """``name: key=value, ...`` per stage or section, wrapped to ``width`` with an indent; nested
    settings flattened (``minhash.threshold=0.8``) so no threshold hides inside a long value; long
    values (word lists, paths) cut with "…"."""
    import textwrap

    out = []
    for name, cfg in configs:
        vals = ", ".join(f"{k}={ellipsize(short_value(v), value_chars)}" for k, v in flat_items(cfg or {}))
        out += textwrap.wrap(f"{name}: {vals or '(no settings)'}", width=max(width, 20), initial_indent="  ",
                             subsequent_indent="      ", break_long_words=False, break_on_hyphens=False)
    return out


def flat_items(cfg, prefix: str = ""):
    """``(dotted key, value)`` of a nested config; a plain value (e.g. a tokenizer's sha256 beside
    the sections) is one ``("value", v)`` item."""
    if not isinstance(cfg, dict):
        yield prefix.rstrip(".") or "value", cfg
        return
    for k, v in cfg.items():
        if isinstance(v, dict) and v:
            yield from flat_items(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def short_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict):
        return "{}" if not v else "{" + ", ".join(f"{k}: {short_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(short_value(x) for x in v) + "]"
    return "null" if v is None else str(v)
