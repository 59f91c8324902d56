"""Live per-stage counters on the Dask dashboard.

Phase-1 tasks log their ledger so far as structured events (``task.report_progress``, topic
``datapipe-progress``); the runner logs the dedup phase's counts the same way. ``StageCounters``,
a scheduler plugin, sums them per stage and serves them on the scheduler's dashboard port:

- ``/datapipe`` — a bokeh page (table + bar chart, refreshed every second) in the Dask dashboard;
- ``/datapipe/counters.json`` — the same numbers for scripts and tests.

Events hold each task's *cumulative* counts, not per-batch deltas: a retried task (its worker
died) starts again from zero and simply replaces what its dead attempt had sent, so nothing is
counted twice. Counters are kept per run output, so one long-lived scheduler can serve many runs.
"""
from __future__ import annotations

import html
import json
import logging

from distributed.diagnostics.plugin import SchedulerPlugin

log = logging.getLogger("datapipe")

PLUGIN_NAME = "datapipe-counters"
PAGE = "/datapipe"
COLUMNS = ("in", "kept", "rejected", "errored")


class StageCounters(SchedulerPlugin):
    idempotent = True  # a second run on the same scheduler reuses it (and its page routes)

    def __init__(self):
        self.runs: dict[str, dict[str, dict[str, list[int]]]] = {}  # run -> task -> stage -> counts
        self.latest: str | None = None

    def start(self, scheduler) -> None:
        try:
            _add_routes(scheduler, self)
        except Exception as e:  # noqa: BLE001 - no page (e.g. no bokeh) must not stop the run
            log.warning("datapipe counters page not added to the dashboard: %s: %s", type(e).__name__, e)

    def log_event(self, topic: str, msg) -> None:
        if topic != "datapipe-progress" or not isinstance(msg, dict) or not msg.get("stages"):
            return
        run = msg.get("run") or "?"
        self.runs.setdefault(run, {})[msg["task"]] = msg["stages"]
        self.latest = run

    def totals(self, run: str | None = None) -> dict:
        """``{"run", "tasks", "stages": {stage: {in, kept, rejected, errored}}}`` summed over tasks."""
        run = run or self.latest
        tasks = self.runs.get(run, {})
        stages: dict[str, dict[str, int]] = {}
        for per_task in tasks.values():
            for name, counts in per_task.items():
                s = stages.setdefault(name, dict.fromkeys(COLUMNS, 0))
                for col, v in zip(COLUMNS, counts):
                    s[col] += v
        return {"run": run, "tasks": len(tasks), "stages": stages}


def _plugin(scheduler) -> StageCounters | None:
    return scheduler.plugins.get(PLUGIN_NAME)


def _add_routes(scheduler, plugin: StageCounters) -> None:
    """Mount the JSON endpoint and the bokeh page on the scheduler's dashboard server."""
    from tornado import web
    from tornado.ioloop import IOLoop

    app = getattr(scheduler, "http_application", None)
    if app is None or getattr(scheduler, "_datapipe_routes", False):
        return

    class CountersJSON(web.RequestHandler):
        def get(self):
            p = _plugin(scheduler) or plugin
            self.set_header("Content-Type", "application/json")
            self.write(json.dumps(p.totals(self.get_argument("run", None))))

    app.add_handlers(r".*", [(PAGE + "/counters.json", CountersJSON)])
    from distributed.dashboard.core import BokehApplication
    from distributed.dashboard.scheduler import template_variables

    tv = template_variables(scheduler)  # memoized dict of the dashboard: adds us to its "More" menu
    if not any(p.get("url") == PAGE.strip("/") for p in tv["plots"]):
        tv["plots"].append({"url": PAGE.strip("/"), "name": "Datapipe counters"})
    bokeh_app = BokehApplication({PAGE: _counters_doc}, scheduler, prefix="/", template_variables=tv)
    app.add_application(bokeh_app)
    bokeh_app.initialize(IOLoop.current())
    scheduler._datapipe_routes = True


def _counters_doc(scheduler, extra, doc) -> None:
    """The bokeh document: per-stage kept/rejected/errored so far, as a table and stacked bars."""
    from bokeh.layouts import column
    from bokeh.models import (
        AllIndices,
        ColumnDataSource,
        DataTable,
        Div,
        NumberFormatter,
        TableColumn,
    )
    from bokeh.plotting import figure
    from distributed.dashboard.components.scheduler import BOKEH_THEME, env

    src = ColumnDataSource({"stage": [], **{c: [] for c in COLUMNS}})
    head = Div(text="")
    fmt = NumberFormatter(format="0,0")
    table = DataTable(source=src, columns=[TableColumn(field="stage", title="stage")]
                      + [TableColumn(field=c, title=c, formatter=fmt) for c in COLUMNS],
                      index_position=None, width=700, height=440)  # 16 stages without scrolling
    fig = figure(y_range=[], height=320, width=700, title="Records per stage so far", tools="")
    fig.hbar_stack(["kept", "rejected", "errored"], y="stage", height=0.7, source=src,
                   color=["#55a868", "#dd8452", "#c44e52"], legend_label=["kept", "rejected", "errored"])
    fig.legend.location = "bottom_right"

    def update():
        p = _plugin(scheduler)
        t = p.totals() if p else {"run": None, "tasks": 0, "stages": {}}
        names = list(t["stages"])
        new = {"stage": names, **{c: [t["stages"][n][c] for n in names] for c in COLUMNS}}
        # the run's output path is any string a user chose: text, never markup (Div renders HTML)
        run = html.escape(str(t["run"])) if t["run"] else "(none yet)"
        head.text = f"<h3>datapipe run: {run}</h3><p>{int(t['tasks'])} task(s) reporting</p>"
        if new == {k: list(v) for k, v in src.data.items()}:
            return
        src.data = new
        fig.y_range.factors = names[::-1]
        # A DataTable repaints on a change of its CDSView, which a change of the source's data
        # fires only when the row indices change (rows added or removed): with the same rows the
        # cells kept their first values while the bars moved. A fresh filter fires it every time.
        table.view.filter = AllIndices()

    update()
    doc.add_periodic_callback(update, 1000)
    doc.title = "Dask: datapipe counters"
    doc.add_root(column(head, table, fig))
    doc.template = env.get_template("simple.html")
    doc.template_variables.update(extra)
    doc.theme = BOKEH_THEME


def register(client) -> bool:
    """Install the plugin on the client's scheduler; False (and a warning) when it cannot be."""
    try:
        client.register_plugin(StageCounters(), name=PLUGIN_NAME)
        return True
    except Exception as e:  # noqa: BLE001 - e.g. a remote scheduler without datapipe installed
        log.warning("live counters not published to the dashboard: %s: %s", type(e).__name__, e)
        return False
