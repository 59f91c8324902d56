"""The run report: one self-contained HTML file with the funnel and the plots of a run.

Plots are drawn with matplotlib (Agg canvas, no pyplot state) and embedded as base64 PNGs, so the
file opens offline and can be mailed around. Written to ``RUN_DIR/report.html`` at the end of every
run and by ``datapipe report RUN_DIR``. Each plot is drawn only when its data exists (score columns
of stages in the chain, dedup clusters, tokens).

The run draws the summary (funnel, reasons, languages, dedup clusters, tokens, time per stage)
and lists the signal columns; one histogram per numeric signal (the main chain has about 40, each
~0.1-0.3 s to draw) is drawn by ``datapipe report`` (``histograms=True``), or by the run itself
with ``report: {histograms: true}``: we measured the 37 histograms at most of the fixed cost
of a small run.

Every plot follows ``datapipe.stages.phases.report.style`` (one meaning per colour, whole-number ticks with
thousands separators on counts, a log x axis for skewed signals); records that are not documents
(``non_document:*``) have a plot of their own, apart from filter rejections; a table of contents
at the top links every section.
"""
from __future__ import annotations

import base64
import html
import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from datapipe.cli.termfmt import flat_items, short_value
from datapipe.inspect import reader as I
from datapipe.inspect.rules import column_thresholds, signal_reasons
from datapipe.inspect.run_config import effective_phase_configs, effective_stage_configs
from datapipe.io.parquet import fs_and_path, join
from datapipe.stages.phases.dedup.phase import banding
from datapipe.stages.phases.report import REPORT_FILE
from datapipe.stages.phases.report import style as S
from datapipe.stages.phases.report.contamination import contamination_html

#: Integer/float signal types plotted as histograms.
_NUMERIC = ("int", "uint", "float", "double", "halffloat")


def _figure(figsize) -> Figure:
    """A figure with its own Agg canvas: no pyplot figure manager to create and close."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _barh(labels, values, title, xlabel, color=S.NEUTRAL, counts: bool = True):
    """Horizontal bars, one ``color`` or one per bar; ``counts``: integer x ticks (thousands separated)."""
    fig = _figure((8, 0.35 * max(len(labels), 3) + 1))
    ax = fig.subplots()
    y = np.arange(len(labels))
    ax.barh(y, values, color=color)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    for yi, v in zip(y, values):
        ax.text(v, yi, f" {v:,.0f}" if float(v).is_integer() else f" {v:,.3g}", va="center", fontsize=8)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    (S.count_axis if counts else S.number_axis)(ax, "x")
    return _png(fig)


#: ``log_y`` of the histograms: ``auto`` (log when one group is 20x another: a few rejected rows
#: next to many kept ones), ``always`` (a threshold's tail stays visible), ``never``.
LOG_Y = ("auto", "always", "never")


def _hist(values_by_group: dict, title: str, thresholds=(), bins=40, log_y: str = "auto", integer_x: bool = False):
    """Overlaid histograms per group (colours: ``report_style.group_color``); thresholds dashed.
    A skewed non-negative signal gets a log x axis and log bins (``report_style.log_x_edges``);
    ``integer_x``: whole-number values (sizes), one bar per integer and integer ticks."""
    fig = _figure((8, 3.2))
    ax = fig.subplots()
    allv = np.concatenate([v for v in values_by_group.values() if len(v)] or [np.zeros(0)])
    log_edges = None if integer_x else S.log_x_edges(allv, bins)
    if integer_x and len(allv):
        lo, hi = int(allv.min()), int(allv.max())
        step = max(1, int(np.ceil((hi - lo + 1) / bins)))
        edges = np.arange(lo, hi + step + 1, step) - 0.5
    elif log_edges is not None:
        edges = log_edges
    else:
        edges = np.histogram_bin_edges(allv, bins=bins) if len(allv) else np.linspace(0, 1, bins + 1)
    for name, v in values_by_group.items():
        if len(v):  # one filled step path per group, not one patch per bin: same picture, far fewer artists
            ax.stairs(np.histogram(v, bins=edges)[0], edges, fill=True, alpha=0.6, label=f"{name} ({len(v):,})",
                      color=S.group_color(name))
    if log_edges is not None:
        if log_edges[0] == 0:
            ax.set_xscale("symlog", linthresh=float(log_edges[1]), linscale=1.0)
        else:
            ax.set_xscale("log")
        title += " (log x)"
    if integer_x:
        S.count_axis(ax, "x")
    else:
        S.number_axis(ax, "x")
    sizes = [len(v) for v in values_by_group.values() if len(v)]
    if log_y == "always" or (log_y == "auto" and sizes and max(sizes) > 20 * min(sizes)):
        ax.set_yscale("log")  # rejected rows are few next to kept ones: keep both visible
        ax.set_ylabel("documents (log)")
    else:
        ax.set_ylabel("documents")
    S.count_axis(ax, "y")
    off = []
    for t in thresholds:
        # A bound far outside the data (e.g. max 100000 words) would squash the bars into one column.
        if len(allv) and np.ptp(allv) > 0 and not (allv.min() - np.ptp(allv) <= t <= allv.max() + np.ptp(allv)) \
                or (log_edges is not None and log_edges[0] > 0 and t <= 0):
            off.append(f"{t:g}")
            continue
        ax.axvline(t, color="crimson", linestyle="--", linewidth=1.2)
        ax.text(t, ax.get_ylim()[1] * 0.95, f" {t:g}", color="crimson", fontsize=8, va="top")
    if off:
        title += f"; off the chart: {', '.join(off)}"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)


def _numeric_columns(run: I.Run) -> list[str]:
    schema = run.schema("kept") or run.schema("rejected")
    if schema is None:
        return []
    return [f.name for f in schema if f.name not in I.NOT_SIGNALS
            and any(str(f.type).startswith(p) for p in _NUMERIC)]


def _values(run: I.Run, column: str, reasons: list[str]) -> dict[str, np.ndarray]:
    """Non-null values of ``column``: kept documents, documents rejected on this signal (its
    ``reasons``), and documents rejected by another rule or stage (they still carry the value)."""
    out = {}
    col = I.ident(column)
    cond = f"{col} IS NOT NULL AND isfinite({col}::DOUBLE)"
    if run.files("kept") and column in run.columns("kept"):
        out["kept"] = run.query(f"SELECT {col}::DOUBLE AS v FROM {run.source('kept')} WHERE {cond}").column("v").to_numpy()
    if run.files("rejected") and column in run.columns("rejected"):
        t = run.query(f"SELECT {col}::DOUBLE AS v, reject_reason IN (SELECT unnest(?)) AS own "
                      f"FROM {run.source('rejected')} WHERE {cond}", [reasons or [""]])
        v, own = t.column("v").to_numpy(), t.column("own").to_numpy(zero_copy_only=False).astype(bool)
        label = "rejected on this signal" if len(reasons) != 1 else f"rejected: {reasons[0]}"
        out[label] = v[own]
        out["rejected by other rules"] = v[~own]
    return out


def figures(run: I.Run, funnel: dict, log_y: str = "auto", histograms: bool = True) -> list[tuple[str, str]]:
    """``[(title, base64 PNG)]`` for every plot the run has data for. ``log_y``: see ``LOG_Y``;
    ``histograms=False``: the summary only, no histogram per signal column."""

    figs = []
    st = funnel["stages"]
    figs.append(("Funnel", _barh([f"{s['stage']} (in)" for s in st[:1]] + [s["stage"] for s in st],
                                 [st[0]["in"]] + [s["kept"] for s in st] if st else [],
                                 "Documents remaining after each stage", "records", S.KEPT)))
    reasons = [(r["reason"], r["count"], kind == "errored") for s in st for kind in ("rejected", "errored")
               for r in s[kind]]
    reasons.sort(key=lambda r: (-r[1], r[0]))
    filt = [r for r in reasons if not r[0].startswith("non_document:")]
    if filt:
        figs.append(("Rejections by reason", _barh([r[0] for r in filt], [r[1] for r in filt],
                                                   "Records rejected (orange) and errored (red) by reason", "records",
                                                   [S.reason_color(r[0], r[2]) for r in filt])))
    nondoc = [r for r in reasons if r[0].startswith("non_document:")]
    if nondoc:  # WARC requests, metadata, redirects...: not documents, never filtered
        figs.append(("Records that are not documents", _barh(
            [r[0] for r in nondoc], [r[1] for r in nondoc],
            "Records that are not documents (counted, not filtered or stored)", "records", S.NOT_DOCUMENT)))
    if funnel["languages"]:
        figs.append(("Languages", _barh([r["lang"] for r in funnel["languages"]], [r["docs"] for r in funnel["languages"]],
                                        "Kept documents by language (top 20)", "documents", S.KEPT)))
    ths: dict[str, list[float]] = {}
    configs = effective_stage_configs(run)
    for name, cfg in configs:
        for col, vals in column_thresholds(name, cfg).items():
            ths.setdefault(col, []).extend(vals)
    own = signal_reasons([name for name, _ in configs])
    for col in _numeric_columns(run) if histograms else ():
        vals = _values(run, col, own.get(col, []))
        if any(len(v) for v in vals.values()):
            n_own = sum(len(v) for k, v in vals.items() if k.startswith("rejected") and "other" not in k)
            why = f"{n_own:,} rejected on it" if own.get(col) or ths.get(col) else "no rule of its own"
            figs.append((f"Histogram: {col}", _hist(vals, f"{col}: {why} (dashed: thresholds)", ths.get(col, ()),
                                                    log_y=log_y)))
    dstats = ((run.ledger_dict.get("phases") or {}).get("dedup") or {}).get("stats") or {}
    hists = {k: dstats.get(f"{k}_cluster_sizes") or {} for k in ("near", "exact")}
    if any(hists.values()):  # the dedup phase's own histograms (ledger.json phases.dedup.stats)
        labels = [f"{k}: size {n}" for k, h in hists.items() for n in sorted(h, key=int)]
        figs.append(("Near-duplicate clusters", _barh(labels, [h[n] for h in hists.values() for n in sorted(h, key=int)],
                                                      "Duplicate clusters by size (documents per cluster)",
                                                      "clusters")))
    elif "duplicate_of" in run.columns("rejected"):  # runs written before the stats were in the ledger
        t = run.query(f"SELECT count(*) + 1 AS n FROM {run.source('rejected')} WHERE duplicate_of IS NOT NULL GROUP BY duplicate_of")
        if t.num_rows:
            figs.append(("Near-duplicate clusters", _hist({"clusters": t.column("n").to_numpy()},
                                                          "Near-duplicate cluster sizes (documents per cluster)",
                                                          integer_x=True)))
    tk = funnel.get("tokens")
    if tk:
        figs.append(("Tokens per domain", _tokens_chart(tk)))
    timed = [s for s in st if s["seconds"]]
    if timed:
        fig = _figure((10, 0.35 * len(timed) + 1.5))
        a1, a2 = fig.subplots(1, 2)
        names = [s["stage"] for s in timed]
        a1.barh(names, [s["seconds"] for s in timed], color=S.NEUTRAL)
        a1.set_title("Time per stage (worker-seconds)")
        a2.barh(names, [s["in"] / s["seconds"] for s in timed], color=S.NEUTRAL)
        a2.set_title("Throughput (records in / second)")
        for a in (a1, a2):
            a.invert_yaxis()
            S.number_axis(a, "x")
        figs.append(("Per-stage time and throughput", _png(fig)))
    return figs


def _tokens_chart(tk: dict) -> str:
    """Written tokens against the target per domain; a log axis when domains differ 30x, so a
    small domain's bar is visible, and every bar labelled with its number."""
    doms = sorted(tk["tokens_per_domain"])
    written = [tk["tokens_per_domain"][d] for d in doms]
    target = [tk["target_tokens"].get(d) for d in doms]
    labels = {"tokens written": [f" {v:,.0f}" for v in written],
              "mixture target": [" –" if v is None else f" {v:,.0f}" for v in target]}
    target = [v or 0 for v in target]
    fig = _figure((8, 0.5 * len(doms) + 1.5))
    ax = fig.subplots()
    y = np.arange(len(doms))
    pos = [v for v in written + target if v > 0]
    log = bool(pos) and max(pos) > 30 * min(pos)
    for off, vals, label, col in ((-0.2, written, "tokens written", S.NEUTRAL),
                                  (0.2, target, "mixture target", "#a6bddb")):
        ax.barh(y + off, vals, 0.4, label=label, color=col)
        for yi, v, text in zip(y + off, vals, labels[label]):
            ax.text(v if v > 0 else (min(pos) if log else 0), yi, text, va="center", fontsize=7)
    if log:
        ax.set_xscale("log")
        ax.set_xlabel("tokens (log)")
    S.count_axis(ax, "x")
    ax.set_yticks(y, doms)
    ax.invert_yaxis()
    ax.set_title("Tokens per domain against the mixture target")
    ax.legend(fontsize=8)
    return _png(fig)


def _settings_html(run: I.Run) -> str:
    """Every stage's and phase section's settings as run (defaults filled in), one row each."""

    rows = []
    sections = [(sec, cfg) for secs in effective_phase_configs(run).values() for sec, cfg in (secs or {}).items()
                if cfg is not None]
    for name, cfg in effective_stage_configs(run) + sections:
        items = list(flat_items(cfg or {}))
        chosen = banding((run.ledger_dict.get("phases") or {}).get(name) or {}) if name == "dedup" else None
        if chosen:
            items.append(("minhash.bands x rows (chosen)", "{} x {}".format(*chosen)))
        for k, (key, v) in enumerate(items):
            head = f'<th rowspan="{len(items)}">{html.escape(name)}</th>' if k == 0 else ""
            val = v if isinstance(v, str) else short_value(v)
            rows.append(f'<tr data-stage="{html.escape(name)}" data-setting="{html.escape(key)}">{head}'
                        f"<td>{html.escape(key)}</td><td>{html.escape(val)}</td></tr>")
    if not rows:
        return ""
    return ('<section id="settings-in-force"><h2>Settings in force</h2><p>Every stage and phase section as the run applied it, '
            'defaults filled in (<code>ledger.json</code>: <code>stage_configs</code>, <code>phase_configs</code>).</p>'
            f'<table id="settings"><tr><th>stage</th><th>setting</th><th>value</th></tr>{"".join(rows)}</table></section>')


def _histograms_note(run: I.Run) -> str:
    """Where the signal histograms are when the run did not draw them: the columns, the command."""
    cols = _numeric_columns(run)
    if not cols:
        return ""
    names = ", ".join(f"<code>{html.escape(c)}</code>" for c in cols)
    return (f'<section id="histograms"><h2>Signal histograms</h2><p>Not drawn by the run ({len(cols)} numeric '
            f'signal columns, each a plot): <code>datapipe report {html.escape(run.url)}</code> draws them '
            f"with their thresholds (or set <code>report: {{histograms: true}}</code> in the manifest). "
            f"Columns: {names}.</p></section>")


def render(run: I.Run, log_y: str = "auto", histograms: bool = True) -> str:
    """The report as an HTML string (no external resources). ``log_y``: see ``LOG_Y``;
    ``histograms``: draw one histogram per numeric signal column (else list them)."""

    f = I.funnel(run)
    rows = []
    for s in f["stages"]:
        rows.append(f'<tr class="stage" data-stage="{html.escape(s["stage"])}"><th>{html.escape(s["stage"])}</th>'
                    f'<td data-key="in">{s["in"]:,}</td><td data-key="kept">{s["kept"]:,}</td>'
                    f'<td data-key="rejected">{sum(r["count"] for r in s["rejected"]):,}</td>'
                    f'<td data-key="errored">{sum(r["count"] for r in s["errored"]):,}</td><td>'
                    + "<br>".join(f'{html.escape(r["reason"])}: <span data-reason="{html.escape(r["reason"])}">'
                                  f'{r["count"]:,}</span> ({r["share"]:.1%})' for r in s["rejected"] + s["errored"])
                    + "</td></tr>")
    tot = f["totals"]
    figs = figures(run, f, log_y, histograms)
    toc = [("funnel-section", "Funnel table")] + [("plot-" + S.slug(t), t) for t, _ in figs]
    imgs = "\n".join(f'<section id="plot-{S.slug(t)}"><h2>{html.escape(t)}</h2><img alt="{html.escape(t)}" '
                     f'src="data:image/png;base64,{b}"></section>' for t, b in figs)
    if not histograms:
        imgs += "\n" + _histograms_note(run)
        toc.append(("histograms", "Signal histograms (not drawn)"))
    settings = _settings_html(run)
    if settings:
        toc.append(("settings-in-force", "Settings in force"))
    nav = ('<nav id="toc"><h2>Contents</h2><ol>' + "".join(f'<li><a href="#{i}">{html.escape(t)}</a></li>'
                                                           for i, t in toc) + "</ol></nav>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>datapipe run report: {html.escape(run.url)}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right;vertical-align:top}}
td:last-child{{text-align:left;font-size:90%}}img{{max-width:100%}}
#toc ol{{columns:2;font-size:90%}}section h2 a{{font-size:70%;font-weight:normal;margin-left:.5em}}</style></head>
<body><h1>Run report</h1><p><code>{html.escape(run.url)}</code></p>
<p id="totals">records in <b data-key="in">{tot['in']:,}</b>, kept <b data-key="kept">{tot['kept']:,}</b>,
rejected <b data-key="rejected">{tot['rejected']:,}</b>, errored <b data-key="errored">{tot['errored']:,}</b></p>
<p id="legend">Colours: <span style="color:{S.KEPT}">&#9632; kept</span>,
<span style="color:{S.REJECTED}">&#9632; rejected by a filter</span> (in a histogram: by that signal's rule),
<span style="color:{S.OTHER}">&#9632; rejected by another rule</span>, <span style="color:{S.ERRORED}">&#9632; errored</span>,
<span style="color:{S.NOT_DOCUMENT}">&#9632; not a document</span>, <span style="color:{S.NEUTRAL}">&#9632; other quantities</span>.</p>
{nav}
<section id="funnel-section"><h2>Funnel</h2><table id="funnel"><tr><th>stage</th><th>in</th><th>kept</th><th>rejected</th><th>errored</th><th>reasons</th></tr>
{''.join(rows)}</table></section>
{imgs}
{contamination_html(run)}
{settings}
</body></html>
"""


def write_report(run_dir: str, out: str | None = None, storage_options: dict | None = None,
                 log_y: str = "auto", histograms: bool = True) -> str:
    """Write the report of ``run_dir`` to ``out`` (default ``run_dir/report.html``); return its path.
    ``log_y``: ``auto``, ``always`` or ``never`` (histograms' y axis; ValueError otherwise);
    ``histograms=False``: the summary plots only (what a run draws by default)."""
    if log_y not in LOG_Y:
        raise ValueError(f"log_y must be one of {', '.join(LOG_Y)}, not {log_y!r}")
    run = I.Run.open(run_dir, storage_options)
    page = render(run, log_y, histograms)

    target = out or join(run.url, REPORT_FILE)
    fs, path = fs_and_path(target, storage_options if out is None else None)
    with fs.open(path, "w", encoding="utf-8") as fh:
        fh.write(page)
    return target
