"""The run report: one self-contained HTML file with the funnel and the plots of a run.

Plots are drawn with matplotlib (Agg backend) and embedded as base64 PNGs, so the file opens
offline and can be mailed around. Written to ``RUN_DIR/report.html`` at the end of every run and
by ``datapipe report RUN_DIR``. Each plot is drawn only when its data exists (score columns of
stages in the chain, dedup clusters, tokens).
"""
from __future__ import annotations

import base64
import html
import io

import matplotlib

matplotlib.use("Agg")  # no display on workers and CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from datapipe import inspect as I  # noqa: E402
from datapipe.io.parquet import fs_and_path, join  # noqa: E402

#: Integer/float signal types plotted as histograms.
_NUMERIC = ("int", "uint", "float", "double", "halffloat")


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _barh(labels, values, title, xlabel, color="#4c72b0"):
    fig, ax = plt.subplots(figsize=(8, 0.35 * max(len(labels), 3) + 1))
    y = np.arange(len(labels))
    ax.barh(y, values, color=color)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    for yi, v in zip(y, values):
        ax.text(v, yi, f" {v:,.0f}" if float(v).is_integer() else f" {v:,.3g}", va="center", fontsize=8)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    return _png(fig)


def _hist(values_by_group: dict, title: str, thresholds=(), bins=40):
    fig, ax = plt.subplots(figsize=(8, 3.2))
    allv = np.concatenate([v for v in values_by_group.values() if len(v)] or [np.zeros(0)])
    edges = np.histogram_bin_edges(allv, bins=bins) if len(allv) else bins
    for name, v in values_by_group.items():
        if len(v):
            ax.hist(v, bins=edges, alpha=0.6, label=f"{name} ({len(v):,})")
    sizes = [len(v) for v in values_by_group.values() if len(v)]
    if sizes and max(sizes) > 20 * min(sizes):
        ax.set_yscale("log")  # rejected rows are few next to kept ones: keep both visible
    off = []
    for t in thresholds:
        # A bound far outside the data (e.g. max 100000 words) would squash the bars into one column.
        if len(allv) and np.ptp(allv) > 0 and not (allv.min() - np.ptp(allv) <= t <= allv.max() + np.ptp(allv)):
            off.append(f"{t:g}")
            continue
        ax.axvline(t, color="crimson", linestyle="--", linewidth=1.2)
        ax.text(t, ax.get_ylim()[1] * 0.95, f" {t:g}", color="crimson", fontsize=8, va="top")
    if off:
        title += f"; off the chart: {', '.join(off)}"
    ax.set_title(title)
    ax.set_ylabel("documents")
    ax.legend(fontsize=8)
    return _png(fig)


def _numeric_columns(run: I.Run) -> list[str]:
    schema = run.schema("kept") or run.schema("rejected")
    if schema is None:
        return []
    return [f.name for f in schema if f.name not in I.NOT_SIGNALS
            and any(str(f.type).startswith(p) for p in _NUMERIC)]


def _values(run: I.Run, column: str) -> dict[str, np.ndarray]:
    """Non-null values of ``column`` for kept and for rejected documents."""
    out = {}
    for kind in ("kept", "rejected"):
        if run.files(kind) and column in run.columns(kind):
            t = run.query(f"SELECT {I._ident(column)}::DOUBLE AS v FROM {run.source(kind)} "
                          f"WHERE {I._ident(column)} IS NOT NULL AND isfinite({I._ident(column)}::DOUBLE)")
            out[kind] = t.column("v").to_numpy()
    return out


def figures(run: I.Run, funnel: dict) -> list[tuple[str, str]]:
    """``[(title, base64 PNG)]`` for every plot the run has data for."""
    from datapipe.inspect_rules import column_thresholds

    figs = []
    st = funnel["stages"]
    figs.append(("Funnel", _barh([f"{s['stage']} (in)" for s in st[:1]] + [s["stage"] for s in st],
                                 [st[0]["in"]] + [s["kept"] for s in st] if st else [],
                                 "Documents remaining after each stage", "records")))
    reasons = [(r["reason"], r["count"]) for s in st for r in s["rejected"] + s["errored"]]
    if reasons:
        reasons.sort(key=lambda kv: -kv[1])
        figs.append(("Rejections by reason", _barh([r for r, _ in reasons], [n for _, n in reasons],
                                                   "Rejected and errored records by reason", "records", "#dd8452")))
    if funnel["languages"]:
        figs.append(("Languages", _barh([r["lang"] for r in funnel["languages"]], [r["docs"] for r in funnel["languages"]],
                                        "Kept documents by language (top 20)", "documents", "#55a868")))
    ths: dict[str, list[float]] = {}
    for name, cfg in run.stage_configs():
        for col, vals in column_thresholds(name, cfg).items():
            ths.setdefault(col, []).extend(vals)
    for col in _numeric_columns(run):
        vals = _values(run, col)
        if any(len(v) for v in vals.values()):
            figs.append((f"Histogram: {col}", _hist(vals, f"{col} (dashed: thresholds)", ths.get(col, ()))))
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
                                                          "Near-duplicate cluster sizes")))
    tk = funnel.get("tokens")
    if tk:
        doms = sorted(tk["tokens_per_domain"])
        fig, ax = plt.subplots(figsize=(8, 0.4 * len(doms) + 1.5))
        y = np.arange(len(doms))
        ax.barh(y - 0.2, [tk["tokens_per_domain"][d] for d in doms], 0.4, label="tokens written")
        ax.barh(y + 0.2, [tk["target_tokens"].get(d) or 0 for d in doms], 0.4, label="mixture target")
        ax.set_yticks(y, doms)
        ax.set_title("Tokens per domain against the mixture target")
        ax.legend(fontsize=8)
        figs.append(("Tokens per domain", _png(fig)))
    timed = [s for s in st if s["seconds"]]
    if timed:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 0.35 * len(timed) + 1.5))
        names = [s["stage"] for s in timed]
        a1.barh(names, [s["seconds"] for s in timed], color="#8172b3")
        a1.set_title("Time per stage (worker-seconds)")
        a2.barh(names, [s["in"] / s["seconds"] for s in timed], color="#937860")
        a2.set_title("Throughput (records in / second)")
        for a in (a1, a2):
            a.invert_yaxis()
        figs.append(("Per-stage time and throughput", _png(fig)))
    return figs


def render(run: I.Run) -> str:
    """The report as an HTML string (no external resources)."""
    f = I.funnel(run)
    rows = []
    for s in f["stages"]:
        rows.append(f'<tr class="stage" data-stage="{html.escape(s["stage"])}"><th>{html.escape(s["stage"])}</th>'
                    f'<td data-key="in">{s["in"]}</td><td data-key="kept">{s["kept"]}</td>'
                    f'<td data-key="rejected">{sum(r["count"] for r in s["rejected"])}</td>'
                    f'<td data-key="errored">{sum(r["count"] for r in s["errored"])}</td><td>'
                    + "<br>".join(f'{html.escape(r["reason"])}: <span data-reason="{html.escape(r["reason"])}">'
                                  f'{r["count"]}</span> ({r["share"]:.1%})' for r in s["rejected"] + s["errored"])
                    + "</td></tr>")
    tot = f["totals"]
    imgs = "\n".join(f'<section><h2>{html.escape(t)}</h2><img alt="{html.escape(t)}" src="data:image/png;base64,{b}">'
                     f"</section>" for t, b in figures(run, f))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>datapipe run report: {html.escape(run.url)}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right;vertical-align:top}}
td:last-child{{text-align:left;font-size:90%}}img{{max-width:100%}}</style></head>
<body><h1>Run report</h1><p><code>{html.escape(run.url)}</code></p>
<p id="totals">records in <b data-key="in">{tot['in']}</b>, kept <b data-key="kept">{tot['kept']}</b>,
rejected <b data-key="rejected">{tot['rejected']}</b>, errored <b data-key="errored">{tot['errored']}</b></p>
<table id="funnel"><tr><th>stage</th><th>in</th><th>kept</th><th>rejected</th><th>errored</th><th>reasons</th></tr>
{''.join(rows)}</table>
{imgs}
</body></html>
"""


def write_report(run_dir: str, out: str | None = None, storage_options: dict | None = None) -> str:
    """Write the report of ``run_dir`` to ``out`` (default ``run_dir/report.html``); return its path."""
    run = I.Run.open(run_dir, storage_options)
    page = render(run)
    target = out or join(run.url, "report.html")
    fs, path = fs_and_path(target, storage_options if out is None else None)
    with fs.open(path, "w", encoding="utf-8") as fh:
        fh.write(page)
    return target
