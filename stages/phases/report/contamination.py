"""The run report's contamination table: per benchmark, the documents that matched its test items
and how many distinct items were hit (from the ``decontam_*`` signal columns of the stored rows)."""
from __future__ import annotations

import html

from datapipe.inspect import reader as I


def contamination(run: I.Run) -> list[dict]:
    """Rows ``{benchmark, documents, dropped, items}``, most documents first: ``documents`` that
    matched (wherever they ended: kept, or rejected by decontam or a later stage), ``dropped`` those
    the decontam stage rejected, ``items`` distinct items hit. Empty without a decontam stage."""
    rows: dict[str, dict] = {}
    for kind in ("kept", "rejected"):
        if "decontam_items" not in run.columns(kind):
            continue
        stage = "reject_stage = 'decontam'" if "reject_stage" in run.columns(kind) else "false"
        sql = (f"SELECT split_part(i, '/', 1) AS b, list(DISTINCT id) AS docs, list(DISTINCT id) FILTER (WHERE dropped) "
               f"AS dropped, list(DISTINCT i) AS ids FROM (SELECT id, {stage} AS dropped, unnest(decontam_items) AS i "
               f"FROM {run.source(kind)}) GROUP BY b")
        for r in run.query(sql).to_pylist():
            row = rows.setdefault(r["b"], {"benchmark": r["b"], "docs": set(), "dropped": set(), "ids": set()})
            row["docs"].update(r["docs"])
            row["dropped"].update(r["dropped"] or [])
            row["ids"].update(r["ids"])
    out = [{"benchmark": b, "documents": len(r["docs"]), "dropped": len(r["dropped"]), "items": len(r["ids"])}
           for b, r in rows.items()]
    return sorted(out, key=lambda r: (-r["documents"], r["benchmark"]))


def contamination_html(run: I.Run) -> str:
    """The table as an HTML section ('' when the run has no decontam stage)."""
    try:
        rows = contamination(run)
    except I.InspectError:
        return ""
    has = any("decontam_items" in run.columns(k) for k in ("kept", "rejected"))
    if not has:
        return ""
    body = "".join(f'<tr data-benchmark="{html.escape(r["benchmark"])}"><th>{html.escape(r["benchmark"])}</th>'
                   f'<td data-key="documents">{r["documents"]}</td><td data-key="dropped">{r["dropped"]}</td>'
                   f'<td data-key="items">{r["items"]}</td></tr>'
                   for r in rows) or '<tr><td colspan="4">no document matched a benchmark item</td></tr>'
    return ('<section id="contamination"><h2>Contamination per benchmark</h2><p>Documents holding a test item '
            '(<code>decontam</code> stage; with <code>action: remove</code> the matched paragraphs were cut), '
            'those it dropped, and the distinct test items hit.</p><table id="decontam">'
            '<tr><th>benchmark</th><th>documents</th><th>dropped</th><th>items hit</th></tr>'
            f"{body}</table></section>")
