"""``report.html`` of an ablation: the decision first, in plain words, then the ranking as a table,
the loss-vs-weight plot, the figures behind the decision and the ``mix:`` block to paste.

One self-contained page (plot embedded as base64 PNG) laid out for an ordinary window: the body is
at most 1,100 px wide, the ranking table scrolls inside its own box when it has many columns, and
the plot scales down to the page.
"""
from __future__ import annotations

import base64
import html
from pathlib import Path

_CSS = """body{font-family:sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222}
#decision{font-size:1.25em;line-height:1.4;background:#eef5ee;border-left:6px solid #55a868;padding:.6em 1em}
.scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;font-size:90%}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap}
td:last-child,th:last-child{text-align:left;white-space:normal;min-width:12em}
tr.tied{background:#f3f8f3}tr.pick td:nth-child(2){font-weight:bold}
img{max-width:100%;height:auto}pre{white-space:pre-wrap;background:#f6f6f6;padding:.6em}"""


def render_html(name: str, headline: str, ranking: tuple[list[str], list[list[str]]], sections: dict[str, list[str]],
                png: Path, mix_yaml: str) -> str:
    """The page as a string. ``ranking``: header and cells (``report.ranking_cells``); ``sections``:
    title -> sentences; ``png``: the loss-vs-weight plot; ``mix_yaml``: recommended_mix.yaml's text."""
    head, body = ranking
    esc = html.escape
    rows = []
    for cells in body:
        notes = cells[-1]
        cls = " ".join(c for c, on in (("tied", "tied with best" in notes or cells[0] == "1"),
                                        ("pick", "cheapest of the tied" in notes)) if on)
        rows.append(f'<tr class="{cls}">' + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    table = ("<div class='scroll'><table id='ranking'><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head)
             + "</tr>" + "".join(rows) + "</table></div>")
    secs = "".join(f"<h2>{esc(t)}</h2><ul>" + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>"
                   for t, lines in sections.items())
    img = base64.b64encode(png.read_bytes()).decode()
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>ablation {esc(name)}</title><style>{_CSS}</style></head><body>"
            f"<p id='decision'>{esc(headline)}</p><h1>Ablation {esc(name)}</h1>"
            f"<h2>Ranking (lower objective is better)</h2>{table}"
            f"<img src='data:image/png;base64,{img}' alt='loss vs domain weight'>{secs}"
            f"<h2>recommended_mix.yaml</h2><pre id='mix'>{esc(mix_yaml)}</pre></body></html>")
