"""Monitoring: live per-stage counters on the Dask dashboard, progress per phase, dashboard binding."""
import io
import json
import os
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from rich.console import Console

from datapipe import monitor
from datapipe.cli.progress import RunProgress
from datapipe.engine import runner
from datapipe.engine.task import PROGRESS_TOPIC
from datapipe.manifest.load import load_manifest

REPO = Path(__file__).resolve().parent.parent


def _get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read()


@pytest.fixture(scope="module")
def cluster_run(data_dir, tmp_path_factory, warm_client):
    """The main manifest (dedup, mix + tokenize) through a cluster that outlives the run (conftest's
    warm one, reached by its address as ``cluster.address`` reaches an existing cluster)."""
    out = tmp_path_factory.mktemp("monitor-run")
    inputs = sorted(str(p) for p in (data_dir / "warc").glob("*.gz") if not p.name.startswith("realpages"))
    m = load_manifest(REPO / "manifests" / "cc-2026.yaml",
                      {"inputs.paths": inputs, "inputs.crawl": None, "output": str(out),
                       "batch_size": 8})  # small batches: several live reports per file
    m.cluster.address = warm_client.scheduler.address
    sec = warm_client.security  # the cluster's TLS (its throw-away CA), as an external one would be reached
    m.cluster.tls_ca_file, m.cluster.tls_cert, m.cluster.tls_key = sec.tls_ca_file, sec.tls_client_cert, sec.tls_client_key
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    with RunProgress(console, len(inputs)) as prog:
        res = runner.run(m, progress=prog.progress, on_records=prog.on_records, on_plan=prog.on_plan,
                         on_phase=prog.on_phase)
    # this run's events (the cluster served other runs before)
    events = [msg for _, msg in warm_client.get_events(PROGRESS_TOPIC) if msg.get("run") == str(out)]
    return {"out": out, "inputs": inputs, "res": res, "prog": prog, "console": console, "manifest": m,
            "dashboard": warm_client.dashboard_link, "events": events,
            "ledger": json.loads((out / "ledger.json").read_text())}


def test_dashboard_counters_equal_the_ledger(cluster_run):
    base = "http://127.0.0.1:%d" % urlsplit(cluster_run["dashboard"]).port
    status, body = _get(base + "/datapipe/counters.json")
    got = json.loads(body)
    assert status == 200 and got["run"] == str(cluster_run["out"])
    led = cluster_run["ledger"]
    want = {name: {"in": s["in"], "kept": s["kept"], "rejected": sum(s["rejected"].values()),
                   "errored": sum(s["errored"].values())} for name, s in led["stages"].items()}
    assert got["stages"] == want
    assert list(got["stages"]) == list(led["stages"])  # stage order as in the funnel
    assert "dedup_near" in got["stages"] and got["tasks"] == led["tasks"] + 1  # + the dedup phase
    status, page = _get(base + "/datapipe")  # the bokeh page inside the Dask dashboard
    assert status == 200 and b"Dask Diagnostic UI" in page
    assert b'href="datapipe"' in _get(base + "/status")[1]  # listed in the dashboard's "More" menu
    # What the page shows (its bokeh document, pulled over the websocket as a browser gets it).
    from bokeh.client import pull_session
    from bokeh.models import ColumnDataSource

    with pull_session(url=base + "/datapipe") as session:
        data, = [dict(m.data) for m in session.document.select({"type": ColumnDataSource}) if "stage" in m.data]
        assert session.document.title == "Dask: datapipe counters"
    assert data["stage"] == list(want)
    for col in ("in", "kept", "rejected", "errored"):
        assert data[col] == [want[n][col] for n in data["stage"]]


def test_tasks_report_counts_while_they_run(cluster_run):
    """Per-batch events carry growing counts; each task's last event equals its ledger."""
    by_task = {}
    for ev in cluster_run["events"]:
        by_task.setdefault(ev["task"], []).append(ev)
    for rec in cluster_run["res"].tasks:
        evs = by_task[rec["task_id"]]
        reads = [e["stages"]["read"][0] for e in evs]
        assert reads == sorted(reads)
        st = rec["ledger"]["stages"]
        assert {k: list(v) for k, v in evs[-1]["stages"].items()} == {k: [s["in"], s["kept"], sum(s["rejected"].values()),
                                         sum(s["errored"].values())] for k, s in st.items()}
        if st["read"]["in"] > 3 * 8:  # enough records for batches of 8 to report before the end
            assert len(evs) > 1 and evs[0]["stages"]["read"][0] < st["read"]["in"]
    assert any(len(v) > 1 for v in by_task.values())


def test_progress_per_phase(cluster_run):
    prog, led = cluster_run["prog"], cluster_run["ledger"]
    t = prog.files.tasks[0]
    assert t.total == sum(os.path.getsize(p) for p in cluster_run["inputs"]) and t.completed == t.total
    assert t.fields["records"] == led["stages"]["read"]["in"]
    assert t.fields["done"] == t.fields["tasks"] == len(cluster_run["inputs"])
    assert [s for p, s in prog.steps if p == "dedup"] == [
        "exact duplicates", "near duplicates: LSH bands", "near duplicates: clusters", "write documents"]
    assert [s for p, s in prog.steps if p == "tokenize"] == [
        "tokenize documents", "sample the mixture", "write token shards"]
    shown = cluster_run["console"].file.getvalue()
    for label in ("phase 1: read, extract, filter", "phase 2: dedup", "phase 3: mix + tokenize", "records"):
        assert label in shown


def test_a_retried_task_replaces_its_dead_attempt():
    p = monitor.StageCounters()
    p.log_event(PROGRESS_TOPIC, {"task": "a", "run": "r", "records": 40, "stages": {"read": [40, 30, 10, 0]}})
    p.log_event(PROGRESS_TOPIC, {"task": "b", "run": "r", "records": 5, "stages": {"read": [5, 5, 0, 0]}})
    p.log_event(PROGRESS_TOPIC, {"task": "a", "run": "r", "records": 8, "stages": {"read": [8, 6, 2, 0]}})
    p.log_event("other-topic", {"task": "c", "run": "r", "stages": {"read": [99, 99, 0, 0]}})
    assert p.totals() == {"run": "r", "tasks": 2,
                          "stages": {"read": {"in": 13, "kept": 11, "rejected": 2, "errored": 0}}}


@pytest.mark.parametrize("addr,exposed", [("127.0.0.1:8787", False), ("localhost:0", False), ("[::1]:8787", False),
                                          ("0.0.0.0:8787", True), (":8787", True), ("10.1.2.3:8787", True)])
def test_dashboard_exposed(addr, exposed):
    assert runner.dashboard_exposed(addr) is exposed


def test_binding_the_dashboard_beyond_loopback_warns(tmp_path, caplog):
    def client_for(addr):
        m = load_manifest(REPO / "manifests" / "cc-2026.yaml",
                          {"inputs.crawl": None, "inputs.paths": [str(tmp_path)], "output": str(tmp_path),
                           "cluster.workers": 1, "cluster.dashboard_address": addr})
        return runner.dask_client(m)

    with client_for("127.0.0.1:0"):
        pass
    assert "Dask dashboard listens" not in caplog.text
    with client_for("0.0.0.0:0") as client:
        hosts = client.run_on_scheduler(  # where the dashboard's server really listens
            lambda dask_scheduler: [s.getsockname()[0] for s in dask_scheduler.http_server._sockets.values()])
    assert "the Dask dashboard listens on 0.0.0.0:0" in caplog.text and "0.0.0.0" in hosts
